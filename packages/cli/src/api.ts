import { readFileSync } from "node:fs";
import { Agent, request } from "undici";
import { ApiRefusal, CliError, EXIT, usageError } from "./errors.ts";

/**
 * The HTTP client of every command: JSON in and out, the X-Auth-Token header, the API's error
 * shape turned into an `ApiRefusal`, and a control plane that cannot be reached into exit 3.
 * With a CA file, https:// is verified against those certificates (undici's Agent). undici's
 * `request`, not `fetch`: fetch refuses the ports browsers block (10080, 6000, ...), which a
 * control plane may well listen on.
 */

/** What a command reads of an answer. */
export interface Response {
  status: number;
  headers: { get(name: string): string | undefined };
  text(): Promise<string>;
  json(): Promise<unknown>;
  /** The body as it arrives (the events stream). */
  body: AsyncIterable<Uint8Array> & { destroy(): void };
}

export interface ApiOptions {
  url: string;
  token?: string | undefined;
  caFile?: string | undefined;
  timeoutMs: number;
}

type Query = Record<string, string | number | boolean | undefined>;

export class Api {
  readonly url: string;
  private readonly dispatcher: Agent;

  constructor(private readonly options: ApiOptions) {
    this.url = options.url.replace(/\/+$/, "");
    let ca: string | undefined;
    if (options.caFile) {
      try {
        ca = readFileSync(options.caFile, "utf8");
      } catch (error) {
        throw usageError(`cannot read the CA file ${options.caFile}: ${(error as Error).message}`);
      }
    }
    this.dispatcher = new Agent({ ...(ca ? { connect: { ca } } : {}), keepAliveTimeout: 1000 });
  }

  get<T>(path: string, query?: Query): Promise<T> {
    return this.json<T>("GET", path, { query });
  }

  async json<T>(method: string, path: string, options: { query?: Query | undefined; body?: unknown } = {}): Promise<T> {
    const res = await this.send(method, path, options);
    const text = await res.text();
    if (text === "") return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch {
      return text as T;
    }
  }

  /** A write whose answer may carry `Warning` headers (fields the API ignored). */
  async write<T>(method: string, path: string, body?: unknown): Promise<{ body: T; warnings: string[] }> {
    const res = await this.send(method, path, { body });
    const text = await res.text();
    const warnings = (res.headers.get("warning") ?? "")
      .split(/,\s*(?=\d{3} )/)
      .filter(Boolean)
      .map((w) => w.replace(/^\d{3} \S+ /, "").replace(/^"|"$/g, ""));
    return { body: (text ? JSON.parse(text) : undefined) as T, warnings };
  }

  /** The answer's body as text (a kubeconfig). */
  async text(path: string, query?: Query): Promise<string> {
    return (await this.send("GET", path, { query })).text();
  }

  /** A request whose body is read by the caller (the events stream); no timeout once it answered. */
  async send(
    method: string,
    path: string,
    options: {
      query?: Query | undefined;
      body?: unknown;
      headers?: Record<string, string>;
      signal?: AbortSignal;
      /** A stream read for as long as it lasts: the timeout ends once the answer's headers are in. */
      stream?: boolean;
    } = {},
  ): Promise<Response> {
    const target = new URL(`${this.url}${path}`);
    for (const [key, value] of Object.entries(options.query ?? {})) {
      if (value !== undefined) target.searchParams.set(key, String(value));
    }
    const headers: Record<string, string> = { accept: "application/json", ...options.headers };
    if (this.options.token) headers["x-auth-token"] = this.options.token;
    // Bytes go as they are (a package upload); anything else as JSON.
    const raw = Buffer.isBuffer(options.body);
    if (options.body !== undefined) headers["content-type"] = raw ? "application/octet-stream" : "application/json";
    // The timeout covers the whole exchange of an ordinary request, and only the wait for the
    // headers of a stream (whose body goes on as long as the operation it follows).
    const timeout = new AbortController();
    const timer = setTimeout(
      () => timeout.abort(new DOMException("no answer in time", "TimeoutError")),
      this.options.timeoutMs,
    );
    const done = () => clearTimeout(timer);
    const readBody = <T>(read: () => Promise<T>): Promise<T> =>
      read()
        .catch((error: unknown) => {
          throw unreachable(this.url, timeout.signal.aborted ? timeout.signal.reason : error);
        })
        .finally(done);
    let res: Response;
    try {
      const answer = await request(target, {
        method: method as "GET",
        headers,
        ...(options.body !== undefined ? { body: raw ? (options.body as Buffer) : JSON.stringify(options.body) } : {}),
        dispatcher: this.dispatcher,
        signal: options.signal ? AbortSignal.any([options.signal, timeout.signal]) : timeout.signal,
      });
      const body = answer.body;
      res = {
        status: answer.statusCode,
        headers: {
          get: (name) => {
            const value = answer.headers[name.toLowerCase()];
            return Array.isArray(value) ? value.join(", ") : value;
          },
        },
        text: () => readBody(() => body.text()),
        json: () => readBody(() => body.json()),
        body: body as unknown as Response["body"],
      };
    } catch (error) {
      done();
      if (options.signal?.aborted) throw error;
      throw unreachable(this.url, timeout.signal.aborted ? timeout.signal.reason : error);
    }
    if (options.stream) done();
    if (res.status >= 400) throw await refusal(res);
    return res;
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
  }
}

function unreachable(url: string, error: unknown): CliError {
  const err = error as Error & { code?: string; cause?: Error & { code?: string } };
  const detail = err.cause?.message ?? err.message ?? err.code;
  const cause = err.name === "TimeoutError" || err.name === "AbortError" ? "no answer in time" : detail;
  return new CliError(`cannot reach the control plane at ${url}: ${cause}`, EXIT.unreachable);
}

async function refusal(res: Response): Promise<ApiRefusal> {
  const text = await res.text().catch(() => "");
  try {
    const body = JSON.parse(text) as { code?: unknown; message?: unknown; field?: unknown };
    if (typeof body.message === "string") {
      return new ApiRefusal(
        res.status,
        typeof body.code === "string" ? body.code : "error",
        body.message,
        typeof body.field === "string" ? body.field : undefined,
      );
    }
  } catch {
    // not the API's error shape
  }
  return new ApiRefusal(res.status, "error", text.slice(0, 300) || `HTTP ${res.status}`);
}
