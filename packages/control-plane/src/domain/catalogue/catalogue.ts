import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export interface RoleVersion {
  roleVersion: string;
  kubernetesVersion: string;
  containerRuntime: string;
  etcdVersion: string;
  nodePackage: { name: string; version: string; file: string };
  addons: Record<string, string>;
}

export interface CatalogueFile {
  catalogueVersion: number;
  addonOperatorTags: string[];
  defaultAddonOperatorTag: string;
  roleVersions: RoleVersion[];
}

export interface ParsedRoleVersion {
  major: number;
  minor: number;
  patch: number;
  /** The `-kls.N` build number of Keelson's node package for that Kubernetes version. */
  build: number;
}

const ROLE_VERSION = /^(\d+)\.(\d+)\.(\d+)-kls\.(\d+)$/;

export function parseRoleVersion(value: string): ParsedRoleVersion | null {
  const m = ROLE_VERSION.exec(value);
  if (!m) return null;
  return { major: Number(m[1]), minor: Number(m[2]), patch: Number(m[3]), build: Number(m[4]) };
}

function compare(a: ParsedRoleVersion, b: ParsedRoleVersion): number {
  return a.major - b.major || a.minor - b.minor || a.patch - b.patch || a.build - b.build;
}

/** What a cluster at `current` may upgrade to (the fields canUpgrade & co. derive from this). */
export interface UpgradeTargets {
  patch: string | null;
  minor: string | null;
}

/**
 * The versioned catalogue of role versions and their add-ons, read from the file committed
 * beside the package. Immutable once loaded.
 */
export class Catalogue {
  readonly roles: readonly RoleVersion[];
  private readonly byVersion: Map<string, RoleVersion>;
  private readonly parsed: Map<string, ParsedRoleVersion>;

  constructor(readonly file: CatalogueFile) {
    this.parsed = new Map();
    for (const role of file.roleVersions) {
      const parsed = parseRoleVersion(role.roleVersion);
      if (!parsed) throw new Error(`catalogue: bad role version ${role.roleVersion}`);
      this.parsed.set(role.roleVersion, parsed);
    }
    this.roles = [...file.roleVersions].sort((a, b) =>
      compare(this.parsed.get(a.roleVersion) as ParsedRoleVersion, this.parsed.get(b.roleVersion) as ParsedRoleVersion),
    );
    this.byVersion = new Map(this.roles.map((r) => [r.roleVersion, r]));
  }

  get newest(): RoleVersion {
    const last = this.roles.at(-1);
    if (!last) throw new Error("catalogue has no role versions");
    return last;
  }

  find(roleVersion: string): RoleVersion | undefined {
    return this.byVersion.get(roleVersion);
  }

  parse(roleVersion: string): ParsedRoleVersion | undefined {
    return this.parsed.get(roleVersion);
  }

  /** Stable id of a role version, the same on every control plane with the same catalogue. */
  uuidOf(roleVersion: string): string {
    const h = createHash("sha256").update(`keelson-role:${roleVersion}`).digest("hex");
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
  }

  /**
   * Patch upgrade: the newest role version of the same minor that is newer than `current`.
   * Minor upgrade: the newest role version of the next minor (Kubernetes upgrades one minor at a time).
   */
  upgradeTargets(current: string): UpgradeTargets {
    const from = this.parsed.get(current);
    if (!from) return { patch: null, minor: null };
    let patch: RoleVersion | null = null;
    let minor: RoleVersion | null = null;
    for (const role of this.roles) {
      const to = this.parsed.get(role.roleVersion) as ParsedRoleVersion;
      if (to.major === from.major && to.minor === from.minor && compare(to, from) > 0) patch = role;
      if (to.major === from.major && to.minor === from.minor + 1) minor = role;
    }
    return { patch: patch?.roleVersion ?? null, minor: minor?.roleVersion ?? null };
  }

  /**
   * The role versions a cluster at `current` runs now or can reach by upgrading: `current`, the
   * newer builds of its minor, and the next minor (upgrades go one minor at a time). Oldest first;
   * empty when `current` is not in the catalogue.
   */
  reachableFrom(current: string): RoleVersion[] {
    const from = this.parsed.get(current);
    if (!from) return [];
    return this.roles.filter((role) => {
      const to = this.parsed.get(role.roleVersion) as ParsedRoleVersion;
      return to.major === from.major && to.minor <= from.minor + 1 && compare(to, from) >= 0;
    });
  }
}

const defaultFile = join(dirname(fileURLToPath(import.meta.url)), "role-versions.json");

export function loadCatalogue(file = defaultFile): Catalogue {
  return new Catalogue(JSON.parse(readFileSync(file, "utf8")) as CatalogueFile);
}
