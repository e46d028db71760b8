import { readFileSync } from "node:fs";

/**
 * KEY="value" files in the dialect both systemd's EnvironmentFile= and a POSIX shell's `.`
 * read the same way: double quotes, with \ " $ ` escaped.
 */
export function renderEnvFile(values: Record<string, string | number | boolean | undefined>, header?: string): string {
  const lines = header ? header.split("\n").map((line) => `# ${line}`) : [];
  for (const [key, value] of Object.entries(values)) {
    if (!/^[A-Z_][A-Z0-9_]*$/.test(key)) throw new Error(`bad environment variable name "${key}"`);
    if (value === undefined) continue;
    const text = String(value).replace(/[\\"$`]/g, (c) => `\\${c}`);
    if (text.includes("\n")) throw new Error(`environment variable ${key} must not contain a newline`);
    lines.push(`${key}="${text}"`);
  }
  return `${lines.join("\n")}\n`;
}

export function parseEnvFile(text: string): Record<string, string> {
  const values: Record<string, string> = {};
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const eq = line.indexOf("=");
    if (eq <= 0) continue;
    const key = line.slice(0, eq).trim();
    let value = line.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) {
      value = value.slice(1, -1).replace(/\\([\\"$`])/g, "$1");
    } else if (value.length >= 2 && value.startsWith("'") && value.endsWith("'")) {
      value = value.slice(1, -1);
    }
    values[key] = value;
  }
  return values;
}

export function readEnvFile(path: string): Record<string, string> {
  return parseEnvFile(readFileSync(path, "utf8"));
}
