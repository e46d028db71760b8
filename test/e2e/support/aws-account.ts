import { expect } from "vitest";
import { STANDIN_KEYS } from "../../aws-standin/server.ts";
import { api } from "./processes.ts";

/** An AWS account on the stand-in's keys, added to the default project through the API, as an operator would. */
export interface StandinAccount {
  projectId: string;
  uuid: string;
  nodePoolUuid: string;
}

export async function addStandinAwsAccount(serverUrl: string, adminToken: string): Promise<StandinAccount> {
  const projects = await api<{ projects: { id: string; name: string }[] }>(`${serverUrl}/v1/projects`, adminToken);
  const projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
  const made = await api(`${serverUrl}/v4/${projectId}/cloudProviders`, adminToken, {
    method: "POST",
    body: { name: "aws-standin", type: "aws", key: STANDIN_KEYS.key, secret: STANDIN_KEYS.secret },
  });
  expect(made.status, JSON.stringify(made.body)).toBe(200);
  const accounts = await api<{ uuid: string; name: string; nodePoolUuid: string }[]>(
    `${serverUrl}/v4/${projectId}/cloudProviders`,
    adminToken,
  );
  const account = accounts.body.find((a) => a.name === "aws-standin");
  expect(account).toBeDefined();
  return { projectId, uuid: account?.uuid as string, nodePoolUuid: account?.nodePoolUuid as string };
}
