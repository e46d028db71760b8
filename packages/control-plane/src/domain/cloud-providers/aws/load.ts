/**
 * The AWS calls the control plane makes, loaded on their first use: the SDK's clients cost
 * about 70 MiB of resident memory once imported (a bare node process went from 69 to 142 MiB
 * on importing @aws-sdk/client-ec2 alone), which a server that never speaks to AWS, or one
 * holding 15,000 agent links, should not carry from its start. Nothing that runs at start
 * imports account.ts, region-detail.ts, eks.ts or clients.ts but through this (a test follows
 * the server's static imports). The first load takes a second or more (seconds on a busy
 * machine), so a server whose database holds an AWS account loads it right after start
 * (warm-up.ts), and only the first AWS account of a server pays it in a request.
 */
export async function awsApi() {
  const [account, regionDetail, eks] = await Promise.all([
    import("./account.ts"),
    import("./region-detail.ts"),
    import("./eks.ts"),
  ]);
  return { ...account, ...regionDetail, ...eks };
}
