/**
 * Identities for simulated agents that talk to a bare baseline server, which registers nobody
 * and checks no credential: made up, in a stable order.
 */
export function bareIdentities(count: number): { hostId: string; credential: string; projectId: string }[] {
  return Array.from({ length: count }, (_, i) => ({
    hostId: `bare-${String(i).padStart(5, "0")}`,
    credential: "none",
    projectId: "bare",
  }));
}
