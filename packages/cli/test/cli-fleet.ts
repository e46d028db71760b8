import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import { ADMIN_TOKEN } from "../../control-plane/test/helpers.ts";
import { type Fleet, startFleet } from "../../control-plane/test/membership-harness.ts";
import { FleetAllocator } from "../../control-plane/test/rollout-harness.ts";

/** What a CLI test file runs the binary against: a control plane with simulated hosts. */
export interface CliFleet {
  f: Fleet;
  pool: FleetAllocator;
  /** A temporary HOME, removed after the file. */
  dir: string;
  /** The environment that points the CLI at the fleet as the global admin. */
  env: Record<string, string>;
}

/**
 * Starts the fleet before the file's tests and stops it after; `use` receives it once started
 * (the test file keeps its parts in variables of its own).
 */
export function useCliFleet(
  size: number,
  options: NonNullable<Parameters<typeof startFleet>[1]>,
  use: (fleet: CliFleet) => void,
): void {
  let fleet: CliFleet | undefined;
  beforeAll(async () => {
    const f = await startFleet(size, options);
    const dir = mkdtempSync(join(tmpdir(), `keelson-${options.namePrefix ?? "cli"}-`));
    fleet = {
      f,
      pool: new FleetAllocator(f),
      dir,
      env: { KEELSON_URL: f.base, KEELSON_TOKEN: ADMIN_TOKEN, KEELSON_CONFIG: join(dir, "config.yaml"), HOME: dir },
    };
    use(fleet);
  }, 60_000);
  afterAll(async () => {
    await fleet?.f.close();
    if (fleet) rmSync(fleet.dir, { recursive: true, force: true });
  });
}
