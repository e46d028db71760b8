import { run, type Terminal } from "./program.ts";

/**
 * `keelson`: the process's edges (environment, terminal, signals) handed to the program once.
 * This is the one module of the CLI that reads process.env.
 */

const terminal: Terminal = {
  env: process.env,
  stdoutTty: process.stdout.isTTY === true,
  stderrTty: process.stderr.isTTY === true,
  stderrColumns: () => process.stderr.columns,
  write: (stream, text) => {
    (stream === "stdout" ? process.stdout : process.stderr).write(text);
  },
  readStdin: async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString("utf8");
  },
  promptSecret,
  onInterrupt: (handler) => {
    process.once("SIGINT", handler);
    return () => process.off("SIGINT", handler);
  },
};

/** A line from the terminal, not echoed (raw mode); Ctrl-C gives up. */
function promptSecret(question: string): Promise<string | undefined> {
  const stdin = process.stdin;
  if (!stdin.isTTY) return Promise.resolve(undefined);
  process.stderr.write(question);
  return new Promise((resolve) => {
    let text = "";
    stdin.setRawMode(true);
    stdin.resume();
    const onData = (data: Buffer) => {
      for (const char of data.toString("utf8")) {
        if (char === "\r" || char === "\n" || char === "\u0004") return finish(text);
        if (char === "\u0003") {
          finish(undefined);
          process.exit(130);
        }
        if (char === "\u007f" || char === "\b") text = text.slice(0, -1);
        else text += char;
      }
    };
    const finish = (value: string | undefined) => {
      stdin.off("data", onData);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write("\n");
      resolve(value);
    };
    stdin.on("data", onData);
  });
}

const code = await run(process.argv.slice(2), terminal);
process.exitCode = code;
// Whatever is still open (a keep-alive socket) must not hold the exit back.
setTimeout(() => process.exit(code), 1000).unref();
