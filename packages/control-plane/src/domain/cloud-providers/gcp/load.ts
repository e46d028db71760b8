/**
 * The GCP calls, loaded on their first use like the AWS ones (aws/load.ts says why): importing
 * @google-cloud/compute and google-auth-library took 4.5-7 s and 130-150 MiB of resident memory
 * in a bare node process here (39 → 172-191 MiB, load average 15), which a server with no GCP
 * account should not pay, at start or ever.
 */
export const gcpApi = () => import("./account.ts");
