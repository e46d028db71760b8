/**
 * The PATH that node services and commands run with: the agent's own, passed on (systemd gives
 * the agent a sane one), else the standard system directories. Forwarding it is not a setting of
 * the agent, so it is read here and nowhere else.
 */
export function childPath(): string {
  return process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin";
}
