#!/usr/bin/env bash
# `pnpm bench`: every benchmark under test/bench, or the ones named (`pnpm bench api`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh
names=("$@")
[ ${#names[@]} -eq 0 ] && names=($(ls test/bench))
for name in "${names[@]}"; do
  echo "== bench: $name"
  node --import tsx "test/bench/$name/run.ts"
done
