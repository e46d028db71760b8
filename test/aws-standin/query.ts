import { el, XML_DECLARATION } from "./xml.ts";

/**
 * STAND-IN, for tests: the AWS query protocol's answer shape, which Auto Scaling and ELBv2
 * (and STS) share: `<ActionResponse><ActionResult>…</ActionResult><ResponseMetadata>`; lists
 * are `<Name><member>…</member></Name>` and list parameters `Name.member.N`.
 */
export function queryAnswer(namespace: string, action: string, result: string | undefined, requestId: string): string {
  const body = result === undefined ? "" : el(`${action}Result`, [result]);
  return `${XML_DECLARATION}<${action}Response xmlns="${namespace}">${body}${el("ResponseMetadata", [el("RequestId", requestId)])}</${action}Response>`;
}

export function members(name: string, entries: string[][]): string {
  return el(
    name,
    entries.map((fields) => el("member", fields)),
  );
}

/** `Prefix.member.1`, `Prefix.member.2`, … in order. */
export function memberParams(params: URLSearchParams, prefix: string): string[] {
  const out: string[] = [];
  for (let i = 1; params.has(`${prefix}.member.${i}`); i++) out.push(params.get(`${prefix}.member.${i}`) as string);
  return out;
}

/** An AWS error: the HTTP status and AWS's code and message (written per protocol by server.ts). */
export class AwsError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}
