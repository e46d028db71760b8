#!/usr/bin/env bash
# Debian packages the tests use (real etcd, keepalived, containerd, runc and the CNI plugins for the phases,
# busybox-static for the tiny rootfs and OCI image the runtime checks run, iproute2 for network namespaces,
# openssl to cross-check certificates, shellcheck for the agent install script, PostgreSQL for the store's second dialect, chromium for the console's browser test).
# Installed only when missing; needs root, as on CI.
set -euo pipefail
need=()
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || need+=(etcd-client)
PATH="$PATH:/usr/sbin:/sbin" command -v keepalived >/dev/null 2>&1 || need+=(keepalived)
command -v containerd >/dev/null 2>&1 || need+=(containerd)
command -v runc >/dev/null 2>&1 || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
[ -x /bin/busybox ] || need+=(busybox-static)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
# systemd-analyze verify checks the units Keelson installs (keelson-server.service); nothing runs systemd.
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
# A real PostgreSQL server for the store tests on that dialect (test/support/postgres.ts).
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need+=(postgresql)
# shellcheck checks the agent install script and command (packages/control-plane/test/install-script.test.ts).
command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
# Headless Chromium for the web console's browser test (test/e2e/console.test.ts, driven by playwright-core).
[ -x /usr/bin/chromium ] || need+=(chromium)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "missing system packages: ${need[*]} (run as root or install them)" >&2
  exit 1
fi
echo "installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
