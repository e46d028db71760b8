import { rmSync } from "node:fs";
import { type CommandPayload, NodeJoinPayload } from "@keelson/protocol";
import { type Static, Type } from "typebox";
import { Compile } from "typebox/compile";
import { readTextOrUndefined, writeFileAtomic } from "../services/atomic-file.ts";

/**
 * The node's desired state: the cluster membership the control plane asked for with
 * `node.join`, kept in the state dir (node.json) so an agent restart resumes the node where it
 * was. Written atomically; absent when the host is in no cluster.
 */

export const DESIRED_STATE_FILE = "node.json";

const DesiredStateSchema = Type.Object({
  version: Type.Literal(1),
  /** The join as received (the control plane's view of the cluster at that time). */
  join: NodeJoinPayload,
  /** The host as it was when it joined: the node keeps its name and address while a member. */
  hostname: Type.String({ minLength: 1 }),
  primaryIp: Type.String({ minLength: 1 }),
  joinedAt: Type.String(),
  /**
   * The node.restart / node.upgrade command the node's phases last restarted for: named in its
   * reports, so the control plane tells this command's work from anything before it. Kept
   * across agent restarts (the resumed phases still show that command's work).
   */
  command: Type.Optional(Type.String({ minLength: 1 })),
});
export type DesiredState = Static<typeof DesiredStateSchema>;
export type JoinRequest = CommandPayload<"node.join">;

const check = Compile(DesiredStateSchema);

export function saveDesiredState(file: string, state: DesiredState): void {
  writeFileAtomic(file, `${JSON.stringify(state, null, 2)}\n`, 0o600);
}

/**
 * The saved state, or undefined when there is none. A file that does not parse or has another
 * shape is an error, not "no cluster": silently forgetting a membership would leave the node's
 * services running unmanaged while the control plane believes it is a member.
 */
export function loadDesiredState(file: string): DesiredState | undefined {
  const text = readTextOrUndefined(file);
  if (text === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new Error(`${file} is not valid JSON (${(err as Error).message}); fix or remove it`);
  }
  if (!check.Check(value)) throw new Error(`${file} is not a node desired state; fix or remove it`);
  return value;
}

export function clearDesiredState(file: string): void {
  rmSync(file, { force: true });
}
