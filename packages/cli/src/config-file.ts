import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { parse, stringify } from "yaml";
import { usageError } from "./errors.ts";

/**
 * The config file (`~/.config/keelson/config.yaml`): named contexts like kubectl's, each a
 * control plane, a project and the token for it. It holds tokens, so it is written 0600 in a
 * 0700 directory, replaced in one rename so a crash never leaves half a file.
 */

export interface Context {
  name: string;
  url?: string;
  project?: string;
  projectName?: string;
  user?: string;
  token?: string;
  caFile?: string;
  /** `login --ca-hash`: the pin its CA file was accepted by (the file holds only that CA). */
  caHash?: string;
}

export interface ConfigFile {
  currentContext?: string;
  contexts: Context[];
}

export function defaultConfigPath(): string {
  return join(homedir(), ".config", "keelson", "config.yaml");
}

const KEYS: Record<keyof Context, string> = {
  name: "name",
  url: "url",
  project: "project",
  projectName: "project-name",
  user: "user",
  token: "token",
  caFile: "ca-file",
  caHash: "ca-hash",
};

export function readConfig(path: string): ConfigFile {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { contexts: [] };
    throw usageError(`cannot read the config file ${path}: ${(error as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = parse(text) ?? {};
  } catch (error) {
    throw usageError(`the config file ${path} is not YAML: ${(error as Error).message}`);
  }
  const raw = doc as { "current-context"?: unknown; contexts?: unknown };
  if (typeof raw !== "object" || (raw.contexts !== undefined && !Array.isArray(raw.contexts))) {
    throw usageError(`the config file ${path} must be a map with a list of contexts`);
  }
  const contexts = ((raw.contexts as Record<string, unknown>[] | undefined) ?? []).map((entry, i) => {
    const context: Record<string, string> = {};
    for (const [key, name] of Object.entries(KEYS)) {
      const value = entry?.[name];
      if (value === undefined || value === null) continue;
      if (typeof value !== "string") throw usageError(`${path}: contexts[${i}].${name} must be text`);
      context[key] = value;
    }
    if (!context.name) throw usageError(`${path}: contexts[${i}] has no name`);
    return context as unknown as Context;
  });
  const current = raw["current-context"];
  return { ...(typeof current === "string" ? { currentContext: current } : {}), contexts };
}

export function writeConfig(path: string, config: ConfigFile): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const doc = {
    ...(config.currentContext ? { "current-context": config.currentContext } : {}),
    contexts: config.contexts.map((context) =>
      Object.fromEntries(
        (Object.entries(KEYS) as [keyof Context, string][])
          .filter(([key]) => context[key] !== undefined)
          .map(([key, name]) => [name, context[key]]),
      ),
    ),
  };
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, stringify(doc), { mode: 0o600 });
  // The mode of `writeFileSync` is masked by the umask; the token file must be 0600 whatever it is.
  chmodSync(temp, 0o600);
  renameSync(temp, path);
}

export function findContext(config: ConfigFile, name: string | undefined): Context | undefined {
  const wanted = name ?? config.currentContext;
  return wanted === undefined ? undefined : config.contexts.find((c) => c.name === wanted);
}

/** Sets the given fields of a context (made if missing); `undefined` leaves a field as it is. */
export function upsertContext(config: ConfigFile, name: string, fields: Partial<Omit<Context, "name">>): Context {
  let context = config.contexts.find((c) => c.name === name);
  if (!context) {
    context = { name };
    config.contexts.push(context);
  }
  for (const [key, value] of Object.entries(fields)) {
    if (value !== undefined) (context as unknown as Record<string, string>)[key] = value;
  }
  return context;
}
