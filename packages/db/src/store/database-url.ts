import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { type ConnectionOptions, checkServerIdentity, type PeerCertificate } from "node:tls";

export const DATABASE_URL_RULE =
  "a postgres:// or postgresql:// URL with a host; libpq's sslmode, sslrootcert, sslcert and sslkey parameters work";

const SSL_MODES = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] as const;
type SslMode = (typeof SSL_MODES)[number];
/** The libpq parameters this module turns into TLS options (postgres.js reads no files itself). */
const TLS_PARAMETERS = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/** Where the store connects, with the password kept out of everything that may be printed. */
export interface PostgresTarget {
  /** The URL without the TLS parameters (their files are read into `ssl`). */
  url: string;
  ssl: boolean | "prefer" | "allow" | ConnectionOptions;
  host: string;
  port: number;
  database: string;
  user: string;
  /** For logs and errors: `user@host:port/database`, never the password. */
  display: string;
}

function problem(url: URL | undefined, text: string): string | undefined {
  if (!url) return "is not a URL";
  if (url.protocol !== "postgres:" && url.protocol !== "postgresql:")
    return "must start with postgres:// or postgresql://";
  if (url.hostname === "") return "must name a host";
  const mode = url.searchParams.get("sslmode");
  if (mode !== null && !(SSL_MODES as readonly string[]).includes(mode)) {
    return `sslmode must be one of ${SSL_MODES.join(", ")} (got "${mode}")`;
  }
  if (/\s/.test(text)) return "must not contain white space";
  return undefined;
}

function parse(text: string): URL | undefined {
  try {
    return new URL(text);
  } catch {
    return undefined;
  }
}

/** The settings check: a problem with the URL, or undefined. Never repeats the URL (it may hold a password). */
export function checkDatabaseUrl(text: string): string | undefined {
  return problem(parse(text), text);
}

/**
 * The URL as libpq users write it, turned into what postgres.js takes. TLS as libpq does it:
 * `prefer` by default; `require` encrypts without checking the server (but checks it against
 * `sslrootcert` when one is given, as libpq does); `verify-ca` checks the chain; `verify-full`
 * the chain and the host name. `sslcert`/`sslkey` present a client certificate.
 */
export function parseDatabaseUrl(text: string, readFile: (path: string) => Buffer = readFileSync): PostgresTarget {
  const url = parse(text);
  const bad = problem(url, text);
  if (bad || !url) throw new Error(`the database URL ${bad}`);
  const params = url.searchParams;
  // An IPv6 literal comes bracketed from URL.
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  const mode = (params.get("sslmode") ?? "prefer") as SslMode;
  const file = (name: string) => {
    const path = params.get(name);
    return path === null ? undefined : readFile(path);
  };
  const ca = file("sslrootcert");
  const cert = file("sslcert");
  const key = file("sslkey");
  let ssl: PostgresTarget["ssl"];
  if (mode === "disable") ssl = false;
  else if ((mode === "allow" || mode === "prefer") && !cert) ssl = mode;
  else {
    const verify = mode === "verify-ca" || mode === "verify-full" || (mode === "require" && ca !== undefined);
    ssl = {
      ...(ca ? { ca } : {}),
      ...(cert ? { cert } : {}),
      ...(key ? { key } : {}),
      rejectUnauthorized: verify,
      // SNI takes a name, never an address (RFC 6066).
      ...(isIP(host) === 0 ? { servername: host } : {}),
      // verify-full: the certificate must name the host of the URL. postgres.js upgrades a
      // socket it already opened, so without this Node would check it against "localhost".
      // verify-ca checks the chain only.
      checkServerIdentity:
        mode === "verify-full"
          ? (_: string, peer: PeerCertificate) => checkServerIdentity(host, peer)
          : () => undefined,
    };
  }
  for (const name of TLS_PARAMETERS) params.delete(name);
  const user = decodeURIComponent(url.username) || "postgres";
  const database = decodeURIComponent(url.pathname.slice(1)) || user;
  const port = url.port === "" ? 5432 : Number(url.port);
  return {
    url: url.toString(),
    ssl,
    host: url.hostname,
    port,
    database,
    user,
    display: `${user}@${url.hostname}:${port}/${database}`,
  };
}
