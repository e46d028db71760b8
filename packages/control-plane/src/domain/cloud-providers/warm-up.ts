import { cloudProviders, type Db } from "@keelson/db";
import type { FastifyBaseLogger } from "fastify";
import { awsApi } from "./aws/load.ts";
import { azureApi } from "./azure/load.ts";
import { gcpApi } from "./gcp/load.ts";

/** Each cloud's calls, loaded on first use (aws/load.ts says why not at start). */
const LOADERS: Record<string, () => Promise<unknown>> = { aws: awsApi, azure: azureApi, gcp: gcpApi };

/**
 * At start, in the background: loads the calls of each cloud some project has an account of,
 * so that no request pays the SDK's load (seconds: GCP's took 4.5-7 s on a busy machine). A
 * server with no account of a cloud never loads its SDK.
 */
export async function warmCloudApis(db: Db, log: FastifyBaseLogger): Promise<void> {
  try {
    const types = await db.selectDistinct({ type: cloudProviders.type }).from(cloudProviders);
    for (const { type } of types) await LOADERS[type]?.();
  } catch (err) {
    // Only a warm-up: the first call loads the SDK anyway (and says why if it cannot).
    log.warn({ err }, "could not load a cloud SDK ahead of its first use");
  }
}
