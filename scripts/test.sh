#!/usr/bin/env bash
# `npm test`: install what is missing, then lint, typecheck and every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh
bash scripts/ensure-system-deps.sh
pnpm lint
pnpm typecheck
if [ $# -gt 0 ]; then exec pnpm vitest run "$@"; fi
# The control plane's tests run once per store: SQLite, then PostgreSQL (vitest.config.ts).
pnpm vitest run --project unit --project unit-postgres
# End-to-end files start real processes and ports: one file at a time on this two-core machine.
pnpm vitest run --project e2e --project e2e-postgres --no-file-parallelism --passWithNoTests
