import {
  AGENT_CAPABILITIES,
  CloseCode,
  CONTROL_CAPABILITIES,
  type HelloFrame,
  PROTOCOL_VERSION,
  type WelcomeFrame,
} from "@keelson/protocol";
import type { AgentSession } from "./sessions.ts";

/** Why a session's hello is refused (the link is closed with `code`); undefined when it is accepted. */
export function helloRefusal(session: AgentSession, hello: HelloFrame): { code: number; reason: string } | undefined {
  if (session.helloed) return { code: CloseCode.BAD_FRAME, reason: "hello may be sent only once per connection" };
  if (hello.hostId !== session.hostId)
    return {
      code: CloseCode.UNAUTHORIZED,
      reason: `the credential belongs to host ${session.hostId}, not ${hello.hostId}`,
    };
  return undefined;
}

/** What the control plane offers for each capability an agent declares (a new pair is one line here). */
const OFFERS: readonly (readonly [agent: string, control: string])[] = [
  [AGENT_CAPABILITIES.reportCommand, CONTROL_CAPABILITIES.reportCommand],
  [AGENT_CAPABILITIES.clusterReport, CONTROL_CAPABILITIES.clusterReport],
];

/** The answer to a session's accepted hello: who it is now, how often it is pinged, what the control plane offers it. */
export function welcomeFrame(session: AgentSession, heartbeatMs: number): WelcomeFrame {
  const offered = OFFERS.filter(([agent]) => session.capabilities.has(agent)).map(([, control]) => control);
  return {
    type: "welcome",
    protocolVersion: PROTOCOL_VERSION,
    hostId: session.hostId,
    projectId: session.projectId,
    heartbeatMs,
    // Only to an agent that declared it: an older agent refuses a welcome field it does not know.
    ...(offered.length > 0 ? { capabilities: offered } : {}),
  };
}
