import { AGENT_CAPABILITIES, type CommandResult } from "@keelson/protocol";
import type { Keelson } from "../../context.ts";
import { badRequest } from "../../http/errors.ts";
import type { Identity } from "../identity/resolver.ts";
import { ImageArchiveStore } from "../packages/image-archives.ts";
import { linkedHost } from "./linked-host.ts";

/** Downloading and importing an archive of a few hundred MiB takes minutes on a slow host. */
const STAGE_TIMEOUT_MS = 10 * 60_000;
const LIST_TIMEOUT_MS = 30_000;

type Parts = Pick<Keelson, "db" | "store" | "agents" | "dataDir">;

/** The host, linked now by an agent that takes the images commands; 409 otherwise. */
const imageHost = (k: Parts, identity: Identity, hostId: string) =>
  linkedHost(k, identity, hostId, AGENT_CAPABILITIES.images, "to stage images");

/**
 * `POST /v1/hosts/{uuid}/images`: the stored archive `sha256` staged on the host as `<name>.tar`
 * and imported into its runtime when one runs (images.stage); answers once the agent has it.
 */
export async function stageHostImages(
  k: Parts,
  identity: Identity,
  hostId: string,
  request: { name: string; sha256: string },
): Promise<CommandResult<"images.stage">> {
  const store = new ImageArchiveStore(k);
  const archive = await store.find(request.sha256);
  if (!archive) {
    throw badRequest(
      "sha256",
      `no image archive with sha256 ${request.sha256} is stored: upload it first (POST /v1/imageArchives)`,
    );
  }
  const host = await imageHost(k, identity, hostId);
  const payload = {
    name: request.name,
    url: store.downloadPath(archive.sha256),
    sha256: archive.sha256,
    images: archive.images,
  };
  return k.agents.sendCommand(host.id, "images.stage", payload, { timeoutMs: STAGE_TIMEOUT_MS });
}

/** `GET /v1/hosts/{uuid}/images`: the host runtime's image list, asked of its agent now (images.list). */
export async function listHostImages(
  k: Parts,
  identity: Identity,
  hostId: string,
): Promise<CommandResult<"images.list">> {
  const host = await imageHost(k, identity, hostId);
  return k.agents.sendCommand(host.id, "images.list", {}, { timeoutMs: LIST_TIMEOUT_MS });
}
