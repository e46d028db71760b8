/**
 * Splits one web CLI command line into argv without a shell: words separated by blanks, with
 * '…' (literal), "…" (backslash escapes `\\` and `\"`) and a backslash outside quotes escaping
 * the next character. Nothing is expanded: `$HOME`, `*` and `~` are passed to kubectl as they
 * are written. The characters a shell would treat as pipes, lists, redirections or command
 * substitution are refused when unquoted, so a line that looks like a pipeline fails with a
 * reason instead of giving kubectl a surprising argument.
 */
export type SplitResult = { ok: true; argv: string[] } | { ok: false; message: string };

const SHELL_ONLY: Record<string, string> = {
  "|": "pipes",
  ";": "command lists",
  "&": "background jobs and && lists",
  ">": "redirections",
  "<": "redirections",
  "`": "command substitution",
  "(": "subshells",
  ")": "subshells",
};

export function splitCommandLine(line: string): SplitResult {
  const text = line.replace(/\r?\n$/, "");
  if (/[\r\n]/.test(text)) return { ok: false, message: "send one command line at a time" };
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (/[\u0000-\u0008\u000b-\u001f\u007f]/.test(text))
    return { ok: false, message: "control characters are not accepted" };
  const argv: string[] = [];
  let word: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    if (c === " " || c === "\t") {
      if (word !== null) argv.push(word);
      word = null;
      continue;
    }
    if (c === "'") {
      const end = text.indexOf("'", i + 1);
      if (end < 0) return { ok: false, message: "unterminated single quote" };
      word = (word ?? "") + text.slice(i + 1, end);
      i = end;
      continue;
    }
    if (c === '"') {
      let value = "";
      let j = i + 1;
      for (; j < text.length && text[j] !== '"'; j++) {
        if (text[j] === "\\" && (text[j + 1] === '"' || text[j + 1] === "\\")) j++;
        value += text[j];
      }
      if (j >= text.length) return { ok: false, message: "unterminated double quote" };
      word = (word ?? "") + value;
      i = j;
      continue;
    }
    if (c === "\\") {
      if (i + 1 >= text.length) return { ok: false, message: "a backslash at the end of the line escapes nothing" };
      word = (word ?? "") + text[++i];
      continue;
    }
    if (c === "$" && text[i + 1] === "(") return shellOnly("command substitution");
    const what = SHELL_ONLY[c];
    if (what) return shellOnly(what);
    word = (word ?? "") + c;
  }
  if (word !== null) argv.push(word);
  return { ok: true, argv };
}

function shellOnly(what: string): SplitResult {
  return {
    ok: false,
    message: `${what} are not available: the web CLI runs kubectl directly, without a shell (quote the character to pass it to kubectl)`,
  };
}
