import {
  AGENT_CAPABILITIES,
  NODE_PACKAGE_NAME,
  type NodePackageRef,
  ROLE_VERSION_PATTERN,
  verifyNodePackageDir,
} from "@keelson/protocol";
import type { AgentHub } from "../../agents/hub.ts";
import { badRequest } from "../../http/errors.ts";
import type { Catalogue } from "../catalogue/catalogue.ts";
import { PackageShelf, type ShelfKind, type ShelfPlace } from "./shelf.ts";
import { verifyPackageTarball } from "./verify.ts";

/**
 * Node packages (`pnpm pack:node`): the binaries of one kube role version. Only role versions
 * of the catalogue are stored, since no cluster can run any other.
 */
export function nodeShelfKind(catalogue: Catalogue): ShelfKind {
  return {
    dir: "node",
    stem: NODE_PACKAGE_NAME,
    label: "node package",
    buildHint: "pnpm pack:node",
    routeBase: "/v1/nodePackages",
    versionPattern: new RegExp(ROLE_VERSION_PATTERN),
    verify: async (tarball, dir) =>
      (await verifyPackageTarball(tarball, dir, (d) => verifyNodePackageDir(d))).roleVersion,
    accept(version) {
      if (!catalogue.find(version)) {
        throw badRequest(
          "package",
          `the node package is for role version ${version}, which is not in the catalogue (GET /v4/{project}/clusters/supportedRoleVersions)`,
        );
      }
    },
  };
}

export function nodeShelf(k: ShelfPlace & { catalogue: Catalogue }): PackageShelf {
  return new PackageShelf(nodeShelfKind(k.catalogue), k);
}

/**
 * What `node.join` / `node.upgrade` carry for `roleVersion`: the stored package's path (the
 * agent resolves it against its control-plane URL) and sha256; undefined when none is stored,
 * and the node runs the package installed on its host.
 */
export async function nodePackageRef(
  k: ShelfPlace & { catalogue: Catalogue },
  roleVersion: string,
): Promise<NodePackageRef | undefined> {
  const shelf = nodeShelf(k);
  const pkg = await shelf.find(roleVersion);
  return pkg ? { roleVersion, url: shelf.downloadPath(roleVersion), sha256: pkg.sha256 } : undefined;
}

/**
 * Why a node cannot be handed a node package: its agent, connected now, did not declare it
 * takes them (an older agent, which would drop its link on the unknown field). Undefined when
 * it can, or when it is offline (it is asked once it is back).
 */
export function nodePackageRefusal(hub: AgentHub, hostId: string, label: string): string | undefined {
  if (hub.supports(hostId, AGENT_CAPABILITIES.nodePackages) !== false) return undefined;
  return (
    `${label} runs an agent too old for node packages; upgrade its agent first ` +
    "(POST /v4/{project}/hostAgentUpgrades)"
  );
}
