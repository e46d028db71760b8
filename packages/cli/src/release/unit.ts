import { join } from "node:path";
import type { Layout } from "./layout.ts";
import { SERVICE_USER } from "./service-user.ts";

/**
 * keelson-server.service for a layout (layout.ts): on a real host (root `/`) the paths are
 * /opt/keelson/current, /etc/keelson/server.env and /var/lib/keelson. ExecStart goes through
 * `current`, so switching a release is a symlink swap and a restart. Checked with
 * `systemd-analyze verify` (test/e2e/release-install.test.ts).
 */
export function serverUnit(layout: Layout, serverEntry: string): string {
  const onHost = layout.root === "/";
  return `# keelson-server: the Keelson control plane, installed by \`keelson install control-plane\`.
# The release that runs is ${layout.current} (a symlink switched by \`keelson install <version>\`
# and \`keelson upgrade\`); its settings are ${layout.serverEnv}; its data dir ${layout.dataDir}.
[Unit]
Description=Keelson control plane (keelson-server)
Documentation=file://${join(layout.current, "README.md")}
Wants=network-online.target
After=network-online.target

[Service]
Type=exec
# The system user \`keelson install control-plane\` creates (no login shell); not root.
User=${SERVICE_USER}
Group=${SERVICE_USER}
Environment=NODE_ENV=production
EnvironmentFile=${layout.serverEnv}
ExecStart=/usr/bin/env node ${join(layout.current, serverEntry)}
WorkingDirectory=${layout.dataDir}
${
  onHost
    ? `# /var/lib/keelson, 0700, the service user's, passed as $STATE_DIRECTORY: database, secrets, admin-token, backups.
StateDirectory=keelson
StateDirectoryMode=0700`
    : `# Installed under ${layout.root}: the data dir is not systemd's StateDirectory there.
ReadWritePaths=${layout.dataDir}`
}
Restart=on-failure
RestartSec=5s
# 78: a bad setting; retrying cannot fix it and the journal says which.
RestartPreventExitStatus=78
# SIGTERM to keelson-server: it closes the agent links with going-away and finishes requests.
KillMode=mixed
TimeoutStopSec=45s
LimitNOFILE=65536

# Hardening: the server needs its data dir, its port and outgoing connections (PostgreSQL), nothing else.
UMask=0077
NoNewPrivileges=yes
CapabilityBoundingSet=CAP_NET_BIND_SERVICE
# A port below 1024 (443) without root.
AmbientCapabilities=CAP_NET_BIND_SERVICE
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
RestrictNamespaces=yes
RestrictSUIDSGID=yes
RestrictRealtime=yes
LockPersonality=yes
SystemCallArchitectures=native

[Install]
WantedBy=multi-user.target
`;
}
