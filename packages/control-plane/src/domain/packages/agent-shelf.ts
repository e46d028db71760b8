import { AGENT_PACKAGE_NAME, AGENT_VERSION_PATTERN, verifyAgentPackageDir } from "@keelson/protocol";
import { PackageShelf, type ShelfKind, type ShelfPlace } from "./shelf.ts";
import { verifyPackageTarball } from "./verify.ts";

/** Agent packages (`pnpm pack:agent`), installed by hosts' self-upgrade. */
export const AGENT_SHELF: ShelfKind = {
  dir: "agent",
  stem: AGENT_PACKAGE_NAME,
  label: "agent package",
  buildHint: "pnpm pack:agent",
  routeBase: "/v1/agentPackages",
  versionPattern: new RegExp(AGENT_VERSION_PATTERN),
  verify: async (tarball, dir) => (await verifyPackageTarball(tarball, dir, (d) => verifyAgentPackageDir(d))).version,
};

export function agentShelf(place: ShelfPlace): PackageShelf {
  return new PackageShelf(AGENT_SHELF, place);
}
