import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { CliError } from "../errors.ts";
import type { Layout } from "./layout.ts";

/**
 * The system user keelson-server runs as (the unit's `User=`/`Group=`; its StateDirectory is
 * given to it by systemd). `keelson install control-plane` creates it with the real `useradd`:
 * a system user and group, no login shell, home the data dir. Under a temporary root (tests,
 * CI, any host without systemd) `useradd --prefix <root>` creates it in `<root>/etc/passwd`
 * instead, so the unit there names a user that exists in that root; the process supervisor
 * that stands in for systemd there runs the server as the invoking user, and the files stay
 * that user's (0600/0700).
 */
export const SERVICE_USER = "keelson";

export interface ServiceUser {
  name: string;
  uid: number;
  gid: number;
  created: boolean;
}

/** The user's passwd entry under `root`, read from its /etc/passwd (what getent would answer for `/`). */
export function findServiceUser(root: string): Omit<ServiceUser, "created"> | undefined {
  let passwd: string;
  try {
    passwd = readFileSync(join(root, "etc", "passwd"), "utf8");
  } catch {
    return undefined;
  }
  const line = passwd.split("\n").find((l) => l.startsWith(`${SERVICE_USER}:`));
  const [, , uid, gid] = line?.split(":") ?? [];
  return line ? { name: SERVICE_USER, uid: Number(uid), gid: Number(gid) } : undefined;
}

/** Creates the service user when it does not exist (idempotent). */
export function ensureServiceUser(layout: Layout): ServiceUser {
  const found = findServiceUser(layout.root);
  if (found) return { ...found, created: false };
  const args = [
    ...(layout.root === "/" ? [] : ["--prefix", layout.root]),
    "--system",
    "--user-group",
    "--home-dir",
    "/var/lib/keelson",
    "--no-create-home",
    "--shell",
    "/usr/sbin/nologin",
    "--comment",
    "Keelson control plane",
    SERVICE_USER,
  ];
  try {
    execFileSync("useradd", args, { stdio: ["ignore", "pipe", "pipe"] });
  } catch (error) {
    const e = error as { stderr?: Buffer; message: string };
    throw new CliError(`useradd ${args.join(" ")}: ${(e.stderr?.toString() || e.message).trim()}`);
  }
  const made = findServiceUser(layout.root);
  if (!made) throw new CliError(`useradd made no ${SERVICE_USER} in ${join(layout.root, "etc", "passwd")}`);
  return { ...made, created: true };
}

/**
 * Where systemd runs the server as the service user: the data dir and what the tool wrote into
 * it as root (the admin token, a restored database) handed to that user. systemd gives a
 * StateDirectory to its user only when the directory's own owner differs, not the files in it.
 */
export function giveDataDir(layout: Layout, user: Pick<ServiceUser, "uid" | "gid">): void {
  execFileSync("chown", ["-R", `${user.uid}:${user.gid}`, layout.dataDir], { stdio: ["ignore", "pipe", "pipe"] });
}
