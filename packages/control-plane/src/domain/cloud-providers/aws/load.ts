import { cloudProviders, type Db } from "@keelson/db";
import { eq } from "drizzle-orm";
import type { FastifyBaseLogger } from "fastify";

/**
 * The AWS calls the control plane makes, loaded on their first use: the SDK's clients cost
 * about 70 MiB of resident memory once imported (a bare node process went from 69 to 142 MiB
 * on importing @aws-sdk/client-ec2 alone), which a server that never speaks to AWS, or one
 * holding 15,000 agent links, should not carry from its start. Nothing that runs at start
 * imports account.ts, region-detail.ts, eks.ts or clients.ts but through this (a test follows
 * the server's static imports). The first load takes a second or more (seconds on a busy
 * machine), so a server whose database holds an AWS account loads it right after start
 * (warmAwsApi), and only the first AWS account of a server pays it in a request.
 */
export async function awsApi() {
  const [account, regionDetail, eks] = await Promise.all([
    import("./account.ts"),
    import("./region-detail.ts"),
    import("./eks.ts"),
  ]);
  return { ...account, ...regionDetail, ...eks };
}

/** At start: loads the AWS calls in the background when some project has an AWS account. */
export async function warmAwsApi(db: Db, log: FastifyBaseLogger): Promise<void> {
  try {
    const [account] = await db
      .select({ id: cloudProviders.id })
      .from(cloudProviders)
      .where(eq(cloudProviders.type, "aws"))
      .limit(1);
    if (account) await awsApi();
  } catch (err) {
    // Only a warm-up: the first AWS call loads it anyway (and says why if it cannot).
    log.warn({ err }, "could not load the AWS SDK ahead of its first use");
  }
}
