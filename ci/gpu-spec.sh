#!/usr/bin/env bash
# ci/gpu-spec.sh - speculative decoding's run on the GPU machine (not CI): builds ember, generates
# qwen3-8b / qwen3-0.6b q4_k_m targets and untrained 5-layer block-16 DFlash drafts, runs
# test_cuda_spec (generated models, then the 8B pair with the q8 and the f16 draft), ember-bench --spec (plain vs spec tok/s, tau, draft / verify /
# other per step, verify window vs decode step; 8B also with EMBER_DRAFT_WEIGHTS=f16), `ember serve --backend cuda --draft`, then
# test_cuda_verify when time is left. Logs under $OUT (summary.log, build, gen, spec, bench, serve,
# verify). jansson's Debian packages come from ./deb when the image lacks the headers.
# CTX: the bench contexts (default 128,4k); REPS (default 7); BUDGET: seconds after which the
# optional steps are skipped (default 420).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ember-spec-out}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.log
source ci/gpu-lib.sh
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
gpu_jansson_setup "$PWD/deb"
log "$GPU_JANSSON_MSG"
log "host: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
run "$OUT/build.log" 200 configure cmake -S . -B build-cuda -DEMBER_CUDA=ON -DABGATE=OFF -DCMAKE_BUILD_TYPE=Release || { tail -40 "$OUT/build.log"; exit 1; }
run "$OUT/build.log" 300 build cmake --build build-cuda -j16 --target ember ember-bench test_cuda_spec test_cuda_verify ||
	{ grep -E "error" "$OUT/build.log" | head; tail -30 "$OUT/build.log"; exit 1; }
B=build-cuda/bin
M=/tmp/spec-models
mkdir -p $M
(set -e
 $B/ember gen --shape qwen3-0.6b --quant q4_k_m --seed 1 -o $M/06b.gguf
 $B/ember gen --draft-for qwen3-0.6b --layers 5 --block 16 --seed 2 -o $M/06b-draft.gguf
 $B/ember gen --draft-for qwen3-8b --layers 5 --block 16 --seed 2 -o $M/8b-draft.gguf
 $B/ember gen --shape qwen3-8b --quant q4_k_m --seed 1 -o $M/8b.gguf) >"$OUT/gen.log" 2>&1 &
GP=$!
run "$OUT/spec.log" 200 test_cuda_spec $B/test_cuda_spec
wait $GP && log "models generated" || { log "FAIL gen"; tail -20 "$OUT/gen.log"; }
run "$OUT/spec.log" 150 "test_cuda_spec 8b" $B/test_cuda_spec $M/8b.gguf $M/8b-draft.gguf
run "$OUT/spec.log" 150 "test_cuda_spec 8b f16 draft" env EMBER_DRAFT_WEIGHTS=f16 $B/test_cuda_spec $M/8b.gguf $M/8b-draft.gguf
grep -E "FAIL|FATAL|rel L2|spec tokens|steps," "$OUT/spec.log" | head -40
CTX=${CTX:-128,4k}
REPS=${REPS:-7}
run "$OUT/bench.log" 150 "bench 8b spec" $B/ember-bench --model $M/8b.gguf --decode "$CTX" --gen 128 --reps "$REPS" --verify 16 --spec $M/8b-draft.gguf
run "$OUT/bench.log" 150 "bench 8b spec f16 draft" env EMBER_DRAFT_WEIGHTS=f16 $B/ember-bench --model $M/8b.gguf --decode "$CTX" --gen 128 --reps "$REPS" --verify 16 --spec $M/8b-draft.gguf
run "$OUT/bench.log" 90 "bench 0.6b spec" $B/ember-bench --model $M/06b.gguf --decode "$CTX" --gen 128 --reps "$REPS" --verify 16 --spec $M/06b-draft.gguf
grep -E "^model|^draft|^decode|^verify|^spec" "$OUT/bench.log"
P=$(seq -s, 1 24)
printf '%s\n' "{\"op\":\"generate\",\"id\":1,\"prompt\":[$P],\"max_tokens\":48,\"spec\":true}" \
	"{\"op\":\"generate\",\"id\":2,\"prompt\":[$P],\"max_tokens\":48,\"spec\":false}" '{"op":"quit"}' >/tmp/serve.in
run "$OUT/serve.log" 60 "serve cuda --draft" sh -c "$B/ember serve --stdio --backend cuda --model $M/06b.gguf --draft $M/06b-draft.gguf </tmp/serve.in"
cut -c1-400 "$OUT/serve.log" | tail -8
echo "serve: distinct token lists of the spec and plain requests: $(grep -oE '"tokens": *\[[^]]*\]' "$OUT/serve.log" | tr -d ' ' | sort -u | wc -l) (1 = equal)"
if [ $SECONDS -lt "${BUDGET:-420}" ]; then
	run "$OUT/verify.log" 150 test_cuda_verify $B/test_cuda_verify
	grep -E "DIFFERS|FAIL|FATAL" "$OUT/verify.log" | head -20
	echo "bit-identical windows: $(grep -c bit-identical "$OUT/verify.log")"
else
	log "SKIP test_cuda_verify (budget)"
fi
cat "$SUMMARY"
