/**
 * Strings that will end up in a certificate, a file name, a command line, a header or a log
 * must be well-formed Unicode. JSON can carry what UTF-8 cannot (an unpaired surrogate such as
 * `"\ud800"`): both the REST API's body parser and the link's frame parser refuse it with this.
 */

/**
 * Whether the value JSON.parse makes of this text can hold a string that is not well-formed.
 * Only if the text itself is not, or if it escapes a surrogate (`\ud800`): text decoded from
 * UTF-8 is well-formed, and every other escape is a whole character. Most texts are neither,
 * and then the walk below is not needed: it builds a path for each of a report's several hundred
 * values, a third of the time a rollout's frames took to parse (62 of 186 ms in a CPU profile).
 */
export function mayParseMalformed(jsonText: string): boolean {
  return !jsonText.isWellFormed() || SURROGATE_ESCAPE.test(jsonText);
}
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/** The path (`name`, `[2].uuid`, `etcdBackup.localPath`) of the first string, or key, that is not well-formed; "" for the value itself. */
export function malformedStringAt(value: unknown, path = ""): string | undefined {
  if (typeof value === "string") return value.isWellFormed() ? undefined : path;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = malformedStringAt(value[i], `${path}[${i}]`);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) {
      const at = path ? `${path}.${key}` : key;
      if (!key.isWellFormed()) return at;
      const found = malformedStringAt(item, at);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

/** A text cut to `max` characters (the frames' longest error fields are 4096), ending in `...` when cut. */
export function clipText(text: string, max = 4096): string {
  return text.length > max ? `${text.slice(0, max - 3)}...` : text;
}
