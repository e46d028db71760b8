import type { ServerResponse } from "node:http";

/**
 * The events streams (`GET /v4/{project}/events`) this replica serves, so they can be ended
 * together: when the server closes (an open stream would hold app.close() until its client
 * left), and when the replica drains (`handOver`, a drain target beside the runner and the
 * agent hub). Their clients reconnect with Last-Event-ID and miss nothing: behind a load
 * balancer that checks `/readyz` to a replica that is not draining, else to this one again.
 */
export class OpenStreams {
  private readonly open = new Set<ServerResponse>();

  add(res: ServerResponse): void {
    this.open.add(res);
  }

  delete(res: ServerResponse): void {
    this.open.delete(res);
  }

  get size(): number {
    return this.open.size;
  }

  /**
   * Ends every stream open now, and its connection: a client's reconnect then opens a new one,
   * which a load balancer in front of the replicas sends to a live one (a kept-alive connection
   * would take it back here). How many.
   */
  endAll(): number {
    const ending = [...this.open];
    for (const res of ending) {
      const socket = res.socket;
      res.end();
      socket?.end();
    }
    return ending.length;
  }

  /** A drain: the streams open now end (new ones are still served: the API keeps answering). */
  async handOver(): Promise<void> {
    this.endAll();
  }
}
