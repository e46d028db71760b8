import { createWriteStream, readFileSync } from "node:fs";
import { pipeline } from "node:stream/promises";
import { Agent, request } from "undici";
import { CliError, EXIT, usageError } from "../errors.ts";

/**
 * A release bundle's two files (`keelson-<version>.tar.gz` and its `.sha256`) fetched from an
 * http(s) release location for `keelson download`. The secret goes as a bearer token (none for
 * `-`); the server is verified against the system's CAs, or only those of `caFile` (a private
 * release server's CA). The checksum is checked by the caller, before anything is unpacked.
 */
export interface FetchOptions {
  secret: string;
  caFile?: string;
  timeoutMs?: number;
}

/** Writes `<base>/<file>` to `dest` for each of `files`; refuses with the server's status, or exit 3 when it refuses the secret or cannot be reached. */
export async function fetchReleaseFiles(
  base: string,
  files: readonly { name: string; dest: string }[],
  options: FetchOptions,
): Promise<void> {
  let ca: string | undefined;
  if (options.caFile) {
    try {
      ca = readFileSync(options.caFile, "utf8");
    } catch (error) {
      throw usageError(`--ca-file ${options.caFile}: ${(error as Error).message}`);
    }
  }
  const dispatcher = new Agent({ ...(ca ? { connect: { ca } } : {}), keepAliveTimeout: 1000 });
  const headers = options.secret === "-" ? {} : { authorization: `Bearer ${options.secret}` };
  try {
    for (const file of files) {
      const url = `${base}/${file.name}`;
      let res: Awaited<ReturnType<typeof request>>;
      try {
        res = await request(url, { dispatcher, headers, signal: AbortSignal.timeout(options.timeoutMs ?? 600_000) });
      } catch (error) {
        const cause = (error as { cause?: Error }).cause?.message;
        throw new CliError(
          `cannot fetch ${url}: ${cause ?? (error as Error).message}` +
            (url.startsWith("https://") && !options.caFile ? " (a private release server's CA goes in --ca-file)" : ""),
          EXIT.unreachable,
        );
      }
      if (res.statusCode === 401 || res.statusCode === 403) {
        await res.body.dump();
        throw new CliError(
          `GET ${url}: ${res.statusCode}: the release location refused the secret; nothing was unpacked`,
          EXIT.unreachable,
        );
      }
      if (res.statusCode !== 200) {
        await res.body.dump();
        throw new CliError(`GET ${url}: ${res.statusCode}: the release location has no ${file.name}`);
      }
      await pipeline(res.body, createWriteStream(file.dest));
    }
  } finally {
    await dispatcher.close();
  }
}
