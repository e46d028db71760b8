import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { type Browser, chromium } from "playwright-core";
import { api, REPO_ROOT } from "./processes.ts";

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

/** A console user (project admin) in the server's default project; resolves with the project's id. */
export async function consoleUser(serverUrl: string, adminToken: string, user: { name: string; password: string }) {
  const projects = await api<{ projects: { id: string; name: string }[] }>(`${serverUrl}/v1/projects`, adminToken);
  const projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
  const made = await api(`${serverUrl}/v1/projects/${projectId}/users`, adminToken, {
    method: "POST",
    body: { ...user, role: "admin" },
  });
  if (made.status >= 300) throw new Error(`creating the console user: ${made.status} ${JSON.stringify(made.body)}`);
  return projectId;
}
