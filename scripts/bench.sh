#!/usr/bin/env bash
# `pnpm bench`: every benchmark under test/bench, or the ones named (`pnpm bench api`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for run in test/bench/*/run.ts; do names+=("$(basename "$(dirname "$run")")"); done
fi
for name in "${names[@]}"; do
  echo "== bench: $name"
  node --import tsx "test/bench/$name/run.ts"
done
