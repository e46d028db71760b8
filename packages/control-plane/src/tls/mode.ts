import { isLoopbackHost } from "@keelson/protocol";
import { SettingsError } from "@keelson/settings";

export type TlsMode = "auto" | "files" | "off";

/** The settings that decide KEELSON_TLS (a slice of ServerSettings, so tests can name just these). */
export interface TlsModeInput {
  tls?: TlsMode | undefined;
  tlsCertFile?: string | undefined;
  tlsKeyFile?: string | undefined;
  tlsChainFile?: string | undefined;
  insecureHttp: boolean;
  /** The listen address's host. */
  host: string;
}

/**
 * KEELSON_TLS once the defaults are applied, or a SettingsError (exit 78) naming what to set.
 * Default: `files` when a certificate is configured, `off` on a loopback listener (`npm start`
 * stays plain HTTP on 127.0.0.1), `auto` otherwise. Plain HTTP on a listener other hosts can
 * reach would carry join tokens, credentials and kubeconfigs in clear text: it needs
 * KEELSON_INSECURE_HTTP=true as well (a TLS-terminating proxy in front, say).
 */
export function decideTlsMode(input: TlsModeInput): TlsMode {
  const filesConfigured = Boolean(input.tlsCertFile || input.tlsKeyFile);
  const loopback = isLoopbackHost(input.host);
  const mode = input.tls ?? (filesConfigured ? "files" : loopback ? "off" : "auto");
  if (mode === "files" && !(input.tlsCertFile && input.tlsKeyFile)) {
    throw new SettingsError(
      "KEELSON_TLS=files needs KEELSON_TLS_CERT_FILE and KEELSON_TLS_KEY_FILE (set both, or KEELSON_TLS=auto for a certificate Keelson makes itself)",
    );
  }
  if (mode !== "files" && (filesConfigured || input.tlsChainFile)) {
    throw new SettingsError(
      `KEELSON_TLS_CERT_FILE, KEELSON_TLS_KEY_FILE and KEELSON_TLS_CHAIN_FILE belong to KEELSON_TLS=files, not ${mode}`,
    );
  }
  if (mode === "off" && !loopback && !input.insecureHttp) {
    throw new SettingsError(
      `KEELSON_TLS=off on ${input.host}, which is not a loopback address, would send join tokens and credentials in clear text: ` +
        "set KEELSON_TLS=auto (or files with KEELSON_TLS_CERT_FILE and KEELSON_TLS_KEY_FILE), " +
        "or KEELSON_INSECURE_HTTP=true if a TLS-terminating proxy is in front",
    );
  }
  return mode;
}

/** The warning logged at every start that runs plain HTTP on a non-loopback listener. */
export function insecureHttpWarning(input: TlsModeInput & { tlsMode: TlsMode }): string | undefined {
  if (input.tlsMode !== "off" || isLoopbackHost(input.host)) return undefined;
  return `plain HTTP on ${input.host} (KEELSON_INSECURE_HTTP=true): join tokens, host credentials and kubeconfigs cross the network in clear text unless a TLS proxy is in front`;
}
