import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";

/**
 * STAND-IN, for tests: the server side of AWS Signature Version 4, as the AWS General Reference
 * "Create a signed AWS API request" describes it (canonical request, string to sign, the
 * HMAC-SHA256 key chain AWS4<secret> → date → region → service → aws4_request). The stand-in
 * recomputes the signature with the secret of the access key it knows, so a wrong secret is
 * refused like AWS refuses it, not only an unknown key.
 */
export interface SignedRequest {
  method: string;
  /** Path and query as they arrived (`req.url`). */
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export interface Credential {
  accessKeyId: string;
  date: string;
  region: string;
  service: string;
  signedHeaders: string[];
  signature: string;
}

const AUTH =
  /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/;

/** The Authorization header's parts, or undefined when there is none or it is not SigV4. */
export function parseAuthorization(headers: IncomingHttpHeaders): Credential | undefined {
  const header = headers.authorization;
  const match = header ? AUTH.exec(header) : null;
  if (!match) return undefined;
  const [, accessKeyId, date, region, service, signed, signature] = match as unknown as string[];
  return {
    accessKeyId: accessKeyId as string,
    date: date as string,
    region: region as string,
    service: service as string,
    signedHeaders: (signed as string).split(";"),
    signature: signature as string,
  };
}

/** RFC 3986 unreserved characters stay, everything else is %XX (SigV4's UriEncode). */
function uriEncode(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function canonicalQuery(query: string): string {
  if (query === "") return "";
  return query
    .split("&")
    .map((pair) => {
      const [k = "", v = ""] = pair.split("=");
      return [uriEncode(decodeURIComponent(k)), uriEncode(decodeURIComponent(v.replace(/\+/g, " ")))] as const;
    })
    .sort(([a, av], [b, bv]) => (a < b ? -1 : a > b ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join("&");
}

function headerValue(headers: IncomingHttpHeaders, name: string): string {
  const value = headers[name];
  const text = Array.isArray(value) ? value.join(",") : (value ?? "");
  return text.trim().replace(/\s+/g, " ");
}

const sha256 = (data: string | Buffer) => createHash("sha256").update(data).digest("hex");
const hmac = (key: string | Buffer, data: string) => createHmac("sha256", key).update(data).digest();

/** Whether `credential.signature` is the signature of `request` under `secret`. */
export function signatureMatches(request: SignedRequest, credential: Credential, secret: string): boolean {
  const [path = "/", query = ""] = request.url.split("?", 2) as [string, string?];
  // Every service but S3 encodes the (already encoded) path once more.
  const canonicalUri = path.split("/").map(uriEncode).join("/");
  // The body as it arrived is what is signed: a signed x-amz-content-sha256 header that does not
  // hash to it is refused too (AWS checks the payload, not the client's word for it).
  const payloadHash = sha256(request.body);
  const claimed = request.headers["x-amz-content-sha256"];
  if (claimed !== undefined && claimed !== payloadHash) return false;
  const canonicalRequest = [
    request.method,
    canonicalUri,
    canonicalQuery(query),
    credential.signedHeaders.map((name) => `${name}:${headerValue(request.headers, name)}\n`).join(""),
    credential.signedHeaders.join(";"),
    payloadHash,
  ].join("\n");
  const scope = `${credential.date}/${credential.region}/${credential.service}/aws4_request`;
  const stringToSign = [
    "AWS4-HMAC-SHA256",
    headerValue(request.headers, "x-amz-date"),
    scope,
    sha256(canonicalRequest),
  ].join("\n");
  let key = hmac(`AWS4${secret}`, credential.date);
  for (const part of [credential.region, credential.service, "aws4_request"]) key = hmac(key, part);
  const expected = Buffer.from(createHmac("sha256", key).update(stringToSign).digest("hex"));
  const given = Buffer.from(credential.signature);
  return expected.length === given.length && timingSafeEqual(expected, given);
}
