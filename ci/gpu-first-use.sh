#!/usr/bin/env bash
# ci/gpu-first-use.sh - on the GPU machine: builds ember, generates qwen3-0.6b q8_0 and runs
# tools/first_use_probe.py in the variants that located ember's first-use cost on a new prompt
# length (kernels/NOTES.md, 2026-12-01): default, CUDA_MODULE_LOADING=EAGER, the cuBLASLt
# heuristics cache off, 256-token prefill chunks, CUDA graphs off. Needs jansson's .deb files in
# deb/ (ci/gpu-pack.sh fetches them). Output under $OUT (default /tmp/ember-gpu-out).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ember-gpu-out}
mkdir -p "$OUT"
source ci/gpu-lib.sh
SUMMARY=$OUT/summary.log
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
gpu_jansson_setup "$PWD/deb"
run "$OUT/build.log" 150 configure cmake -S . -B build-cuda -DEMBER_CUDA=ON -DABGATE=OFF -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 || exit 1
run "$OUT/build.log" 200 build cmake --build build-cuda -j"$(nproc)" --target ember || exit 1
B=build-cuda/bin; M=/tmp/m; mkdir -p $M
$B/ember gen --shape qwen3-0.6b --quant q8_0 --seed 1 -o $M/06b.gguf >"$OUT/gen.log" 2>&1
P="python3 tools/first_use_probe.py $B/ember $M/06b.gguf"
{
	$P default
	$P eager CUDA_MODULE_LOADING=EAGER
	$P nocache CUBLASLT_HEURISTICS_CACHE_CAPACITY=0
	$P chunk256 EMBER_PREFILL_CHUNK=256 PROBE_LENGTHS=512,512,768,768,1024,1000,1000,1536,1300
	$P graphs0 EMBER_GRAPHS=0
} 2>&1 | tee "$OUT/probe.log"
