import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { AUTOSCALING_NAMESPACE, AutoScalingState, autoScalingAction } from "./autoscaling.ts";
import { STANDIN_ACCOUNT_ID } from "./data.ts";
import { EC2_NAMESPACE, Ec2Error, Ec2State, ec2Action } from "./ec2.ts";
import { EksError, EksState, eksAction } from "./eks.ts";
import { ELBV2_NAMESPACE, Elbv2State, elbv2Action } from "./elbv2.ts";
import { AwsError, queryAnswer } from "./query.ts";
import { ROUTE53_NAMESPACE, Route53State, route53Action } from "./route53.ts";
import { type Credential, parseAuthorization, signatureMatches } from "./sigv4.ts";
import type { InstanceHost, World } from "./world.ts";
import { el, XML_DECLARATION } from "./xml.ts";

/**
 * STAND-IN, for tests: the AWS endpoints Keelson calls, on loopback, at the wire level, so the
 * real AWS SDK for JavaScript v3 runs unmodified against it through its endpoint override
 * (AWS_ENDPOINT_URL). It is not AWS; it follows the protocols as the API references give them:
 * - STS (AWS STS API Reference, 2011-06-15): the query protocol, `GetCallerIdentity`; errors
 *   `<ErrorResponse><Error><Type/><Code/><Message/></Error><RequestId/></ErrorResponse>`.
 * - EC2 (Amazon EC2 API Reference, 2016-11-15): EC2's query protocol (./ec2.ts); errors
 *   `<Response><Errors><Error><Code/><Message/></Error></Errors><RequestID/></Response>`.
 * - Route 53 (Amazon Route 53 API Reference, 2013-04-01): REST-XML, `GET /2013-04-01/hostedzone`.
 * - EKS (Amazon EKS API Reference, 2017-11-01): REST-JSON, ListClusters and DescribeCluster
 *   (./eks.ts); errors in the `x-amzn-ErrorType` header and `{"message"}`.
 * Every request must carry a SigV4 Authorization header whose signature verifies with the
 * secret of the access key the stand-in knows (./sigv4.ts): an unknown key is
 * `InvalidClientTokenId` (STS, Route 53), `AuthFailure` (EC2) or `UnrecognizedClientException`
 * (EKS), a wrong secret `SignatureDoesNotMatch` (STS, Route 53), `AuthFailure` (EC2) or
 * `InvalidSignatureException` (EKS), with AWS's status codes.
 * What the account holds is in ./data.ts; key pairs imported stay for the stand-in's life.
 */
export const STANDIN_ACCOUNT = {
  accessKeyId: "AKIAIOSFODNN7EXAMPLE",
  secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
  accountId: STANDIN_ACCOUNT_ID,
  userName: "keelson",
};

/** The account's credentials as a Keelson provider body takes them. */
export const STANDIN_KEYS = { key: STANDIN_ACCOUNT.accessKeyId, secret: STANDIN_ACCOUNT.secretAccessKey };

const STS_NAMESPACE = "https://sts.amazonaws.com/doc/2011-06-15/";

export interface StandinCall {
  service: string;
  action: string;
  region: string;
  accessKeyId: string;
  /** The request's parameters (query protocols; Route 53 and EKS name theirs in the path). */
  params: Record<string, string>;
  /** The HTTP status answered; 0 while unanswered (or never: a silent region). */
  status: number;
}

export interface AwsStandin {
  /** The endpoint for AWS_ENDPOINT_URL: `http://127.0.0.1:PORT`. */
  url: string;
  /** Every request answered, in order (refused ones too). */
  calls: StandinCall[];
  /** TCP connections accepted so far (a client that keeps its connection opens one). */
  connections: number;
  /** A delay before every answer, in milliseconds (a slow cloud). */
  latencyMs: number;
  /** The access keys of the account and their secrets (an IAM user may have two); tests add more. */
  keys: Map<string, string>;
  ec2: Ec2State;
  /** What an auto deploy creates: VPCs, subnets, groups, templates, instances, and their tags. */
  world: World;
  autoScaling: AutoScalingState;
  elbv2: Elbv2State;
  route53: Route53State;
  eks: EksState;
  /** Stops every instance's host, then the server. */
  close(): Promise<void>;
}

type Service = "sts" | "ec2" | "route53" | "autoscaling" | "elasticloadbalancing" | "eks";
const SERVICES: readonly string[] = ["sts", "ec2", "route53", "autoscaling", "elasticloadbalancing", "eks"];

/** The query-protocol services' XML namespaces (their error answers carry it too). */
const QUERY_NAMESPACE: Record<string, string> = {
  sts: STS_NAMESPACE,
  route53: ROUTE53_NAMESPACE,
  autoscaling: AUTOSCALING_NAMESPACE,
  elasticloadbalancing: ELBV2_NAMESPACE,
};

function errorXml(service: Service, error: AwsError, requestId: string): string {
  if (service === "ec2") {
    return `${XML_DECLARATION}<Response>${el("Errors", [el("Error", [el("Code", error.code), el("Message", error.message)])])}${el("RequestID", requestId)}</Response>`;
  }
  const ns = QUERY_NAMESPACE[service];
  const type = error.status >= 500 ? "Receiver" : "Sender";
  return `${XML_DECLARATION}<ErrorResponse xmlns="${ns}">${el("Error", [el("Type", type), el("Code", error.code), el("Message", error.message)])}${el("RequestId", requestId)}</ErrorResponse>`;
}

/** Which service a request is for: the credential scope says it; unsigned ones by their shape. */
function serviceOf(credential: Credential | undefined, path: string, params: URLSearchParams): Service {
  const scoped = credential?.service;
  if (scoped && SERVICES.includes(scoped)) return scoped as Service;
  if (path.startsWith("/2013-04-01/")) return "route53";
  return params.get("Version") === "2011-06-15" ? "sts" : "ec2";
}

function authenticate(
  keys: Map<string, string>,
  service: Service,
  credential: Credential | undefined,
  request: Parameters<typeof signatureMatches>[0],
): void {
  if (!credential) {
    throw new AwsError(403, "MissingAuthenticationToken", "Request is missing Authentication Token");
  }
  const secret = keys.get(credential.accessKeyId);
  if (secret === undefined) {
    if (service === "ec2") {
      throw new AwsError(401, "AuthFailure", "AWS was not able to validate the provided access credentials");
    }
    const code = service === "eks" ? "UnrecognizedClientException" : "InvalidClientTokenId";
    throw new AwsError(403, code, "The security token included in the request is invalid.");
  }
  if (!signatureMatches(request, credential, secret)) {
    if (service === "ec2") {
      throw new AwsError(401, "AuthFailure", "AWS was not able to validate the provided access credentials");
    }
    throw new AwsError(
      403,
      service === "eks" ? "InvalidSignatureException" : "SignatureDoesNotMatch",
      "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.",
    );
  }
}

function stsAction(params: URLSearchParams, requestId: string): string {
  const action = params.get("Action");
  if (action !== "GetCallerIdentity") {
    throw new AwsError(400, "InvalidAction", `Could not find operation ${action} for version 2011-06-15`);
  }
  const result = el("GetCallerIdentityResult", [
    el("Arn", `arn:aws:iam::${STANDIN_ACCOUNT.accountId}:user/${STANDIN_ACCOUNT.userName}`),
    el("UserId", "AIDASTANDIN0000000001"),
    el("Account", STANDIN_ACCOUNT.accountId),
  ]);
  return `<GetCallerIdentityResponse xmlns="${STS_NAMESPACE}">${result}${el("ResponseMetadata", [el("RequestId", requestId)])}</GetCallerIdentityResponse>`;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Starts the stand-in on 127.0.0.1 at a free port. */
export async function startAwsStandin(
  options: { latencyMs?: number; instanceHost?: InstanceHost } = {},
): Promise<AwsStandin> {
  const calls: StandinCall[] = [];
  const ec2 = new Ec2State();
  const world = ec2.world;
  world.host = options.instanceHost;
  const autoScaling = new AutoScalingState(world);
  const elbv2 = new Elbv2State();
  const route53 = new Route53State();
  const eks = new EksState();
  const sockets = new Set<import("node:net").Socket>();

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    const url = req.url ?? "/";
    const path = url.split("?")[0] as string;
    const params = new URLSearchParams(req.method === "POST" ? body.toString("utf8") : (url.split("?")[1] ?? ""));
    const credential = parseAuthorization(req.headers);
    const service = serviceOf(credential, path, params);
    const requestId = randomUUID();
    const call: StandinCall = {
      service,
      action: service === "route53" || service === "eks" ? `${req.method} ${path}` : (params.get("Action") ?? ""),
      region: credential?.region ?? "",
      accessKeyId: credential?.accessKeyId ?? "",
      params: service === "route53" || service === "eks" ? {} : Object.fromEntries(params),
      status: 0,
    };
    calls.push(call);
    if (standin.latencyMs > 0) await new Promise((r) => setTimeout(r, standin.latencyMs));
    if (service === "eks") return answerEks(req, res, url, body, credential, requestId, call);
    let status = 200;
    let xml: string;
    try {
      authenticate(standin.keys, service, credential, { method: req.method ?? "GET", url, headers: req.headers, body });
      const region = (credential as Credential).region;
      if (service === "sts") xml = stsAction(params, requestId);
      else if (service === "route53") xml = route53Action(route53, req.method ?? "GET", path, body.toString("utf8"));
      else if (service === "autoscaling") {
        const result = autoScalingAction(autoScaling, world, region, params);
        xml = queryAnswer(AUTOSCALING_NAMESPACE, params.get("Action") ?? "", result, requestId);
      } else if (service === "elasticloadbalancing") {
        xml = queryAnswer(
          ELBV2_NAMESPACE,
          params.get("Action") ?? "",
          elbv2Action(elbv2, world, region, params),
          requestId,
        );
      } else {
        const action = params.get("Action") ?? "";
        xml = `${XML_DECLARATION}<${action}Response xmlns="${EC2_NAMESPACE}">${el("requestId", requestId)}${ec2Action(ec2, region, params)}</${action}Response>`;
      }
    } catch (err) {
      const error =
        err instanceof AwsError || err instanceof Ec2Error ? err : new AwsError(500, "InternalFailure", String(err));
      status = error.status;
      xml = errorXml(service, error as AwsError, requestId);
    }
    call.status = status;
    if (res.destroyed) return;
    res.writeHead(status, { "content-type": "text/xml", "x-amzn-requestid": requestId });
    res.end(xml);
  }

  /** EKS speaks JSON: its own answer and error shapes. A silent region leaves the request open. */
  function answerEks(
    req: IncomingMessage,
    res: ServerResponse,
    url: string,
    body: Buffer,
    credential: Credential | undefined,
    requestId: string,
    call: StandinCall,
  ): void {
    let status = 200;
    let answer: unknown;
    const headers: Record<string, string> = { "content-type": "application/json", "x-amzn-requestid": requestId };
    try {
      authenticate(standin.keys, "eks", credential, { method: req.method ?? "GET", url, headers: req.headers, body });
      const region = (credential as Credential).region;
      if (eks.isSilent(region)) return;
      answer = eksAction(eks, region, req.method ?? "GET", url, STANDIN_ACCOUNT.accountId);
    } catch (err) {
      const error =
        err instanceof AwsError || err instanceof EksError ? err : new AwsError(500, "ServerException", String(err));
      status = error.status;
      headers["x-amzn-errortype"] = error.code;
      answer = { message: error.message };
    }
    call.status = status;
    if (res.destroyed) return;
    res.writeHead(status, headers);
    res.end(JSON.stringify(answer));
  }

  const server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    standin.connections++;
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const standin: AwsStandin = {
    url: `http://127.0.0.1:${port}`,
    calls,
    connections: 0,
    latencyMs: options.latencyMs ?? 0,
    keys: new Map([[STANDIN_ACCOUNT.accessKeyId, STANDIN_ACCOUNT.secretAccessKey]]),
    ec2,
    world,
    autoScaling,
    elbv2,
    route53,
    eks,
    close: async () => {
      await world.shutdown();
      await new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      });
    },
  };
  return standin;
}
