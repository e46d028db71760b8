import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSecureContext, type SecureContext } from "node:tls";
import { ControlPlaneTrust, establishTrust } from "./deps.ts";

/** What the simulated fleet trusts: set up once and shared by every agent (one TLS context, not N). */
export interface FleetTrust {
  /** `fetch` verifying the control plane against the trust (registration, join tokens). */
  fetch: typeof fetch;
  /** The TLS context every link is opened with; undefined: plain HTTP, or the system's CA store. */
  secureContext: SecureContext | undefined;
}

/**
 * The fleet's trust in the control plane at `url`, by the real agent's code (packages/agent
 * link/trust.ts): with `caHash` (KEELSON_CA_HASH) the CA bundle is fetched, only a CA with that
 * hash is kept and a wrong hash throws TrustError before any join token is sent; with `ca` the
 * fleet trusts that PEM alone, as agents that kept it in their state dir. Neither on https: the
 * system's store. Verification is never turned off: every link checks the server's chain and
 * name against this, so a TLS bench cannot pass on a certificate the agents would refuse.
 */
export async function fleetTrust(url: string, options: { caHash?: string; ca?: string }): Promise<FleetTrust> {
  let trust: ControlPlaneTrust;
  if (options.ca) {
    trust = new ControlPlaneTrust(options.ca);
  } else {
    // establishTrust keeps the accepted CA in a state dir; the fleet holds it in memory instead.
    const stateDir = mkdtempSync(join(tmpdir(), "keelson-sim-trust-"));
    try {
      trust = await establishTrust({ controlPlane: url, caHash: options.caHash, stateDir });
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  }
  return { fetch: trust.fetch, secureContext: trust.ca ? createSecureContext({ ca: trust.ca }) : undefined };
}
