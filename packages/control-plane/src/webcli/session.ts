import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ResultPromise } from "execa";
import type { FastifyBaseLogger } from "fastify";
import type { WebSocket } from "ws";
import type { ServerSettings } from "../settings.ts";
import { splitCommandLine } from "./argv.ts";
import { encodeServerFrame, type ServerFrame } from "./frames.ts";
import { decide, HELP_TEXT } from "./policy.ts";

/** Exit codes a shell would give: refused (cannot execute), timed out, killed for its output. */
export const EXIT = { refused: 126, timeout: 124, outputLimit: 125 } as const;

type Limits = Pick<ServerSettings, "webcliKubectl" | "webcliCommandTimeoutMs" | "webcliOutputLimitBytes">;

/**
 * One authorised web CLI session: a private temp dir (mode 0700) holding the session's
 * kubeconfig and `bin/kubectl` (a link to the one kubectl, the only thing on PATH), and one
 * command at a time run there with execa, no shell, a clean environment, a time limit and an
 * output cap. `close()` kills what runs and removes the directory.
 */
export class WebCliSession {
  private running: ResultPromise | undefined;
  private cols = 120;
  private closed = false;

  private constructor(
    private readonly socket: WebSocket,
    readonly dir: string,
    private readonly limits: Limits,
    private readonly log: FastifyBaseLogger,
  ) {}

  static async open(
    socket: WebSocket,
    kubeconfigYaml: string,
    limits: Limits,
    log: FastifyBaseLogger,
  ): Promise<WebCliSession> {
    const dir = await mkdtemp(join(tmpdir(), "keelson-webcli-"));
    try {
      await mkdir(join(dir, "bin"), { mode: 0o700 });
      await symlink(limits.webcliKubectl, join(dir, "bin", "kubectl"));
      await writeFile(join(dir, "kubeconfig"), kubeconfigYaml, { mode: 0o600 });
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
    return new WebCliSession(socket, dir, limits, log);
  }

  send(frame: ServerFrame): void {
    if (this.socket.readyState === this.socket.OPEN) this.socket.send(encodeServerFrame(frame));
  }

  resize(cols: number): void {
    this.cols = cols;
  }

  /** Runs one line; resolves when its `exit` frame is sent (or the session asks to end: true). */
  async input(line: string): Promise<boolean> {
    if (this.running) {
      this.stderr("a command is still running; wait for its exit\n");
      this.send({ type: "exit", code: 1 });
      return false;
    }
    const split = splitCommandLine(line);
    if (!split.ok) return this.refuse(split.message);
    const decision = decide(split.argv, this.dir);
    switch (decision.kind) {
      case "nothing":
        this.send({ type: "exit", code: 0 });
        return false;
      case "help":
        this.send({ type: "output", stream: "stdout", data: HELP_TEXT });
        this.send({ type: "exit", code: 0 });
        return false;
      case "exit":
        this.send({ type: "exit", code: 0 });
        return true;
      case "refused":
        return this.refuse(decision.message);
      case "kubectl":
        this.send({ type: "exit", code: await this.kubectl(decision.args) });
        return false;
    }
  }

  private refuse(message: string): false {
    this.stderr(`${message}\n`);
    this.send({ type: "exit", code: EXIT.refused });
    return false;
  }

  private stderr(data: string): void {
    this.send({ type: "output", stream: "stderr", data });
  }

  private async kubectl(args: string[]): Promise<number> {
    // Loaded at the first web CLI command, not at start: execa is a hundred modules that an
    // idle server (and one holding thousands of agent links) would keep in memory for nothing.
    const { execa } = await import("execa");
    const child = execa(join(this.dir, "bin", "kubectl"), args, {
      shell: false,
      extendEnv: false,
      env: {
        PATH: join(this.dir, "bin"),
        HOME: this.dir,
        KUBECONFIG: join(this.dir, "kubeconfig"),
        COLUMNS: String(this.cols),
      },
      cwd: this.dir,
      stdin: "ignore",
      buffer: false,
      reject: false,
      timeout: this.limits.webcliCommandTimeoutMs,
      killSignal: "SIGKILL",
    });
    this.running = child;
    let sent = 0;
    let overLimit = false;
    const forward = (stream: "stdout" | "stderr") => (chunk: string) => {
      if (overLimit) return;
      sent += Buffer.byteLength(chunk);
      if (sent > this.limits.webcliOutputLimitBytes) {
        overLimit = true;
        child.kill("SIGKILL");
        return;
      }
      this.send({ type: "output", stream, data: chunk });
    };
    child.stdout?.setEncoding("utf8").on("data", forward("stdout"));
    child.stderr?.setEncoding("utf8").on("data", forward("stderr"));
    try {
      const result = await child;
      if (overLimit) {
        this.stderr(`\noutput stopped at ${this.limits.webcliOutputLimitBytes} bytes; the command was ended\n`);
        return EXIT.outputLimit;
      }
      if (result.timedOut) {
        this.stderr(`\nthe command ran longer than ${this.limits.webcliCommandTimeoutMs} ms and was ended\n`);
        return EXIT.timeout;
      }
      if (result.failed && result.exitCode === undefined) {
        this.log.warn({ err: result.message }, "web CLI: kubectl did not run");
        this.stderr(`kubectl did not run: ${result.shortMessage}\n`);
        return EXIT.refused;
      }
      return result.exitCode ?? 1;
    } finally {
      this.running = undefined;
    }
  }

  /** Ends what runs and removes the session's directory (its kubeconfig with it). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const running = this.running;
    if (running) {
      running.kill("SIGKILL");
      await running.catch(() => undefined);
    }
    await rm(this.dir, { recursive: true, force: true });
  }
}
