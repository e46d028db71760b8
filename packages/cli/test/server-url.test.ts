import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { layoutOf } from "../src/release/layout.ts";
import { serverApiUrl } from "../src/release/server.ts";

/** The URL the CLI reaches an installed server at follows the server's own TLS default. */
describe("serverApiUrl", () => {
  const root = mkdtempSync(join(tmpdir(), "keelson-cli-url-"));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const urlFor = (env: string) => {
    const layout = layoutOf(root);
    mkdirSync(dirname(layout.serverEnv), { recursive: true });
    writeFileSync(layout.serverEnv, env);
    return serverApiUrl(layout);
  };

  it("plain HTTP on every loopback address (the server's default there), HTTPS elsewhere or when set", () => {
    expect(urlFor("KEELSON_LISTEN=127.0.0.1:8080\n")).toBe("http://127.0.0.1:8080");
    // Found by the configure-localhost e2e: 127.0.0.2 is loopback too, and the server serves HTTP there.
    expect(urlFor("KEELSON_LISTEN=127.0.0.2:9443\n")).toBe("http://127.0.0.2:9443");
    expect(urlFor("KEELSON_LISTEN=[::1]:8080\n")).toBe("http://[::1]:8080");
    expect(urlFor("KEELSON_LISTEN=10.1.2.3:8443\n")).toBe("https://10.1.2.3:8443");
    expect(urlFor("KEELSON_LISTEN=127.0.0.2:9443\nKEELSON_TLS=auto\n")).toBe("https://127.0.0.2:9443");
  });
});
