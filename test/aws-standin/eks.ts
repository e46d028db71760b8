import { STANDIN_REGIONS } from "./data.ts";

/**
 * STAND-IN, for tests: the Amazon EKS actions Keelson calls, in EKS's REST-JSON protocol
 * (Amazon EKS API Reference, API version 2017-11-01):
 * - ListClusters: `GET /clusters?maxResults=&nextToken=`, `{"clusters": [names], "nextToken"}`;
 *   maxResults 1-100, default 100.
 * - DescribeCluster: `GET /clusters/{name}`, `{"cluster": {...}}` with the fields the reference
 *   lists (timestamps as epoch seconds, as restJson1 writes them).
 * - Errors: the HTTP status, the code in `x-amzn-ErrorType`, `{"message": ...}` in the body:
 *   an unknown cluster is 404 ResourceNotFoundException "No cluster found for name: NAME.", a
 *   bad parameter 400 InvalidParameterException, an outage 503 ServiceUnavailableException.
 * What the account holds: a few clusters per region (below), which tests may change; a region in
 * `failing` answers every call with ServiceUnavailableException, one in `silent` never answers.
 */
export interface EksCluster {
  name: string;
  version: string;
  status: "CREATING" | "ACTIVE" | "DELETING" | "FAILED" | "UPDATING" | "PENDING";
  endpointPublicAccess: boolean;
  endpointPrivateAccess: boolean;
  createdAt: number;
}

export class EksError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const STANDIN_CLUSTERS: Partial<Record<string, EksCluster[]>> = {
  "us-east-1": [
    {
      name: "prod-east",
      version: "1.30",
      status: "ACTIVE",
      endpointPublicAccess: true,
      endpointPrivateAccess: true,
      createdAt: 1_735_689_600,
    },
    {
      name: "payments",
      version: "1.29",
      status: "ACTIVE",
      endpointPublicAccess: false,
      endpointPrivateAccess: true,
      createdAt: 1_738_368_000,
    },
  ],
  "eu-central-1": [
    {
      name: "analytics",
      version: "1.31",
      status: "ACTIVE",
      endpointPublicAccess: false,
      endpointPrivateAccess: true,
      createdAt: 1_740_787_200,
    },
  ],
};

/** EKS's rule for a cluster name (CreateCluster's `name`): 1-100 characters, this pattern. */
const CLUSTER_NAME = /^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$/;

export class EksState {
  readonly clusters = new Map<string, Map<string, EksCluster>>(
    STANDIN_REGIONS.map((r) => [r, new Map((STANDIN_CLUSTERS[r] ?? []).map((c) => [c.name, { ...c }]))]),
  );
  /** Regions whose EKS endpoint answers 503 to everything. */
  readonly failing = new Set<string>();
  /** Regions whose EKS endpoint never answers (the caller's time limit must end the wait). */
  readonly silent = new Set<string>();

  add(region: string, cluster: Partial<EksCluster> & { name: string }): void {
    this.regionMap(region).set(cluster.name, {
      version: "1.30",
      status: "ACTIVE",
      endpointPublicAccess: false,
      endpointPrivateAccess: true,
      createdAt: 1_750_000_000,
      ...cluster,
    });
  }

  private regionMap(region: string): Map<string, EksCluster> {
    let map = this.clusters.get(region);
    if (!map) {
      map = new Map();
      this.clusters.set(region, map);
    }
    return map;
  }

  isSilent(region: string): boolean {
    return this.silent.has(region);
  }
}

const MAX_RESULTS = 100;

function listClusters(state: EksState, region: string, query: URLSearchParams): unknown {
  const max = query.has("maxResults") ? Number(query.get("maxResults")) : MAX_RESULTS;
  if (!Number.isInteger(max) || max < 1 || max > MAX_RESULTS) {
    throw new EksError(400, "InvalidParameterException", "maxResults must be between 1 and 100");
  }
  const names = [...(state.clusters.get(region)?.keys() ?? [])].sort();
  const token = query.get("nextToken");
  const start = token ? Number(Buffer.from(token, "base64url").toString("utf8")) : 0;
  if (!Number.isInteger(start) || start < 0 || start > names.length) {
    throw new EksError(400, "InvalidParameterException", "The nextToken is not valid");
  }
  const end = start + max;
  return {
    clusters: names.slice(start, end),
    nextToken: end < names.length ? Buffer.from(String(end)).toString("base64url") : null,
  };
}

function describeCluster(state: EksState, region: string, name: string, accountId: string): unknown {
  const cluster = state.clusters.get(region)?.get(name);
  if (!cluster) throw new EksError(404, "ResourceNotFoundException", `No cluster found for name: ${name}.`);
  const id = Buffer.from(`${region}/${name}`).toString("hex").slice(0, 32).toUpperCase();
  return {
    cluster: {
      name: cluster.name,
      arn: `arn:aws:eks:${region}:${accountId}:cluster/${cluster.name}`,
      createdAt: cluster.createdAt,
      version: cluster.version,
      endpoint: `https://${id}.gr7.${region}.eks.amazonaws.com`,
      roleArn: `arn:aws:iam::${accountId}:role/eks-cluster-role`,
      resourcesVpcConfig: {
        subnetIds: [],
        securityGroupIds: [],
        vpcId: "vpc-standin",
        endpointPublicAccess: cluster.endpointPublicAccess,
        endpointPrivateAccess: cluster.endpointPrivateAccess,
        publicAccessCidrs: cluster.endpointPublicAccess ? ["0.0.0.0/0"] : [],
      },
      kubernetesNetworkConfig: { serviceIpv4Cidr: "10.100.0.0/16", ipFamily: "ipv4" },
      status: cluster.status,
      certificateAuthority: { data: Buffer.from(`stand-in CA of ${cluster.name}`).toString("base64") },
      platformVersion: "eks.8",
      tags: {},
    },
  };
}

/** One EKS request: the JSON answer, or an EksError. */
export function eksAction(
  state: EksState,
  region: string,
  method: string,
  url: string,
  accountId: string,
): Record<string, unknown> {
  if (state.failing.has(region)) {
    throw new EksError(503, "ServiceUnavailableException", "The service is unavailable. Try again later.");
  }
  const [path = "/", query = ""] = url.split("?", 2) as [string, string?];
  if (method === "GET" && path === "/clusters") {
    return listClusters(state, region, new URLSearchParams(query)) as Record<string, unknown>;
  }
  const describe = /^\/clusters\/([^/]+)$/.exec(path);
  if (method === "GET" && describe) {
    const name = decodeURIComponent(describe[1] as string);
    if (!CLUSTER_NAME.test(name)) {
      throw new EksError(400, "InvalidParameterException", `The cluster name ${name} is not valid`);
    }
    return describeCluster(state, region, name, accountId) as Record<string, unknown>;
  }
  throw new EksError(404, "UnknownOperationException", `No operation at ${method} ${path}`);
}
