import { isAbsolute, relative, resolve } from "node:path";

/**
 * What a web CLI line may run (README "Web CLI" lists the same). A session runs only kubectl,
 * against its own cluster with its own credential, and nothing that reads or writes files of
 * the control plane's host, opens listeners there, runs other programs or needs a terminal the
 * web CLI does not have. Everything not allowed is refused with the reason.
 */
export type Decision =
  | { kind: "nothing" }
  | { kind: "help" }
  | { kind: "exit" }
  | { kind: "kubectl"; args: string[] }
  | { kind: "refused"; message: string };

/** Subcommands a session may run: they talk to the API server and print. */
export const ALLOWED_SUBCOMMANDS = new Set([
  "annotate",
  "api-resources",
  "api-versions",
  "apply",
  "auth",
  "autoscale",
  "certificate",
  "cluster-info",
  "cordon",
  "create",
  "delete",
  "describe",
  "drain",
  "events",
  "explain",
  "expose",
  "get",
  "label",
  "logs",
  "patch",
  "replace",
  "rollout",
  "run",
  "scale",
  "set",
  "taint",
  "top",
  "uncordon",
  "version",
  "wait",
]);

const REFUSED_SUBCOMMANDS: Record<string, string> = {
  plugin: "it runs programs of the control plane's host",
  proxy: "it opens a listener on the control plane's host",
  "port-forward": "it opens a listener on the control plane's host",
  cp: "it copies files to or from the control plane's host",
  exec: "it needs an interactive terminal, which the web CLI does not provide",
  attach: "it needs an interactive terminal, which the web CLI does not provide",
  debug: "it needs an interactive terminal, which the web CLI does not provide",
  edit: "it opens an editor on the control plane's host",
  diff: "it runs a diff program on the control plane's host",
  config: "it reads and changes the session's kubeconfig and its credential",
  kustomize: "it reads directories of the control plane's host",
};

/** Flags that would swap the session's cluster or credential, or read or write host files. */
const REFUSED_FLAGS: Record<string, string> = {
  "--kubeconfig": "the session's kubeconfig is fixed",
  "--token": "the session's credential is fixed",
  "--username": "the session's credential is fixed",
  "--password": "the session's credential is fixed",
  "--client-certificate": "the session's credential is fixed",
  "--client-key": "the session's credential is fixed",
  "--server": "the session talks to its own cluster only",
  "-s": "the session talks to its own cluster only",
  "--certificate-authority": "the session's cluster CA is fixed",
  "--insecure-skip-tls-verify": "the session's cluster CA is fixed",
  "--tls-server-name": "the session's cluster CA is fixed",
  "--cluster": "the session's kubeconfig has one cluster",
  "--user": "the session's kubeconfig has one user",
  "--context": "the session's kubeconfig has one context",
  "--cache-dir": "it writes files on the control plane's host",
  "--log-file": "it writes files on the control plane's host",
  "--log-dir": "it writes files on the control plane's host",
  "--profile-output": "it writes files on the control plane's host",
  "--output-directory": "it writes files on the control plane's host",
  "--from-file": "it reads files of the control plane's host",
  "--from-env-file": "it reads files of the control plane's host",
  "-k": "it reads directories of the control plane's host",
  "--kustomize": "it reads directories of the control plane's host",
};
/** Shorthands whose value may be glued on (`-shttps://…`, `-f/etc/passwd`). */
const GLUED_SHORTHANDS = ["-s", "-k", "-f"];
/** Global flags whose value is the next word, so it is not taken for the subcommand. */
const VALUE_FLAGS = new Set(["-n", "--namespace", "--request-timeout", "-v", "--v", "--as", "--as-group", "--as-uid"]);

function flagName(arg: string): string {
  if (arg.startsWith("--")) return arg.split("=", 1)[0] as string;
  const glued = GLUED_SHORTHANDS.find((s) => arg.startsWith(s));
  return glued ?? (arg.split("=", 1)[0] as string);
}

const refused = (message: string): Decision => ({ kind: "refused", message });

export function decide(argv: readonly string[], sessionDir: string): Decision {
  const [program, ...args] = argv;
  if (program === undefined) return { kind: "nothing" };
  if (program === "help") return { kind: "help" };
  if (program === "exit") return { kind: "exit" };
  if (program !== "kubectl") {
    return refused(`${program}: not available; a web CLI session runs kubectl only (type help)`);
  }
  let subcommand: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    // After `--` come a container's command and arguments (kubectl run … -- sh): they run in the cluster.
    if (arg === "--") break;
    if (!arg.startsWith("-") || arg === "-") {
      subcommand ??= arg;
      continue;
    }
    const name = flagName(arg);
    const why = REFUSED_FLAGS[name];
    if (why) return refused(`kubectl ${name}: not available in the web CLI (${why})`);
    if (name === "-f" || name === "--filename") {
      const value = arg.includes("=")
        ? arg.slice(arg.indexOf("=") + 1)
        : arg.length > 2 && name === "-f"
          ? arg.slice(2)
          : args[++i];
      const problem = fileProblem(value, sessionDir);
      if (problem) return refused(`kubectl ${name}: ${problem}`);
      continue;
    }
    if (name === "-o" || name === "--output") {
      const value = arg.includes("=")
        ? arg.slice(arg.indexOf("=") + 1)
        : arg.length > 2 && name === "-o"
          ? arg.slice(2)
          : args[i + 1];
      if (value?.split("=", 1)[0]?.endsWith("-file")) {
        return refused(`kubectl ${name} ${value}: output templates from files are not available in the web CLI`);
      }
    }
    if (!arg.includes("=") && VALUE_FLAGS.has(name)) i++;
  }
  if (subcommand === undefined) return { kind: "kubectl", args };
  const why = REFUSED_SUBCOMMANDS[subcommand];
  if (why) return refused(`kubectl ${subcommand}: not available in the web CLI (${why})`);
  if (!ALLOWED_SUBCOMMANDS.has(subcommand)) {
    return refused(`kubectl ${subcommand}: not available in the web CLI (type help for the commands it runs)`);
  }
  return { kind: "kubectl", args };
}

/** A -f value is fine only as a path inside the session's own directory (no URL, no stdin). */
function fileProblem(value: string | undefined, sessionDir: string): string | undefined {
  if (value === undefined || value === "") return "needs a file";
  if (value === "-") return "standard input is not available in the web CLI";
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) return "URLs are not fetched by the web CLI";
  const inside = relative(sessionDir, resolve(sessionDir, value));
  if (inside.startsWith("..") || isAbsolute(inside)) return `${value} is outside the session's directory`;
  return undefined;
}

export const HELP_TEXT = [
  "This web CLI runs kubectl against this cluster, with a credential of this session only.",
  `Commands: kubectl ${[...ALLOWED_SUBCOMMANDS].join(", ")}; help; exit.`,
  "No shell: no pipes, redirections, variables or globbing; quote words with ' or \".",
  "Not available: kubectl exec, attach, debug, cp, proxy, port-forward, plugin, edit, diff, config, kustomize;",
  "flags that change the cluster or credential (--kubeconfig, --server, --token, --context …) or read or write",
  "files of the server (-f outside the session directory, --from-file, -k, --log-file …).",
  "",
].join("\n");
