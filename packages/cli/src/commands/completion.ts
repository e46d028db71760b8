import type { Command } from "commander";
import { usageError } from "../errors.ts";
import type { Wrap } from "../program.ts";
import { examples } from "./common.ts";

/**
 * `keelson completion bash|zsh`: a completion script made from the command tree itself, so it
 * never lags behind the commands: subcommands after their parent, each command's flags.
 */

interface Node {
  path: string;
  words: string[];
}

function walk(command: Command, path: string[], globalFlags: string[]): Node[] {
  const flags = command.options.map((o) => o.long ?? o.short ?? "").filter(Boolean);
  const subs = command.commands.filter((c) => c.name() !== "help");
  const words = [...subs.map((c) => c.name()), ...flags, ...globalFlags, "--help"];
  return [{ path: path.join(" "), words }, ...subs.flatMap((c) => walk(c, [...path, c.name()], globalFlags))];
}

function bash(nodes: Node[]): string {
  const cases = nodes.map((n) => `    "${n.path}") words="${[...new Set(n.words)].join(" ")}" ;;`).join("\n");
  return `# keelson bash completion: source <(keelson completion bash)
_keelson() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" path="" i w
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    [[ $w == -* ]] && continue
    case "$path \${w}" in
${pathCases(nodes)}
    esac
  done
  local words
  case "$path" in
${cases}
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _keelson keelson
`;
}

/** The shell `case` arms that follow the words typed so far down the command tree (bash and zsh alike). */
function pathCases(nodes: Node[]): string {
  return nodes
    .filter((n) => n.path)
    .map((n) => `      " ${n.path}") path="${n.path}" ;;`)
    .join("\n");
}

function zsh(nodes: Node[]): string {
  return `#compdef keelson
# keelson zsh completion: source <(keelson completion zsh)
_keelson() {
  local path="" w
  for w in \${words[2,CURRENT-1]}; do
    [[ $w == -* ]] && continue
    case "$path $w" in
${pathCases(nodes)}
    esac
  done
  local -a choices
  case "$path" in
${nodes.map((n) => `    "${n.path}") choices=(${[...new Set(n.words)].join(" ")}) ;;`).join("\n")}
  esac
  compadd -- $choices
}
compdef _keelson keelson
`;
}

export function completionCommand(program: Command, wrap: Wrap): void {
  examples(
    program.command("completion").argument("<shell>", "bash or zsh").description("Print a shell completion script"),
    "source <(keelson completion bash)      # in ~/.bashrc",
    "source <(keelson completion zsh)       # in ~/.zshrc, after compinit",
  ).action(
    wrap(async (cli, shell) => {
      const globalFlags = program.options.map((o) => o.long ?? "").filter(Boolean);
      const nodes = walk(program, [], []).map((n, i) => (i === 0 ? n : { ...n, words: [...n.words, ...globalFlags] }));
      if (shell === "bash") return cli.out.print(bash(nodes).trimEnd());
      if (shell === "zsh") return cli.out.print(zsh(nodes).trimEnd());
      throw usageError(`completion ${String(shell)}: bash or zsh`);
    }),
  );
}
