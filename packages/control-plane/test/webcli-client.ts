import { WebSocket } from "ws";

/** A web CLI frame as the server sends it. */
export type Frame = { type: string; [key: string]: unknown };

/** A client that records every server frame and the close. */
export class Client {
  readonly frames: Frame[] = [];
  closed: Promise<{ code: number; reason: string }>;
  private readonly ws: WebSocket;
  constructor(url: string) {
    this.ws = new WebSocket(url);
    this.ws.on("message", (data) => this.frames.push(JSON.parse(String(data)) as Frame));
    this.closed = new Promise((resolve) =>
      this.ws.on("close", (code, reason) => resolve({ code, reason: String(reason) })),
    );
  }
  opened(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.ws.once("open", () => resolve());
      this.ws.once("error", reject);
    });
  }
  send(frame: unknown): void {
    this.ws.send(typeof frame === "string" ? frame : JSON.stringify(frame));
  }
  async next(type: string, from = 0, timeoutMs = 15_000): Promise<Frame> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.frames.slice(from).find((f) => f.type === type || f.type === "error");
      if (found) return found;
      if (Date.now() > deadline) throw new Error(`no ${type} frame; got ${JSON.stringify(this.frames)}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }
  /** Sends one line and returns its output (stdout, stderr) and exit code. */
  async run(line: string): Promise<{ stdout: string; stderr: string; code: number }> {
    const from = this.frames.length;
    this.send({ type: "input", data: line });
    const exit = await this.next("exit", from);
    if (exit.type === "error") throw new Error(`error frame: ${JSON.stringify(exit)}`);
    const out = this.frames.slice(from).filter((f) => f.type === "output");
    const text = (stream: string) =>
      out
        .filter((f) => f.stream === stream)
        .map((f) => f.data)
        .join("");
    return { stdout: text("stdout"), stderr: text("stderr"), code: exit.code as number };
  }
  close(): void {
    this.ws.close();
  }
}

/** A connection to `url` that has sent its auth frame with `token`. */
export async function openSession(url: string, token: string): Promise<Client> {
  const client = new Client(url);
  await client.opened();
  client.send({ type: "auth", token });
  return client;
}
