import { Terminal } from "@xterm/xterm";
import "@xterm/xterm/css/xterm.css";
import { useEffect, useRef, useState } from "preact/hooks";
import { call, v4 } from "../api.ts";
import type { Session } from "../session.ts";
import { ErrorNote } from "../ui.tsx";

/**
 * The web CLI: a terminal speaking the session protocol of `GET /v1/webcli/session` (same origin).
 * The first frame authenticates with the cluster's web CLI token (POST /v4/{project}/webcli/{uuid});
 * the line is edited here and sent whole on Enter as `{"type":"input","data":...}`; the server
 * answers `ready`, `output` (stdout/stderr), `exit` after each command, or `error` and closes.
 */
export function WebCliPage({ session, clusterId }: { session: Session; clusterId: string }) {
  const box = useRef<HTMLElement>(null);
  const [error, setError] = useState<unknown>(null);
  const [state, setState] = useState("connecting");
  useEffect(() => {
    const term = new Terminal({ convertEol: true, cursorBlink: true, fontSize: 14, screenReaderMode: true });
    term.open(box.current as HTMLElement);
    let socket: WebSocket | null = null;
    let line = "";
    let ready = false;
    // Whether the cursor is at a line's start: output mostly ends with a newline, and the
    // prompt or an exit note after it then starts there rather than after a blank line.
    let atLineStart = true;
    const write = (text: string, plain = text) => {
      term.write(text);
      if (plain) atLineStart = plain.endsWith("\n");
    };
    const fresh = () => (atLineStart ? "" : "\r\n");
    const prompt = () => write(`${fresh()}$ `);
    const send = (frame: unknown) => socket?.readyState === WebSocket.OPEN && socket.send(JSON.stringify(frame));
    const input = term.onData((data) => {
      if (!ready) return;
      for (const ch of data) {
        if (ch === "\r") {
          write("\r\n");
          send({ type: "input", data: line });
          line = "";
        } else if (ch === "\u007f") {
          if (line.length) {
            line = line.slice(0, -1);
            term.write("\b \b");
          }
        } else if (ch >= " ") {
          line += ch;
          write(ch);
        }
      }
    });
    const resize = term.onResize(({ cols, rows }) => send({ type: "resize", cols, rows }));
    call<{ token: string }>(session, v4(session, `webcli/${clusterId}`), { method: "POST" }).then(
      ({ token }) => {
        const scheme = location.protocol === "https:" ? "wss:" : "ws:";
        // Naming the cluster lets the server refuse a token of another cluster (wrong_cluster).
        socket = new WebSocket(
          `${scheme}//${location.host}/v1/webcli/session?cluster=${encodeURIComponent(clusterId)}`,
        );
        // Only auth until `ready`: the server ends a session that sends anything else first.
        socket.onopen = () => send({ type: "auth", token });
        socket.onmessage = (m) => {
          const frame = JSON.parse(String(m.data)) as Record<string, unknown>;
          if (frame.type === "ready") {
            ready = true;
            setState("ready");
            send({ type: "resize", cols: term.cols, rows: term.rows });
            write(`connected to cluster ${String(frame.cluster)}`);
            prompt();
          } else if (frame.type === "output") {
            const data = String(frame.data);
            write(frame.stream === "stderr" ? `\x1b[31m${data}\x1b[0m` : data, data);
          } else if (frame.type === "exit") {
            if (frame.code !== 0) write(`${fresh()}[exit ${String(frame.code)}]`);
            prompt();
          } else if (frame.type === "error") {
            setError(new Error(`${String(frame.message)} (${String(frame.code)})`));
          }
        };
        socket.onclose = () => {
          ready = false;
          setState("closed");
        };
      },
      (err) => {
        setError(err);
        setState("closed");
      },
    );
    return () => {
      input.dispose();
      resize.dispose();
      socket?.close();
      term.dispose();
    };
  }, [session.token, clusterId]);
  return (
    <section aria-labelledby="webcli-title">
      <div class="title-row">
        <h1 id="webcli-title">Web CLI</h1>
        <a href={`#/cluster/${clusterId}`}>Back to the cluster</a>
      </div>
      <p role="status">Session: {state}. Type a kubectl command and press Enter.</p>
      <ErrorNote error={error} />
      <section ref={box} class="webcli-terminal" aria-label="Terminal" />
    </section>
  );
}
