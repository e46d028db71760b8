import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type NodePackageRef, verifyNodePackageDir } from "@keelson/protocol";
import type { Logger } from "pino";
import { downloadPackage } from "../upgrade/download.ts";
import { unpackTarball } from "../upgrade/unpack.ts";

/**
 * The node packages this host runs (docs/node-package.md). A package handed over with
 * `node.join`/`node.upgrade` is downloaded from the control plane, checked (its sha256 as the
 * control plane gave it over the signed-in link, then every file against its manifest and the
 * manifest's role version against the one asked for) and unpacked into
 * `<state dir>/node-packages/<roleVersion>-<sha256 prefix>/`; the phases then run its binaries.
 * Without a package the node runs the host's own, KEELSON_NODE_PACKAGE.
 */

export const NODE_PACKAGES_DIR = "node-packages";
/** Written last into an installed package: a directory without it is a torn install. */
const INSTALLED_MARKER = ".installed";

export class NodePackageError extends Error {
  override name = "NodePackageError";
}

export interface NodePackagesOptions {
  stateDir: string;
  /** The URL of the control plane linked to now (ControlPlanes): package URLs are relative to it. */
  controlPlane: () => string;
  /** KEELSON_NODE_PACKAGE: the host's own package, for clusters the control plane serves none to. */
  hostPackage: string;
  /** Downloads with the control plane's trust (link/trust.ts). */
  fetch?: typeof fetch;
  log: Logger;
}

export class NodePackages {
  private readonly root: string;
  private readonly installing = new Map<string, Promise<string>>();

  constructor(private readonly options: NodePackagesOptions) {
    this.root = join(options.stateDir, NODE_PACKAGES_DIR);
  }

  /** The directory of `ref`'s package, installing it first when needed (idempotent, one at a time per package). */
  ensure(ref: NodePackageRef | undefined, signal?: AbortSignal): Promise<string> {
    if (!ref) return Promise.resolve(this.options.hostPackage);
    const dir = this.dirOf(ref);
    if (this.isInstalled(dir, ref)) return Promise.resolve(dir);
    let pending = this.installing.get(dir);
    if (!pending) {
      pending = this.install(ref, dir, signal).finally(() => this.installing.delete(dir));
      this.installing.set(dir, pending);
    }
    return pending;
  }

  /** Removes installed packages other than `keep`'s (the current one and the one before, for a look back). */
  prune(keep: (NodePackageRef | undefined)[]): void {
    const wanted = new Set(keep.flatMap((ref) => (ref ? [this.dirOf(ref)] : [])));
    let names: string[];
    try {
      names = readdirSync(this.root);
    } catch {
      return;
    }
    for (const name of names) {
      const dir = join(this.root, name);
      if (wanted.has(dir) || this.installing.has(dir)) continue;
      rmSync(dir, { recursive: true, force: true });
      this.options.log.info({ dir }, "removed a node package no longer used");
    }
  }

  private dirOf(ref: NodePackageRef): string {
    return join(this.root, `${ref.roleVersion}-${ref.sha256.slice(0, 16)}`);
  }

  private isInstalled(dir: string, ref: NodePackageRef): boolean {
    try {
      return readFileSync(join(dir, INSTALLED_MARKER), "utf8").trim() === ref.sha256;
    } catch {
      return false;
    }
  }

  private async install(ref: NodePackageRef, dir: string, signal?: AbortSignal): Promise<string> {
    mkdirSync(this.root, { recursive: true });
    const url = new URL(ref.url, `${this.options.controlPlane()}/`).href;
    const stamp = randomUUID();
    const tarball = join(this.root, `.download-${stamp}.tar.gz`);
    const staged = join(this.root, `.unpack-${stamp}`);
    const log = this.options.log.child({ roleVersion: ref.roleVersion, url });
    log.info("installing node package");
    try {
      const got = await downloadPackage(url, tarball, {
        ...(signal ? { signal } : {}),
        ...(this.options.fetch ? { fetch: this.options.fetch } : {}),
      });
      if (got.sha256 !== ref.sha256) {
        throw new NodePackageError(
          `node package ${ref.roleVersion} from ${url} has sha256 ${got.sha256}, not ${ref.sha256} as the control plane said`,
        );
      }
      mkdirSync(staged);
      await unpackTarball(tarball, staged, signal);
      const manifest = await verifyNodePackageDir(staged, ref.roleVersion).catch((err: Error) => {
        throw new NodePackageError(`node package ${ref.roleVersion} is refused: ${err.message}`);
      });
      writeFileSync(join(staged, INSTALLED_MARKER), `${ref.sha256}\n`);
      // A torn earlier install (no marker) is replaced; the rename makes the new one appear whole.
      rmSync(dir, { recursive: true, force: true });
      renameSync(staged, dir);
      log.info({ dir, kubernetesVersion: manifest.kubernetesVersion }, "node package installed");
      return dir;
    } finally {
      rmSync(tarball, { force: true });
      if (existsSync(staged)) rmSync(staged, { recursive: true, force: true });
    }
  }
}
