#!/usr/bin/env bash
# Installs what `npm start` and `npm test` need on a fresh machine: pnpm (pinned in
# package.json; corepack's signature check fails here, so npm installs it) and the workspace's
# packages. Cheap when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

want=$(node -p 'require("./package.json").packageManager.split("@")[1]')
if ! command -v pnpm >/dev/null 2>&1 || [ "$(pnpm --version 2>/dev/null)" != "$want" ]; then
  echo "installing pnpm $want" >&2
  npm install -g "pnpm@$want" >/dev/null 2>&1 || npm install -g "pnpm@$want"
fi

stamp=node_modules/.keelson-install-stamp
sum=$(cat pnpm-lock.yaml package.json packages/*/package.json | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$sum" ]; then
  pnpm install --frozen-lockfile >&2
  echo "$sum" > "$stamp"
fi

# The web console (packages/console) the control plane serves at /ui: built here so `npm start`
# and a fresh clone serve it with no extra command; rebuilt when its sources or the lockfile change.
console_stamp=packages/console/dist/.keelson-build-stamp
console_sum=$( (cat pnpm-lock.yaml; find packages/console -path '*/node_modules' -prune -o -path '*/dist' -prune -o -type f -print | LC_ALL=C sort | xargs cat) | sha256sum | cut -d' ' -f1)
if [ ! -f "$console_stamp" ] || [ "$(cat "$console_stamp")" != "$console_sum" ]; then
  pnpm --filter @keelson/console build >&2
  echo "$console_sum" > "$console_stamp"
fi
