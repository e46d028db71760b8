import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { CA_HASH_PATTERN, isLoopbackHost } from "@keelson/protocol";
import { ApiError } from "../../http/errors.ts";
import type { PackageShelf, StoredPackage } from "../packages/shelf.ts";

/**
 * The agent's install path (README, "Adding a host"): the script a host runs
 * (`packages/control-plane/install/agent.sh`, served at GET /v1/install/agent.sh with this
 * control plane's URL and an agent package filled in) and the one line a person pastes to run
 * it, which pins the CA before anything is fetched over TLS.
 */

const TEMPLATE_FILE = fileURLToPath(new URL("../../../install/agent.sh", import.meta.url));
let template: string | undefined;

/** Single-quoted for sh: the values are checked already, the quoting makes sure of it. */
function shQuote(value: string): string {
  return `'${value.replaceAll("'", `'"'"'`)}'`;
}

/** The package the script installs: `version` when asked for, else the one stored last. */
export async function packageToInstall(shelf: PackageShelf, version: string | undefined): Promise<StoredPackage> {
  if (version !== undefined) return (await shelf.file(version)).pkg;
  const last = (await shelf.list()).at(-1);
  if (!last) {
    throw new ApiError(
      404,
      "not_found",
      "no agent package is stored on this control plane: build one (pnpm pack:agent) and upload it (POST /v1/agentPackages)",
    );
  }
  return last;
}

export function agentInstallScript(controlPlane: string, pkg: StoredPackage): string {
  template ??= readFileSync(TEMPLATE_FILE, "utf8");
  return template
    .replace("@@CONTROL_PLANE@@", shQuote(controlPlane))
    .replace("@@AGENT_VERSION@@", shQuote(pkg.version))
    .replace("@@AGENT_SHA256@@", shQuote(pkg.sha256));
}

/**
 * The line to paste on a new host, as root. Over TLS it fetches the CA bundle unverified, keeps
 * the certificate whose SubjectPublicKeyInfo has the pinned hash (refusing if none has), and
 * fetches the script with that certificate as the only trust; the join token goes to the
 * script's environment, and from there only to the agent. Plain HTTP only to a loopback control
 * plane (the script refuses anything else); null for plain HTTP elsewhere, which no host
 * should be told to trust.
 */
export function agentInstallCommand(controlPlane: string, caHash: string | null, joinToken: string): string | null {
  const url = new URL(controlPlane);
  const base = controlPlane.replace(/\/+$/, "");
  const token = `KEELSON_JOIN_TOKEN=${shQuote(joinToken)}`;
  if (url.protocol === "http:") {
    if (!isLoopbackHost(url.hostname.replace(/^\[|\]$/g, ""))) return null;
    return `(set -eu; d=$(mktemp -d); trap 'rm -rf "$d"' EXIT; curl -fsS ${shQuote(`${base}/v1/install/agent.sh`)} -o "$d/agent.sh"; ${token} sh "$d/agent.sh" --control-plane ${shQuote(base)})`;
  }
  if (!caHash || !CA_HASH_PATTERN.test(caHash)) return null;
  return (
    `(set -eu; d=$(mktemp -d); trap 'rm -rf "$d"' EXIT; cp=${shQuote(base)}; pin=${shQuote(caHash)}; ` +
    `curl -fsSk "$cp/v1/ca" -o "$d/bundle.pem"; ` +
    `awk -v d="$d" '/BEGIN CERT/{n++} n{print > (d "/c" n ".pem")}' "$d/bundle.pem"; ` +
    `for c in "$d"/c*.pem; do h=$(openssl x509 -in "$c" -noout -pubkey | openssl pkey -pubin -outform DER | openssl dgst -sha256 -r | cut -d" " -f1); ` +
    `[ "sha256:$h" != "$pin" ] || cp "$c" "$d/ca.pem"; done; ` +
    `[ -f "$d/ca.pem" ] || { echo "the CA of $cp does not have the hash $pin: not installing" >&2; exit 1; }; ` +
    `curl -fsS --cacert "$d/ca.pem" "$cp/v1/install/agent.sh" -o "$d/agent.sh"; ` +
    `${token} sh "$d/agent.sh" --control-plane "$cp" --ca-hash "$pin" --ca-file "$d/ca.pem")`
  );
}
