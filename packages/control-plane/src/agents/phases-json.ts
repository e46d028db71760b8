import type { NodePhaseReport } from "@keelson/protocol";

/** Texts by the phases list they were made of: a report's list is never changed once parsed. */
const texts = new WeakMap<NodePhaseReport["phases"], string>();

/**
 * A node report's phases as JSON text, made once per report: the report's list (21 phases,
 * about 4 KB) goes to the node's row (node-reports.ts) and into the event log's payload
 * (node-event-records.ts), and a rollout brings two reports a node. The list is the parsed
 * frame's, which nothing changes after it is validated.
 */
export function phasesJson(phases: NodePhaseReport["phases"]): string {
  let text = texts.get(phases);
  if (text === undefined) {
    text = JSON.stringify(phases);
    texts.set(phases, text);
  }
  return text;
}
