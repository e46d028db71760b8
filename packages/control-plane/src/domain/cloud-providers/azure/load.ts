/**
 * The Azure calls, loaded on their first use like the AWS ones (aws/load.ts says why): importing
 * @azure/identity and the ARM client took 0.8-1.2 s and 27 MiB of resident memory in a bare node
 * process here (39 → 66 MiB, load average 15), which a server with no Azure account should not pay.
 */
export const azureApi = () => import("./account.ts");
