import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { type Browser, chromium } from "playwright-core";
import { REPO_ROOT } from "./processes.ts";

/** Debian's chromium (scripts/ensure-system-deps.sh); playwright-core never downloads a browser. */
export const CHROMIUM = "/usr/bin/chromium";

/** Screenshots the browser tests keep (gitignored). */
export const ARTIFACTS = join(REPO_ROOT, "test", "artifacts");

export interface HeadlessBrowser {
  browser: Browser;
  /** Closes the browser (Playwright removes the profile it made); safe to call twice. */
  close(): Promise<void>;
}

/**
 * Headless Chromium on a fresh profile. Without the background-networking flags Chromium keeps
 * dialling out (updates, sync, field trials, QUIC), which this closed network answers with nothing.
 * The profile is fresh: Playwright gives every launch a temporary --user-data-dir of its own (and
 * refuses one in `args`).
 */
export async function launchChromium(): Promise<HeadlessBrowser> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  let closed = false;
  return {
    browser,
    async close() {
      if (closed) return;
      closed = true;
      await browser.close().catch(() => {});
    },
  };
}
