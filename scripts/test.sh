#!/usr/bin/env bash
# `npm test`: install what is missing, then lint, typecheck and every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh
bash scripts/ensure-system-deps.sh
pnpm lint
pnpm typecheck
pnpm vitest run "$@"
