import { mkdirSync } from "node:fs";
import { definePhase, expectFiles, writeFiles } from "./common.ts";
import { prepareConfigFiles } from "./render.ts";

/**
 * Prepare configuration: the node env file, the kubelet and kube-proxy configurations and
 * kubeconfigs (CPU and topology manager policy, reserved CPUs, cluster DNS and CIDRs). Status
 * renders again and compares, so drift is repaired by the reconcile loop.
 */
export const prepareConfig = definePhase({
  id: "prepare-config",
  async start(ctx) {
    const files = prepareConfigFiles(ctx.config, ctx.paths);
    mkdirSync(ctx.paths.manifests, { recursive: true });
    mkdirSync(ctx.paths.kubeletConfigDir, { recursive: true });
    const written = writeFiles(files);
    return { message: written.length > 0 ? `wrote ${written.length} file(s)` : "configuration up to date" };
  },
  async stop() {
    return undefined;
  },
  async status(ctx) {
    expectFiles(prepareConfigFiles(ctx.config, ctx.paths));
    return undefined;
  },
});
