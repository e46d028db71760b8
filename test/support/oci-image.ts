import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * Writes a tiny OCI image archive (the layout `ctr images import` reads) without any registry:
 * one uncompressed layer holding a static busybox as /bin/busybox and /bin/true, its config and
 * manifest, and an index naming the image `name` (e.g. "example.com/keelson/probe:1.0").
 */
export function writeOciArchive(workDir: string, archive: string, name: string, busybox = "/bin/busybox"): void {
  const rootfs = join(workDir, "rootfs");
  const layout = join(workDir, "layout");
  rmSync(workDir, { recursive: true, force: true });
  mkdirSync(join(rootfs, "bin"), { recursive: true });
  mkdirSync(join(layout, "blobs", "sha256"), { recursive: true });
  copyFileSync(busybox, join(rootfs, "bin", "busybox"));
  symlinkSync("busybox", join(rootfs, "bin", "true"));
  const layerTar = join(workDir, "layer.tar");
  execFileSync("tar", ["--numeric-owner", "--owner=0", "--group=0", "-cf", layerTar, "-C", rootfs, "bin"]);

  const blob = (content: Buffer) => {
    const digest = createHash("sha256").update(content).digest("hex");
    writeFileSync(join(layout, "blobs", "sha256", digest), content);
    return { digest: `sha256:${digest}`, size: content.length };
  };
  const layer = blob(readFileSync(layerTar));
  const architecture = process.arch === "x64" ? "amd64" : process.arch;
  const config = blob(
    Buffer.from(
      JSON.stringify({
        architecture,
        os: "linux",
        config: { Cmd: ["/bin/true"] },
        rootfs: { type: "layers", diff_ids: [layer.digest] },
      }),
    ),
  );
  const manifest = blob(
    Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: "application/vnd.oci.image.manifest.v1+json",
        config: { mediaType: "application/vnd.oci.image.config.v1+json", ...config },
        layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar", ...layer }],
      }),
    ),
  );
  const tag = name.slice(name.lastIndexOf(":") + 1);
  writeFileSync(
    join(layout, "index.json"),
    JSON.stringify({
      schemaVersion: 2,
      manifests: [
        {
          mediaType: "application/vnd.oci.image.manifest.v1+json",
          ...manifest,
          platform: { architecture, os: "linux" },
          annotations: { "io.containerd.image.name": name, "org.opencontainers.image.ref.name": tag },
        },
      ],
    }),
  );
  writeFileSync(join(layout, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
  execFileSync("tar", ["-cf", archive, "-C", layout, "oci-layout", "index.json", "blobs"]);
}
