#!/usr/bin/env bash
# ci/gpu-verify.sh - the verify window's run on the GPU machine (not CI): builds ember, runs
# test_cuda_verify, ember-bench --verify on generated qwen3-8b / qwen3-0.6b q4_k_m, then
# test_cuda_e2e and test_cuda_kernels. Logs under $OUT (summary.log, build, verify, bench, e2e,
# kernels). jansson's Debian packages are taken from ./deb when the image lacks the headers
# (apt-get download libjansson-dev libjansson4). VT: test_cuda_verify's limit; E2E=0 skips e2e.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ember-verify-out}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.log
source ci/gpu-lib.sh
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
gpu_jansson_setup "$PWD/deb"
log "$GPU_JANSSON_MSG"
log "host: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
run "$OUT/build.log" 200 configure cmake -S . -B build-cuda -DEMBER_CUDA=ON -DABGATE=OFF -DCMAKE_BUILD_TYPE=Release || { tail -40 "$OUT/build.log"; exit 1; }
run "$OUT/build.log" 300 build cmake --build build-cuda -j16 --target ember ember-bench test_cuda_verify test_cuda_e2e test_cuda_kernels ||
	{ grep -E "error" "$OUT/build.log" | head; tail -30 "$OUT/build.log"; exit 1; }
B=build-cuda/bin
($B/ember gen --shape qwen3-8b --quant q4_k_m --seed 1 -o /tmp/8b.gguf && $B/ember gen --shape qwen3-0.6b --quant q4_k_m --seed 1 -o /tmp/06b.gguf) >"$OUT/gen.log" 2>&1 &
GP=$!
run "$OUT/verify.log" "${VT:-150}" test_cuda_verify $B/test_cuda_verify
grep -E "DIFFERS|FAIL|capture|FATAL" "$OUT/verify.log" | head -40
echo "bit-identical windows: $(grep -c bit-identical "$OUT/verify.log")"
wait $GP
run "$OUT/bench.log" 150 "bench 8b n=16" $B/ember-bench --model /tmp/8b.gguf --decode 128,4k --gen 64 --reps 9 --verify 16
run "$OUT/bench.log" 60 "bench 8b n=8" $B/ember-bench --model /tmp/8b.gguf --decode 128 --gen 64 --reps 9 --verify 8
run "$OUT/bench.log" 60 "bench 0.6b n=16" $B/ember-bench --model /tmp/06b.gguf --decode 128,4k --gen 64 --reps 9 --verify 16
grep -E "^decode|^verify" "$OUT/bench.log"
[ "${E2E:-1}" = 1 ] && run "$OUT/e2e.log" 150 test_cuda_e2e $B/test_cuda_e2e
run "$OUT/kernels.log" 100 test_cuda_kernels $B/test_cuda_kernels
cat "$SUMMARY"
