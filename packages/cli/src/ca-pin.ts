import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import {
  CA_HASH_PATTERN,
  caCertHash,
  isCaCertificate,
  pinnedCaCertificates,
  splitPemCertificates,
} from "@keelson/protocol";
import { Agent, request } from "undici";
import { CliError, EXIT, usageError } from "./errors.ts";

/**
 * `keelson login --ca-hash sha256:<hex>`: the control plane's CA pinned the way the agent's
 * KEELSON_CA_HASH pins it (agent/src/link/trust.ts). The bundle of `GET /v1/ca` is fetched
 * without verifying the server (the hash is what makes it trusted); only its CA certificates of
 * that hash are kept, and from then on the server is verified against them alone (the context's
 * CA file). A bundle with no CA of that hash is refused before the password goes anywhere.
 */

export function checkCaHash(caHash: string, url: string): string {
  const pin = caHash.trim().toLowerCase();
  if (!CA_HASH_PATTERN.test(pin)) throw usageError(`--ca-hash ${caHash}: must be sha256:<64 hex digits>`);
  if (!url.startsWith("https://")) throw usageError(`--ca-hash needs an https:// control plane, not ${url}`);
  return pin;
}

/** The CA certificates of the control plane's bundle whose hash is `pin`, as PEM. */
export async function fetchPinnedCa(url: string, pin: string, timeoutMs: number): Promise<string> {
  const target = `${url.replace(/\/+$/, "")}/v1/ca`;
  const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });
  let status: number;
  let bundle: string;
  try {
    const res = await request(target, { dispatcher, signal: AbortSignal.timeout(timeoutMs) });
    status = res.statusCode;
    bundle = await res.body.text();
  } catch (error) {
    throw new CliError(`cannot reach the control plane at ${url}: ${(error as Error).message}`, EXIT.unreachable);
  } finally {
    await dispatcher.close();
  }
  if (status !== 200)
    throw new CliError(
      `${target} answered HTTP ${status}: the control plane serves no CA bundle to pin`,
      EXIT.unreachable,
    );
  const accepted = pinnedCaCertificates(bundle, [pin]);
  if (!accepted) {
    const offered = splitPemCertificates(bundle).filter(isCaCertificate).map(caCertHash);
    throw new CliError(
      `the control plane at ${url} offers CA ${offered.join(", ") || "(none)"}, not --ca-hash ${pin}: ` +
        "refusing to log in (a wrong hash, or someone between you and the control plane)",
      EXIT.unreachable,
    );
  }
  return accepted;
}

/**
 * Where a context's pinned CA is kept: beside the config file, one file per context. Written
 * as `<file>.new` first and put in place only once the login succeeded, so a failed login
 * leaves an earlier pin of the same context as it was.
 */
export function stagePinnedCa(configPath: string, contextName: string, pem: string) {
  const file = join(dirname(configPath), `ca-${encodeURIComponent(contextName)}.pem`);
  const staged = `${file}.new`;
  mkdirSync(dirname(configPath), { recursive: true, mode: 0o700 });
  writeFileSync(staged, pem, { mode: 0o644 });
  return {
    staged,
    file,
    commit: () => renameSync(staged, file),
    discard: () => rmSync(staged, { force: true }),
  };
}
