/** The GCP calls, loaded on their first use like the AWS ones (aws/load.ts says why). */
export const gcpApi = () => import("./account.ts");
