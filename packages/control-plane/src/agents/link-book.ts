import { type Db, nodes } from "@keelson/db";
import { inArray } from "drizzle-orm";
import type { FastifyBaseLogger } from "fastify";
import type { Channels } from "../replicas/channels.ts";
import { dropLink, dropLinksOf, type HeldLink, linksElsewhere, reapLinks, takeLink } from "../replicas/links.ts";
import { CapabilitySets } from "./sessions.ts";

export interface LinkBookOptions {
  db: Db;
  channels: Channels;
  replicaId: string;
  /** A replica whose heartbeat is older than this is dead, and its links are reaped. */
  leaseMs: number;
  log: FastifyBaseLogger;
}

/**
 * A link change as notified on the `links` channel: a host's link taken (`r`, the host's
 * project `p`, its agent's capabilities `c`: absent from a replica older than them) or dropped
 * (`r` null) at epoch `e`, or every link of one replica gone (its drain, or its death).
 */
type LinkNotice =
  | { h: string; r: string; e: number; p: string; c?: string[] }
  | { h: string; r: null; e: number }
  | { gone: string };

/** A host's link another live replica holds, as this one knows it. */
interface LinkElsewhere {
  replica: string;
  epoch: number;
  projectId: string;
  /** What its agent declared in its hello; undefined when the holder did not say. */
  capabilities: ReadonlySet<string> | undefined;
}

/**
 * This replica's view of the agent_links table (replicas/links.ts): it records the links it
 * takes and drops, and keeps in memory which hosts other live replicas hold, from the `links`
 * channel, so that "is this host connected anywhere" and "which hosts of a project are" stay
 * synchronous lookups (the hub's isConnected and connectedHosts). On SQLite (one replica) nothing is ever held elsewhere.
 */
export class LinkBook {
  private readonly elsewhere = new Map<string, LinkElsewhere>();
  /** Capability sets shared by the hosts that declared the same list (sessions.ts). */
  private readonly capabilitySets = new CapabilitySets();
  private unlisten: (() => Promise<void>) | undefined;
  private loading: Promise<void> = Promise.resolve();
  /** Told when another replica took a host's link at `epoch` (the hub closes its own if older). */
  onTaken: (hostId: string, epoch: number) => void = () => undefined;

  constructor(private readonly options: LinkBookOptions) {}

  get replicaId(): string {
    return this.options.replicaId;
  }

  /** At start, before the first link: removes this replica's own links (left by its previous process) and dead replicas'. */
  async reapAtStart(): Promise<void> {
    const { db, replicaId, leaseMs } = this.options;
    await reapLinks(db, replicaId, leaseMs, true);
  }

  /** Listens for link changes; resolves once the links live replicas hold are loaded. */
  async listen(): Promise<void> {
    this.unlisten = await this.options.channels.listen(
      "links",
      (payload) => this.onNotice(payload),
      // Each (re)subscription: what changed while not listening is read from the table.
      () => {
        this.loading = this.reload();
      },
    );
    await this.loading;
  }

  /** Whether another live replica holds the host's link. */
  heldElsewhere(hostId: string): boolean {
    return this.elsewhere.has(hostId);
  }

  /** Hosts whose link another live replica holds, optionally of one project. */
  hostsElsewhere(projectId?: string): string[] {
    const hosts: string[] = [];
    for (const [hostId, link] of this.elsewhere)
      if (projectId === undefined || link.projectId === projectId) hosts.push(hostId);
    return hosts;
  }

  /** What the agent of a host linked elsewhere declared; undefined when unknown or not linked elsewhere. */
  capabilitiesElsewhere(hostId: string): ReadonlySet<string> | undefined {
    return this.elsewhere.get(hostId)?.capabilities;
  }

  /** Whether another replica is known to hold the host's link at an epoch above `epoch`. */
  supersedes(hostId: string, epoch: number): boolean {
    return (this.elsewhere.get(hostId)?.epoch ?? 0) > epoch;
  }

  /** Records this replica as the host's link holder; answers the epoch (undefined: not recorded). */
  async take(hostId: string, projectId: string, capabilities: ReadonlySet<string>): Promise<number | undefined> {
    try {
      const declared = [...capabilities];
      const epoch = await takeLink(this.options.db, hostId, this.options.replicaId, declared);
      if (!this.supersedes(hostId, epoch)) this.elsewhere.delete(hostId);
      await this.announce({ h: hostId, r: this.options.replicaId, e: epoch, p: projectId, c: declared });
      return epoch;
    } catch (err) {
      // The link still works here (a full disk, the database away): other replicas only
      // do not know of it until the agent links again.
      this.options.log.warn({ err, hostId }, "could not record an agent link in agent_links");
      return undefined;
    }
  }

  /** The link at `epoch` ended here; false when another replica took it since (it is theirs now). */
  async drop(hostId: string, epoch: number | undefined): Promise<boolean> {
    if (epoch === undefined) return !this.elsewhere.has(hostId);
    try {
      const dropped = await dropLink(this.options.db, hostId, this.options.replicaId, epoch);
      if (dropped) await this.announce({ h: hostId, r: null, e: epoch });
      return dropped;
    } catch (err) {
      this.options.log.warn({ err, hostId }, "could not remove an agent link from agent_links");
      return !this.elsewhere.has(hostId);
    }
  }

  /** A drain: every link this replica holds is removed; answers their hosts. */
  async dropAllHere(): Promise<string[]> {
    const rows = await dropLinksOf(this.options.db, this.options.replicaId);
    if (rows.length > 0) await this.announce({ gone: this.options.replicaId });
    return rows.map((r) => r.hostId);
  }

  /** Removes dead replicas' links (run with each heartbeat); answers the hosts they held, with their projects (for link events). */
  async reap(): Promise<{ hostId: string; projectId: string }[]> {
    const { db, replicaId, leaseMs } = this.options;
    const reaped = await reapLinks(db, replicaId, leaseMs);
    const dead = new Set(reaped.map((r) => r.replica));
    for (const replica of dead) {
      const hosts = reaped.filter((r) => r.replica === replica).length;
      this.options.log.info({ replica, hosts }, "reaped the agent links of a dead replica");
      await this.announce({ gone: replica });
    }
    if (reaped.length === 0) return [];
    return await db
      .select({ hostId: nodes.id, projectId: nodes.projectId })
      .from(nodes)
      .where(
        inArray(
          nodes.id,
          reaped.map((r) => r.hostId),
        ),
      );
  }

  async close(): Promise<void> {
    await this.unlisten?.().catch(() => undefined);
    this.unlisten = undefined;
  }

  private async announce(notice: LinkNotice): Promise<void> {
    await this.options.channels.notify("links", JSON.stringify(notice));
  }

  private onNotice(payload: string): void {
    let notice: LinkNotice;
    try {
      notice = JSON.parse(payload) as LinkNotice;
    } catch {
      return;
    }
    if ("gone" in notice) {
      for (const [hostId, link] of this.elsewhere) if (link.replica === notice.gone) this.elsewhere.delete(hostId);
      return;
    }
    if (notice.r === null) {
      const known = this.elsewhere.get(notice.h);
      if (known && known.epoch <= notice.e) this.elsewhere.delete(notice.h);
      return;
    }
    if (notice.r === this.options.replicaId) return;
    const known = this.elsewhere.get(notice.h);
    if (!known || known.epoch < notice.e)
      this.elsewhere.set(notice.h, {
        replica: notice.r,
        epoch: notice.e,
        projectId: notice.p,
        capabilities: this.setOf(notice.c),
      });
    this.onTaken(notice.h, notice.e);
  }

  private setOf(list: unknown): ReadonlySet<string> | undefined {
    return Array.isArray(list) && list.every((c) => typeof c === "string") ? this.capabilitySets.of(list) : undefined;
  }

  private async reload(): Promise<void> {
    try {
      const rows: HeldLink[] = await linksElsewhere(this.options.db, this.options.replicaId, this.options.leaseMs);
      this.elsewhere.clear();
      for (const row of rows) {
        this.elsewhere.set(row.hostId, {
          replica: row.replica,
          epoch: row.epoch,
          projectId: row.projectId,
          capabilities: this.setOf(row.capabilities ?? undefined),
        });
        this.onTaken(row.hostId, row.epoch);
      }
    } catch (err) {
      this.options.log.warn({ err }, "could not read the links other replicas hold");
    }
  }
}
