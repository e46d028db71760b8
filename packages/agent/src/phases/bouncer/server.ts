/**
 * The node bouncer: a token-review webhook for the apiserver
 * (--authentication-token-webhook-config-file). It accepts the bearer tokens the control plane
 * issued for this cluster (kubeconfig tokens) and nothing else. Run as its own supervised
 * process: `node --import tsx server.ts --listen ip:port --tls-cert f --tls-key f
 * (--tokens-file f | --verify-url u [--verify-ca f])`.
 */
import { readFileSync } from "node:fs";
import https from "node:https";
import { parseArgs } from "node:util";
import { tokensFileVerifier, urlVerifier, type Verifier } from "./verifier.ts";

const { values } = parseArgs({
  options: {
    listen: { type: "string" },
    "tls-cert": { type: "string" },
    "tls-key": { type: "string" },
    "tokens-file": { type: "string" },
    "verify-url": { type: "string" },
    "verify-ca": { type: "string" },
  },
});

function die(message: string): never {
  process.stderr.write(`node-bouncer: ${message}\n`);
  process.exit(2);
}

function log(msg: string, extra: Record<string, unknown> = {}): void {
  process.stderr.write(
    `${JSON.stringify({ time: new Date().toISOString(), component: "node-bouncer", msg, ...extra })}\n`,
  );
}

const listen = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(values.listen ?? "") ?? die("--listen ip:port is required");
if (!values["tls-cert"] || !values["tls-key"]) die("--tls-cert and --tls-key are required");
const verifier: Verifier = values["tokens-file"]
  ? tokensFileVerifier(values["tokens-file"])
  : values["verify-url"]
    ? urlVerifier(values["verify-url"], values["verify-ca"] ? readFileSync(values["verify-ca"], "utf8") : undefined)
    : die("one of --tokens-file or --verify-url is required");

interface TokenReview {
  apiVersion?: string;
  kind?: string;
  spec?: { token?: string };
}

const server = https.createServer(
  { cert: readFileSync(values["tls-cert"]), key: readFileSync(values["tls-key"]) },
  (req, res) => {
    const send = (status: number, body: unknown) => {
      const text = JSON.stringify(body);
      res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
      res.end(text);
    };
    const path = new URL(req.url ?? "/", "https://bouncer").pathname;
    if (req.method === "GET" && path === "/healthz") return send(200, { status: "ok" });
    if (req.method !== "POST" || path !== "/authenticate") return send(404, { message: "not found" });
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => {
      body += chunk;
      if (body.length > 65_536) req.destroy();
    });
    req.on("end", async () => {
      let review: TokenReview;
      try {
        review = JSON.parse(body) as TokenReview;
      } catch {
        return send(400, { message: "body is not JSON" });
      }
      const apiVersion = review.apiVersion ?? "authentication.k8s.io/v1";
      const token = review.spec?.token;
      const deny = (error?: string) =>
        send(200, { apiVersion, kind: "TokenReview", status: { authenticated: false, ...(error ? { error } : {}) } });
      if (typeof token !== "string" || token === "") return deny("no token");
      try {
        const identity = await verifier(token);
        if (!identity) return deny();
        send(200, {
          apiVersion,
          kind: "TokenReview",
          status: { authenticated: true, user: { username: identity.username, groups: identity.groups } },
        });
      } catch (err) {
        log("verifier failed", { err: (err as Error).message });
        deny("verifier unavailable");
      }
    });
  },
);

server.on("error", (err) => die(`cannot listen on ${values.listen}: ${err.message}`));
server.listen({ host: listen[1] ?? listen[2], port: Number(listen[3]), exclusive: true }, () =>
  log("listening", { listen: values.listen, pid: process.pid }),
);
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.once(signal, () => {
    log("stopping", { signal });
    server.closeAllConnections();
    server.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 1000).unref();
  });
}
