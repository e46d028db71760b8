/**
 * The PATH that node services and commands run with: the agent's `path` setting (its own PATH,
 * which systemd sets), handed over once at start like the other process-wide switches; until
 * then (tests that build phases without an agent) the standard system directories.
 */
let current = "/usr/sbin:/usr/bin:/sbin:/bin";

export function setChildPath(path: string): void {
  current = path;
}

export function childPath(): string {
  return current;
}
