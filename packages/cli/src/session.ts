import { Api } from "./api.ts";
import { type ConfigFile, type Context, defaultConfigPath, findContext, readConfig } from "./config-file.ts";
import { CliError, EXIT, usageError } from "./errors.ts";
import type { Out } from "./output.ts";
import type { CliSettings } from "./settings.ts";

/**
 * What a command runs with: the settings (flags and environment, parsed once by main.ts), the
 * config file, and, for commands that talk to the API, a session: the client and the project,
 * each setting taken from the flag or variable first, then from the context.
 */

export interface Io {
  out: Out;
  /** Standard input, for `--password-stdin` and `-f -`. */
  readStdin(): Promise<string>;
  /** Reads a line from the terminal without echo; undefined when stdin is not a terminal. */
  promptSecret(question: string): Promise<string | undefined>;
  /** Called once on Ctrl-C (watching stops; the operation goes on). */
  onInterrupt(handler: () => void): () => void;
}

export interface Session {
  api: Api;
  projectId: string;
  projectName: string | undefined;
  context: Context | undefined;
}

export class Cli {
  readonly configPath: string;
  private sessionPromise: Promise<Session> | undefined;

  constructor(
    readonly settings: CliSettings,
    readonly io: Io,
  ) {
    this.configPath = settings.config ?? defaultConfigPath();
  }

  get out(): Out {
    return this.io.out;
  }

  readConfig(): ConfigFile {
    return readConfig(this.configPath);
  }

  /** The context in use (`--context`, else the current one); an unknown `--context` is a usage error. */
  context(config = this.readConfig()): Context | undefined {
    const context = findContext(config, this.settings.context);
    if (this.settings.context && !context) {
      throw usageError(`no context "${this.settings.context}" in ${this.configPath} (see keelson config get-contexts)`);
    }
    return context;
  }

  /** A client for a URL, with the CA file of the settings or the context. */
  client(url: string, token: string | undefined, context?: Context): Api {
    return new Api({
      url,
      token,
      caFile: this.settings.caFile ?? context?.caFile,
      timeoutMs: this.settings.requestTimeoutMs,
    });
  }

  session(): Promise<Session> {
    this.sessionPromise ??= this.openSession();
    return this.sessionPromise;
  }

  async close(): Promise<void> {
    const session = await this.sessionPromise?.catch(() => undefined);
    await session?.api.close();
  }

  private async openSession(): Promise<Session> {
    const context = this.context();
    const url = this.settings.url ?? context?.url;
    if (!url) {
      throw usageError(
        "no control plane URL: give --url or KEELSON_URL, or log in first (keelson login --url URL ...)",
      );
    }
    // A context's token is only ever sent to that context's own control plane.
    const sameServer = context?.url !== undefined && trimSlash(context.url) === trimSlash(url);
    const token = this.settings.token ?? (sameServer ? context?.token : undefined);
    if (!token) throw usageError(`no token for ${url}: give --token or KEELSON_TOKEN, or run keelson login`);
    const api = this.client(url, token, sameServer ? context : undefined);
    const wanted = this.settings.project ?? (sameServer ? context?.project : undefined) ?? "default";
    const project = await resolveProject(api, wanted, sameServer ? context : undefined);
    return { api, projectId: project.id, projectName: project.name, context };
  }
}

const trimSlash = (url: string) => url.replace(/\/+$/, "");

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

async function resolveProject(
  api: Api,
  wanted: string,
  context: Context | undefined,
): Promise<{ id: string; name: string | undefined }> {
  if (UUID.test(wanted)) return { id: wanted, name: context?.project === wanted ? context.projectName : undefined };
  const { projects } = await api.get<{ projects: { id: string; name: string }[] }>("/v1/projects");
  const found = projects.find((p) => p.name === wanted);
  if (!found) {
    const names = projects.map((p) => p.name).join(", ") || "none";
    throw new CliError(`no project "${wanted}" visible to this token (visible: ${names})`, EXIT.failed);
  }
  return found;
}
