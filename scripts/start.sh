#!/usr/bin/env bash
# `npm start`: install what is missing, then run the control plane on its embedded SQLite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh
export KEELSON_PRINT_SUMMARY=1
exec node packages/control-plane/bin/keelson-server.mjs "$@"
