/**
 * The machine images Keelson supports on AWS, by owner and name pattern as their publishers
 * name them: Canonical's Ubuntu LTS server images and Debian's official cloud images, amd64 and
 * arm64. Region detail lists the newest build of each in the region (image ids differ per region).
 */
export const CANONICAL_OWNER = "099720109477";
export const DEBIAN_OWNER = "136693071363";

export interface SupportedImage {
  /** What the API shows: `ubuntu-24.04`. */
  os: string;
  owner: string;
  /** An EC2 `name` filter pattern (`*` wildcard). */
  pattern: string;
}

const ARCHES = ["amd64", "arm64"];

export const SUPPORTED_IMAGES: SupportedImage[] = ARCHES.flatMap((arch) => [
  {
    os: "ubuntu-24.04",
    owner: CANONICAL_OWNER,
    pattern: `ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-${arch}-server-*`,
  },
  { os: "ubuntu-22.04", owner: CANONICAL_OWNER, pattern: `ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-${arch}-server-*` },
  { os: "debian-12", owner: DEBIAN_OWNER, pattern: `debian-12-${arch}-*` },
]);

/** The supported image a name belongs to, by the same wildcard rule EC2's filter applies. */
export function supportedImageOf(owner: string, name: string): SupportedImage | undefined {
  return SUPPORTED_IMAGES.find((image) => {
    if (image.owner !== owner) return false;
    const body = image.pattern.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*");
    return new RegExp(`^${body}$`).test(name);
  });
}
