import { renameSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { execa } from "execa";

/**
 * One `etcdctl snapshot save` against this master's own etcd member. The snapshot is written
 * under a temporary name and renamed when complete, so a run cut short never leaves a file
 * that retention or a restore would take for a backup.
 */

export interface SnapshotTarget {
  /** The etcdctl binary (the node package's). */
  etcdctl: string;
  /** This member's client URL. */
  endpoint: string;
  /** Client TLS (etcd requires client certificates on masters); absent for a plain etcd. */
  tls?: { caCert: string; cert: string; key: string };
  timeoutMs: number;
}

export async function saveSnapshot(target: SnapshotTarget, file: string, signal?: AbortSignal): Promise<void> {
  const partial = join(dirname(file), `.in-progress-${Date.now()}.db`);
  const tls = target.tls
    ? [`--cacert=${target.tls.caCert}`, `--cert=${target.tls.cert}`, `--key=${target.tls.key}`]
    : [];
  try {
    const out = await execa(
      target.etcdctl,
      [`--endpoints=${target.endpoint}`, ...tls, "--dial-timeout=5s", "snapshot", "save", partial],
      {
        env: { ETCDCTL_API: "3" },
        reject: false,
        all: true,
        timeout: target.timeoutMs,
        cancelSignal: signal,
        stdin: "ignore",
      },
    );
    if (out.exitCode !== 0) {
      const why = out.timedOut
        ? `timed out after ${target.timeoutMs} ms`
        : String(out.all ?? "")
            .trim()
            .split("\n")
            .slice(-3)
            .join("\n") || `exit code ${out.exitCode}`;
      throw new Error(`etcdctl snapshot save failed: ${why}`);
    }
    renameSync(partial, file);
  } finally {
    rmSync(partial, { force: true });
    rmSync(`${partial}.part`, { force: true });
  }
}
