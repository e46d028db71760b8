import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { keelson } from "./run-cli.ts";

/**
 * `keelson configure-localhost` on an installed control plane's server.env, the server stopped
 * (test/e2e/release-upgrade.test.ts runs it on a running one, which it restarts).
 */

const work = mkdtempSync(join(tmpdir(), "keelson-localhost-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const root = join(work, "root");
const envFile = join(root, "etc", "keelson", "server.env");
const INSTALLED =
  '# keelson-server\'s settings (README "Settings"); read at every start.\nKEELSON_LISTEN=127.0.0.1:8080\nKEELSON_DATA_DIR=/var/lib/keelson\nNODE_ENV=production\n';

beforeEach(() => {
  mkdirSync(join(root, "etc", "keelson"), { recursive: true });
  writeFileSync(envFile, INSTALLED, { mode: 0o600 });
});

const configure = (...args: string[]) => keelson(["configure-localhost", "--root", root, ...args]);

describe("keelson configure-localhost", () => {
  it("sets the listen address and the load balancer's settings, keeps the rest, and is idempotent", async () => {
    const args = [
      "--ipv4",
      "0.0.0.0",
      "--ipv6",
      "::",
      "--port",
      "8443",
      "--lb-url",
      "https://keelson.example.com/",
      "--lb-addresses",
      "10.0.0.5, 10.0.0.0/24",
    ];
    const run = await configure(...args);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain("KEELSON_LISTEN: 127.0.0.1:8080 -> [::]:8443");
    expect(run.stderr).toContain("KEELSON_PUBLIC_URL: (unset) -> https://keelson.example.com");
    expect(run.stderr).toContain("they apply at its next start");
    expect(readFileSync(envFile, "utf8")).toBe(
      '# keelson-server\'s settings (README "Settings"); read at every start.\nKEELSON_LISTEN=[::]:8443\nKEELSON_DATA_DIR=/var/lib/keelson\nNODE_ENV=production\n' +
        "KEELSON_PUBLIC_URL=https://keelson.example.com\nKEELSON_TRUST_PROXY=10.0.0.5,10.0.0.0/24\n",
    );
    expect(statSync(envFile).mode & 0o777).toBe(0o600);
    const again = await configure(...args);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain("nothing to do");
  }, 60_000);

  it("takes one address of either family, and a port alone keeps the address", async () => {
    expect((await configure("--ipv6", "fd00::10")).code).toBe(0);
    expect(readFileSync(envFile, "utf8")).toContain("KEELSON_LISTEN=[fd00::10]:8080\n");
    expect((await configure("--port", "9000")).code).toBe(0);
    expect(readFileSync(envFile, "utf8")).toContain("KEELSON_LISTEN=[fd00::10]:9000\n");
    expect((await configure("--ipv4", "10.1.2.3")).code).toBe(0);
    expect(readFileSync(envFile, "utf8")).toContain("KEELSON_LISTEN=10.1.2.3:9000\n");
  }, 60_000);

  it("refuses what keelson-server could not take, with exit 2, naming the option, and changes nothing", async () => {
    const refusals: [string[], string][] = [
      [["--ipv4", "10.0.0.1", "--ipv6", "fd00::1"], "both only as the wildcards 0.0.0.0 and ::"],
      [["--ipv4", "fd00::1"], "--ipv4 fd00::1: not an IPv4 address"],
      [["--ipv6", "10.0.0.1"], "--ipv6 10.0.0.1: not an IPv6 address"],
      [["--port", "70000"], "--port 70000: must be a port from 1 to 65535"],
      [["--lb-url", "ftp://lb"], "--lb-url ftp://lb: must be an http:// or https:// URL"],
      [["--lb-addresses", "10.0.0.0/33"], "--lb-addresses: 10.0.0.0/33 is not an address or CIDR"],
      [[], "nothing to configure"],
    ];
    // At once: each is a process of its own (a few seconds each on a loaded machine).
    const runs = await Promise.all(refusals.map(([args]) => configure(...args)));
    for (const [i, [args, message]] of refusals.entries()) {
      expect(runs[i]?.code, args.join(" ")).toBe(2);
      expect(runs[i]?.stderr).toContain(message);
    }
    expect(readFileSync(envFile, "utf8")).toBe(INSTALLED);
  }, 60_000);

  it("refuses a root where nothing is installed", async () => {
    const run = await keelson(["configure-localhost", "--root", join(work, "empty"), "--port", "9000"]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("server.env does not exist: run keelson install control-plane first");
  });
});
