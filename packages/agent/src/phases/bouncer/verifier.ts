import { createHash, timingSafeEqual } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import { readBody } from "../../read-body.ts";

/**
 * How the node bouncer decides whether a bearer token is one the control plane issued for this
 * cluster: a tokens file of sha256 hashes (written by the agent from what the control plane
 * sends; reread when it changes), or a verify URL that answers {valid, username?, groups?}.
 */

export interface Identity {
  username: string;
  groups: string[];
}

export type Verifier = (token: string) => Promise<Identity | undefined>;

interface TokensFile {
  tokens: { sha256: string; username: string; groups?: string[] }[];
}

export function sha256Hex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

export function tokensFileVerifier(path: string): Verifier {
  let cached: { mtimeMs: number; size: number; entries: TokensFile["tokens"] } | undefined;
  const load = () => {
    const { mtimeMs, size } = statSync(path);
    if (!cached || cached.mtimeMs !== mtimeMs || cached.size !== size) {
      const parsed = JSON.parse(readFileSync(path, "utf8")) as TokensFile;
      cached = { mtimeMs, size, entries: Array.isArray(parsed.tokens) ? parsed.tokens : [] };
    }
    return cached.entries;
  };
  return async (token) => {
    const digest = Buffer.from(sha256Hex(token), "hex");
    for (const entry of load()) {
      const known = Buffer.from(entry.sha256, "hex");
      if (known.length === digest.length && timingSafeEqual(known, digest)) {
        return { username: entry.username, groups: entry.groups ?? [] };
      }
    }
    return undefined;
  };
}

export function urlVerifier(url: string, ca?: string): Verifier {
  return (token) =>
    new Promise((resolve, reject) => {
      const target = new URL(url);
      const body = JSON.stringify({ token });
      const client = target.protocol === "https:" ? https : http;
      const req = client.request(
        target,
        {
          method: "POST",
          ca,
          timeout: 3000,
          headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
        },
        (res) => {
          readBody(res).then((text) => {
            if (res.statusCode !== 200) return reject(new Error(`verifier answered ${res.statusCode}`));
            try {
              const answer = JSON.parse(text) as { valid?: boolean; username?: string; groups?: string[] };
              resolve(
                answer.valid === true
                  ? { username: answer.username ?? "keelson-user", groups: answer.groups ?? [] }
                  : undefined,
              );
            } catch (err) {
              reject(err);
            }
          }, reject);
        },
      );
      req.on("timeout", () => req.destroy(new Error(`verifier ${url} did not answer within 3000 ms`)));
      req.on("error", reject);
      req.end(body);
    });
}
