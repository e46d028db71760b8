import { setOutgoingFrameChecks } from "@keelson/protocol";
import { SETTINGS_EXIT_CODE, SettingsError } from "@keelson/settings";
import pino from "pino";
import { Agent, AgentStartError } from "./agent.ts";
import { setChildPath } from "./services/child-path.ts";
import { readAgentSettings } from "./settings.ts";
import { AGENT_VERSION } from "./version.ts";

/**
 * keelson-agent's process: settings parsed once, one Agent, signals, exit codes. The exit code
 * tells the launcher and systemd what happened: 0 stopped, 75 start me again (new version),
 * 77 refused by the control plane, 78 bad configuration (upgrade/ipc.ts).
 */
if (process.argv.includes("--version")) {
  process.stdout.write(`${AGENT_VERSION}\n`);
  process.exit(0);
}

let agent: Agent;
try {
  const settings = readAgentSettings(process.env, process.argv.slice(2));
  setOutgoingFrameChecks(settings.nodeEnv !== "production");
  setChildPath(settings.path);
  agent = new Agent(settings);
} catch (err) {
  if (!(err instanceof SettingsError)) throw err;
  pino({ name: "keelson-agent" }).fatal(err.message);
  process.exit(SETTINGS_EXIT_CODE);
}

const onStopRequest = (reason: string) => void agent.stop(reason);
process.on("SIGTERM", () => onStopRequest("SIGTERM"));
process.on("SIGINT", () => onStopRequest("SIGINT"));
// The launcher went away (killed): an agent nobody supervises must not linger.
process.on("disconnect", () => onStopRequest("launcher gone"));
void agent.stopped.then((code) => process.exit(code));

try {
  await agent.start();
} catch (err) {
  if (!(err instanceof AgentStartError)) throw err;
  agent.log.fatal(err.code ? { code: err.code } : {}, err.message);
  process.exit(err.exitCode);
}
