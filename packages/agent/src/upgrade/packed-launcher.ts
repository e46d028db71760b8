import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { runSupervisor } from "./supervisor.ts";

/**
 * The launcher as an agent package ships it (`launcher.mjs`, bundled by `pnpm pack:agent`): the
 * same supervisor as `bin/keelson-agent.mjs`, but a host installed from a package has no
 * workspace sources and no tsx, so without an upgraded `versions/current` it runs the agent
 * bundled beside it. This is what `GET /v1/install/agent.sh` installs and the unit starts.
 */
const here = dirname(fileURLToPath(import.meta.url));
process.exitCode = await runSupervisor({
  argv: process.argv.slice(2),
  env: process.env,
  workspaceCommand: { command: process.execPath, args: [join(here, "agent.mjs")] },
});
