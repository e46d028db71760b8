/**
 * The boot script of an auto-deployed instance (EC2 user data, run once by cloud-init as root).
 * It reads the instance's id from the instance metadata service (IMDSv2: a session token, then
 * `meta-data/instance-id`), so the agent registers as that instance, and runs the cluster join
 * token's install command (agent-install.ts). `httpProxy` (spec §2.1) is exported for the
 * install's downloads and written for the agent, the metadata address and the control plane's
 * host left out of it.
 */
export const IMDS = "http://169.254.169.254/latest";

/** Single-quoted for sh. */
const q = (value: string) => `'${value.replaceAll("'", `'"'"'`)}'`;

export function instanceUserData(
  installCommand: string,
  options: { httpProxy?: string; controlPlane: string },
): string {
  const lines = ["#!/bin/sh", "# Keelson auto deploy: this instance's agent joins its cluster.", "set -eu"];
  if (options.httpProxy) {
    const noProxy = ["169.254.169.254", "localhost", "127.0.0.1", new URL(options.controlPlane).hostname].join(",");
    for (const name of ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]) {
      lines.push(`export ${name}=${q(options.httpProxy)}`);
    }
    lines.push(`export NO_PROXY=${q(noProxy)}`, `export no_proxy=${q(noProxy)}`);
  }
  lines.push(
    `imds_token=$(curl -fsS --noproxy '*' -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' ${q(`${IMDS}/api/token`)})`,
    `KEELSON_CLOUD_INSTANCE_ID=$(curl -fsS --noproxy '*' -H "X-aws-ec2-metadata-token: $imds_token" ${q(`${IMDS}/meta-data/instance-id`)})`,
    "export KEELSON_CLOUD_INSTANCE_ID",
    installCommand,
    "",
  );
  return lines.join("\n");
}
