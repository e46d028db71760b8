#!/bin/sh
# Installs the Keelson host agent on this host (README, "Adding a host"). Served by the control
# plane at GET /v1/install/agent.sh, which fills in the three values below; paste the join
# token's `installCommand` rather than running this by hand: that command checks the control
# plane's CA against the pinned hash before it fetches this script.
#
#   KEELSON_JOIN_TOKEN=... sh agent.sh --ca-hash sha256:... [--ca-file FILE] [--control-plane URL]
#                                      [--root DIR] [--no-systemd]
#
# Every download goes over TLS verified against the CA whose SubjectPublicKeyInfo has the given
# sha256 (fetched from /v1/ca unverified, then used as the only trust); plain HTTP only to a
# control plane on loopback. Safe to run again: what is in place already is left alone, and the
# agent is restarted only when its package or settings changed.
set -eu

CONTROL_PLANE=@@CONTROL_PLANE@@
AGENT_VERSION=@@AGENT_VERSION@@
AGENT_SHA256=@@AGENT_SHA256@@

ROOT=${KEELSON_INSTALL_ROOT:-}
CA_HASH=${KEELSON_CA_HASH:-}
CA_FILE=
SYSTEMD=auto

say() { printf 'keelson-agent install: %s\n' "$*"; }
die() {
  printf 'keelson-agent install: %s\n' "$*" >&2
  exit 1
}
usage() {
  sed -n '7,8p' "$0" >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case $1 in
    --control-plane) [ $# -ge 2 ] || usage; CONTROL_PLANE=$2; shift 2 ;;
    --ca-hash) [ $# -ge 2 ] || usage; CA_HASH=$2; shift 2 ;;
    --ca-file) [ $# -ge 2 ] || usage; CA_FILE=$2; shift 2 ;;
    --root) [ $# -ge 2 ] || usage; ROOT=$2; shift 2 ;;
    --no-systemd) SYSTEMD=no; shift ;;
    -h | --help) usage ;;
    *) printf 'keelson-agent install: unknown argument %s\n' "$1" >&2; usage ;;
  esac
done
ROOT=${ROOT%/}
CONTROL_PLANE=${CONTROL_PLANE%/}

# --- The host -----------------------------------------------------------------------------
arch=$(uname -m)
case $arch in
  x86_64 | amd64 | aarch64 | arm64) ;;
  *) die "architecture $arch is not supported (x86_64 or aarch64)" ;;
esac
[ "$(uname -s)" = Linux ] || die "Keelson hosts run Linux, this is $(uname -s)"
command -v node >/dev/null 2>&1 || die "Node.js 20 or newer is needed and 'node' is not on PATH (install the distribution's nodejs package)"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 20 ] || die "Node.js 20 or newer is needed, found $(node --version)"
for tool in curl tar sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is needed and not installed"
done
if [ "$SYSTEMD" = auto ]; then
  if [ -z "$ROOT" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    SYSTEMD=yes
  else
    SYSTEMD=no
  fi
fi
say "host: Linux $arch, Node.js $(node --version), systemd: $SYSTEMD"

# --- Trust: the pinned CA, or plain HTTP on loopback only ------------------------------------
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

case $CONTROL_PLANE in
  https://*) scheme=https ;;
  http://*) scheme=http ;;
  *) die "--control-plane must be an http:// or https:// URL (got '$CONTROL_PLANE')" ;;
esac
authority=${CONTROL_PLANE#*://}
authority=${authority%%/*}
case $authority in
  \[*) host=${authority%%]*}; host=${host#\[} ;;
  *) host=${authority%:*} ;;
esac

spki_hash() {
  openssl x509 -in "$1" -noout -pubkey | openssl pkey -pubin -outform DER | openssl dgst -sha256 -r | cut -d' ' -f1
}

if [ "$scheme" = https ]; then
  case $CA_HASH in
    sha256:*) ;;
    *) die "--ca-hash sha256:<hex> is required for an https:// control plane (the join token's caCertHash)" ;;
  esac
  command -v openssl >/dev/null 2>&1 || die "'openssl' is needed to check the control plane's CA"
  if [ -n "$CA_FILE" ]; then
    cp "$CA_FILE" "$work/bundle.pem" || die "cannot read --ca-file $CA_FILE"
  else
    # Unverified on purpose: the bundle is trusted only if one of its certificates has the
    # pinned hash, and only that certificate is trusted afterwards (kubeadm's discovery).
    curl -fsS --proto '=https' --insecure "$CONTROL_PLANE/v1/ca" -o "$work/bundle.pem" ||
      die "cannot fetch the CA bundle from $CONTROL_PLANE/v1/ca"
  fi
  awk -v dir="$work" '/-----BEGIN CERTIFICATE-----/ { n++ } n { print > (dir "/cert" n ".pem") }' "$work/bundle.pem"
  for cert in "$work"/cert*.pem; do
    [ -f "$cert" ] || continue
    if [ "sha256:$(spki_hash "$cert" 2>/dev/null || true)" = "$CA_HASH" ]; then
      cp "$cert" "$work/ca.pem"
      break
    fi
  done
  [ -f "$work/ca.pem" ] ||
    die "no CA certificate of $CONTROL_PLANE has the pinned hash $CA_HASH: refusing to go on (the join token was not sent)"
  say "the control plane's CA matches $CA_HASH"
  fetch() { curl -fsS --proto '=https' --cacert "$work/ca.pem" "$@"; }
else
  case $host in
    127.* | localhost | ::1) ;;
    *) die "refusing plain HTTP to $host: only a control plane on loopback may be reached without TLS" ;;
  esac
  fetch() { curl -fsS --proto '=http' "$@"; }
fi

# --- The join token --------------------------------------------------------------------------
ENV_FILE=$ROOT/etc/keelson/agent.env
STATE_DIR=${KEELSON_STATE_DIR:-$ROOT/var/lib/keelson-agent}
JOIN_TOKEN=${KEELSON_JOIN_TOKEN:-}
if [ -z "$JOIN_TOKEN" ] && [ -f "$ENV_FILE" ]; then
  JOIN_TOKEN=$(sed -n 's/^KEELSON_JOIN_TOKEN=//p' "$ENV_FILE")
fi
if [ -z "$JOIN_TOKEN" ] && [ ! -f "$STATE_DIR/identity.json" ]; then
  die "KEELSON_JOIN_TOKEN is required on a host that has not registered yet (POST /v1/projects/{project}/joinTokens)"
fi

# --- The agent package -------------------------------------------------------------------------
AGENT_DIR=$ROOT/opt/keelson/agent
target=$AGENT_DIR/$AGENT_VERSION
changed=no
umask 022
mkdir -p "$AGENT_DIR"
if [ -f "$target/.package-sha256" ] && [ "$(cat "$target/.package-sha256")" = "$AGENT_SHA256" ]; then
  say "agent $AGENT_VERSION is installed already in $target"
else
  fetch "$CONTROL_PLANE/v1/agentPackages/$AGENT_VERSION/package.tar.gz" -o "$work/package.tar.gz" ||
    die "cannot download agent package $AGENT_VERSION from $CONTROL_PLANE"
  got=$(sha256sum "$work/package.tar.gz" | cut -d' ' -f1)
  [ "$got" = "$AGENT_SHA256" ] || die "agent package $AGENT_VERSION has sha256 $got, expected $AGENT_SHA256: refusing it"
  staging=$AGENT_DIR/.staging-$AGENT_VERSION-$$
  rm -rf "$staging"
  mkdir -p "$staging"
  tar -xzf "$work/package.tar.gz" --no-same-owner -C "$staging"
  for file in manifest.json launcher.mjs keelson-agent.service; do
    [ -f "$staging/$file" ] || die "agent package $AGENT_VERSION has no $file (built by an older pnpm pack:agent?)"
  done
  printf '%s\n' "$AGENT_SHA256" >"$staging/.package-sha256"
  rm -rf "$target"
  mv "$staging" "$target"
  changed=yes
  say "installed agent $AGENT_VERSION in $target"
fi
if [ "$(readlink "$AGENT_DIR/current" 2>/dev/null || true)" != "$AGENT_VERSION" ]; then
  ln -sfn "$AGENT_VERSION" "$AGENT_DIR/.current-$$"
  mv -T "$AGENT_DIR/.current-$$" "$AGENT_DIR/current"
  changed=yes
fi

# --- Settings: /etc/keelson/agent.env, 0600 -----------------------------------------------------
# The outbound proxy this script runs with (an auto deploy's user data exports the cluster's
# httpProxy) is the agent's too: its connections and downloads go through it, as this script's
# curl did, except to the hosts NO_PROXY names. Written single-quoted, which systemd's
# EnvironmentFile= (src/basic/env-file.c: quotes removed, nothing inside escaped) and sh's `.`
# both read as the bare value; a value they could not both read so is refused.
PROXY_HTTPS=${HTTPS_PROXY:-${https_proxy:-}}
PROXY_HTTP=${HTTP_PROXY:-${http_proxy:-}}
PROXY_NONE=${NO_PROXY:-${no_proxy:-}}
for value in "$PROXY_HTTPS" "$PROXY_HTTP" "$PROXY_NONE"; do
  case $value in
    *\'* | *\\* | *[[:space:]]*) die "a proxy setting holds a quote, a backslash or a space ($value): not giving it to the agent" ;;
  esac
done
umask 077
mkdir -p "$ROOT/etc/keelson"
{
  printf 'KEELSON_CONTROL_PLANE=%s\n' "$CONTROL_PLANE"
  [ -z "$CA_HASH" ] || printf 'KEELSON_CA_HASH=%s\n' "$CA_HASH"
  [ -z "$JOIN_TOKEN" ] || printf 'KEELSON_JOIN_TOKEN=%s\n' "$JOIN_TOKEN"
  # An auto deploy's user data reads the instance's id from the instance metadata service.
  [ -z "${KEELSON_CLOUD_INSTANCE_ID:-}" ] || printf 'KEELSON_CLOUD_INSTANCE_ID=%s\n' "$KEELSON_CLOUD_INSTANCE_ID"
  [ -z "$PROXY_HTTPS" ] || printf "HTTPS_PROXY='%s'\n" "$PROXY_HTTPS"
  [ -z "$PROXY_HTTP" ] || printf "HTTP_PROXY='%s'\n" "$PROXY_HTTP"
  [ -z "$PROXY_NONE" ] || printf "NO_PROXY='%s'\n" "$PROXY_NONE"
} >"$work/agent.env"
if [ -f "$ENV_FILE" ] && cmp -s "$work/agent.env" "$ENV_FILE"; then
  say "$ENV_FILE is up to date"
else
  cp "$work/agent.env" "$ENV_FILE.new"
  chmod 600 "$ENV_FILE.new"
  mv "$ENV_FILE.new" "$ENV_FILE"
  changed=yes
  say "wrote $ENV_FILE (mode 0600)"
fi

# --- The service -------------------------------------------------------------------------------
UNIT=$ROOT/etc/systemd/system/keelson-agent.service
umask 022
mkdir -p "$ROOT/etc/systemd/system"
if ! cmp -s "$AGENT_DIR/current/keelson-agent.service" "$UNIT"; then
  cp "$AGENT_DIR/current/keelson-agent.service" "$UNIT"
  changed=yes
  say "installed $UNIT"
fi

wait_registered() {
  i=0
  while [ ! -f "$1/identity.json" ]; do
    i=$((i + 1))
    [ "$i" -le 60 ] || die "the agent has not registered after 60 s; see $2"
    sleep 1
  done
  say "registered: $(cat "$1/identity.json")"
}

if [ "$SYSTEMD" = yes ]; then
  systemctl daemon-reload
  systemctl enable keelson-agent.service >/dev/null
  if [ "$changed" = yes ]; then
    systemctl restart keelson-agent.service
    say "started keelson-agent.service"
  else
    systemctl start keelson-agent.service
    say "keelson-agent.service is running; nothing changed"
  fi
  wait_registered /var/lib/keelson-agent "journalctl -u keelson-agent"
  exit 0
fi

# No systemd: the launcher is the supervisor (restart onto new versions, rollback), started in
# its own session, its pid and log under the root.
say "systemd is not running here (or --root/--no-systemd was given): starting the launcher without it"
PID_FILE=$ROOT/run/keelson-agent.pid
LOG_FILE=$ROOT/var/log/keelson-agent.log
mkdir -p "$ROOT/run" "$ROOT/var/log"
running=
if [ -f "$PID_FILE" ]; then
  pid=$(cat "$PID_FILE")
  if kill -0 "$pid" 2>/dev/null && grep -q launcher.mjs "/proc/$pid/cmdline" 2>/dev/null; then
    running=$pid
  fi
fi
if [ -n "$running" ] && [ "$changed" = no ]; then
  say "the agent is running (pid $running); nothing changed"
  exit 0
fi
if [ -n "$running" ]; then
  say "stopping the agent (pid $running) to start what changed"
  kill -TERM "$running"
  i=0
  while kill -0 "$running" 2>/dev/null; do
    i=$((i + 1))
    [ "$i" -le 450 ] || die "the agent (pid $running) did not stop within 45 s"
    sleep 0.1
  done
fi
umask 077
mkdir -p "$STATE_DIR"
(
  set -a
  # shellcheck source=/dev/null
  . "$ENV_FILE"
  set +a
  KEELSON_STATE_DIR=$STATE_DIR
  export KEELSON_STATE_DIR
  exec setsid node "$AGENT_DIR/current/launcher.mjs" </dev/null >>"$LOG_FILE" 2>&1
) &
echo $! >"$PID_FILE"
say "started the agent launcher (pid $(cat "$PID_FILE"), log $LOG_FILE, state $STATE_DIR)"
wait_registered "$STATE_DIR" "$LOG_FILE"
