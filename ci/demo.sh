#!/usr/bin/env bash
# ci/demo.sh - the README's main job: installs what is missing, builds abgate, and runs one A/B
# evaluation of this repository's engine (ember, CPU backend, `tiny` model) on embedded defaults:
# the SQLite store under .abgate/, the CPU suite guards/cpu.json, and GitHub output to files (no
# token needed). Prints the verdict table; writes .abgate/demo/{result.json,comment.md}.
#   usage: bash ci/demo.sh [BASE [HEAD]]      (default: HEAD against itself, an A/A run)
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/deps.sh
ab_deps_install

base=${1:-HEAD}
head=${2:-$base}
out=.abgate/demo
mkdir -p "$out"
echo "ci/demo: building abgate" >&2
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target abgate
echo "ci/demo: evaluating $head against $base with guards/cpu.json (the engine is built by abgate)" >&2
set +e
build/bin/abgate eval --repo . --base "$base" --head "$head" --suite guards/cpu.json \
  --state .abgate --json "$out/result.json" --markdown "$out/comment.md"
status=$?
set -e
echo "ci/demo: exit status $status; the comment abgate would post is in $out/comment.md" >&2
exit $status
