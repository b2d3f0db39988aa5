#!/usr/bin/env bash
# ci/gpu-splitk-bench.sh BUILD_DIR - decode speed of the split-K GEMV against the unsplit one on one
# binary (EMBER_GEMV_SPLITK=0 vs auto), for kernels/NOTES.md: builds ember-bench in an already
# configured CUDA build dir (e.g. one abgate made), generates qwen3-8b q4_k_m and qwen3-0.6b q8_0
# if missing, and runs each model both ways. Output: OUT/splitk-bench.log.
set -uo pipefail
build=${1:?usage: $0 BUILD_DIR}
OUT=${OUT:-/tmp/abgate-out}
MODELS=${EMBER_MODELS_DIR:-/tmp/ember-models}
REPS=${REPS:-5}
mkdir -p "$OUT" "$MODELS"
log=$OUT/splitk-bench.log
cmake --build "$build" -j "$(nproc)" --target ember ember-bench >>"$log" 2>&1 || { echo "build failed" >>"$log"; exit 1; }
for m in qwen3-8b:q4_k_m qwen3-0.6b:q8_0; do
  f=$MODELS/${m%%:*}-${m##*:}.gguf
  [ -s "$f" ] || "$build/bin/ember" gen --shape "${m%%:*}" --quant "${m##*:}" --seed 1 -o "$f" >>"$log" 2>&1
  for v in 0 auto; do
    echo "== $m EMBER_GEMV_SPLITK=$v" >>"$log"
    EMBER_GEMV_SPLITK=$v timeout 120 "$build/bin/ember-bench" --model "$f" --backend cuda \
      --decode 128,4096,32768 --prefill 4096 --gen 128 --reps "$REPS" >>"$log" 2>&1
    echo "exit $?" >>"$log"
  done
done
grep -E "^==|decode|exit" "$log" | tail -40
