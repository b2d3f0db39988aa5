#!/usr/bin/env bash
# ci/gpu-kernels.sh - the CUDA backend's run on a GPU machine (the H200 box; not part of CI, which
# has no GPU): builds ember, generates the synthetic models, runs the CUDA tests, the accuracy
# comparisons (CUDA vs the CPU backend and vs HF transformers, graph vs plain greedy, batched vs
# token-by-token) and the benchmark table of kernels/NOTES.md. Every step has a time limit; all
# output goes to a handful of logs under $OUT (default /tmp/ember-gpu-out), summary.log last.
#
#   ci/gpu-kernels.sh [all|check|bench]       all = check + bench (default)
# Environment: QUICK=1 (fewer comparisons, no HF), OUT, EMBER_MODELS_DIR (default /tmp/ember-models), EMBER_BIN (a bin/ with ember,
# ember-bench and the test_cuda_* programs; default: build here into /tmp/ember-build),
# EMBER_PREBUILT (a carried build: bin/ and lib/; used when its binaries run here), JOBS.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/ember-gpu-out}
MODELS=${EMBER_MODELS_DIR:-/tmp/ember-models}
BUILD=/tmp/ember-build
JOBS=${JOBS:-$(nproc)}
WHAT=${1:-all}
PY=${PYTHON:-python3}
mkdir -p "$OUT" "$MODELS"
SUMMARY=$OUT/summary.log
export PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}

source "$ROOT/ci/gpu-lib.sh" # log, run, gen, gpu_jansson_setup

# ---- binaries: a carried build if it runs here, else build from source ----
log "host: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null | head -1); nvcc $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*'); cmake $(cmake --version | head -1 | awk '{print $3}')"
# The GPU image has no libjansson-dev: unpack the Debian packages carried next to the prebuilt binaries.
gpu_jansson_setup "${EMBER_PREBUILT:-/nonexistent}/deb"
log "$GPU_JANSSON_MSG"
BIN=${EMBER_BIN:-}
if [ -z "$BIN" ] && [ -n "${EMBER_PREBUILT:-}" ] && [ -x "$EMBER_PREBUILT/bin/ember" ]; then
	export LD_LIBRARY_PATH=$EMBER_PREBUILT/lib:$LD_LIBRARY_PATH
	if "$EMBER_PREBUILT/bin/ember" gen --shape tiny --quant q8_0 --seed 1 -o "$MODELS/probe.gguf" >/dev/null 2>&1; then
		BIN=$EMBER_PREBUILT/bin
		log "using the carried build in $BIN; building from source in the background to check the build"
		(cmake -S "$ROOT" -B "$BUILD" -DABGATE=OFF -DEMBER_CUDA=ON -DCMAKE_BUILD_TYPE=Release >"$OUT/build.log" 2>&1 &&
			nice -n 10 cmake --build "$BUILD" -j 4 --target ember ember-bench test_cuda_layout test_cuda_kernels test_cuda_e2e >>"$OUT/build.log" 2>&1 &&
			echo "BUILD OK" >>"$OUT/build.log" || echo "BUILD FAILED" >>"$OUT/build.log") &
		BUILD_PID=$!
	else
		log "the carried build does not run here: $("$EMBER_PREBUILT/bin/ember" --help 2>&1 | head -2 | tr '\n' ' ')"
	fi
fi
if [ -z "$BIN" ]; then
	run "$OUT/build.log" 400 "configure" cmake -S "$ROOT" -B "$BUILD" -DABGATE=OFF -DEMBER_CUDA=ON -DCMAKE_BUILD_TYPE=Release || exit 1
	run "$OUT/build.log" 400 "build" cmake --build "$BUILD" -j "$JOBS" --target ember ember-bench test_cuda_layout test_cuda_kernels test_cuda_e2e || exit 1
	BIN=$BUILD/bin
fi
EMBER=$BIN/ember

# ---- models (the 8B ones generate in the background while the checks run) ----
export MODELS EMBER
export -f gen
run "$OUT/gen.log" 120 "gen tiny + qwen3-0.6b" bash -c 'gen tiny q8_0 && gen tiny q4_k_m && gen qwen3-0.6b q8_0 && gen qwen3-0.6b q4_k_m'
if [ "$WHAT" != check ]; then
	(gen qwen3-8b q4_k_m; gen qwen3-8b q8_0) >>"$OUT/gen.log" 2>&1 &
	GEN_PID=$!
fi

# ---- checks ----
if [ "$WHAT" != bench ]; then
	T=$OUT/tests.log
	run "$T" 60 "test_cuda_layout" "$BIN/test_cuda_layout"
	if ! run "$T" 180 "test_cuda_kernels" "$BIN/test_cuda_kernels" && command -v compute-sanitizer >/dev/null; then
		run "$T" 240 "test_cuda_kernels under compute-sanitizer" compute-sanitizer --tool memcheck "$BIN/test_cuda_kernels"
	fi
	run "$T" 240 "test_cuda_e2e" "$BIN/test_cuda_e2e"
	grep -hE "^(gemv|attn|layout|rows|gemm|dequant|cuda|EMBER|greedy|device)" "$T" | sed 's/^/    /' >>"$SUMMARY"

	C=$OUT/compare.log
	compare() { # name ref-cmd cand-cmd [extra sut_compare args]
		local name=$1 ref=$2 cand=$3
		shift 3
		run "$C" 240 "$name" "$PY" "$ROOT/tools/sut_compare.py" --ref "$ref" --cand "$cand" --prompts 8 --prompt-len 64 \
			--min-top1 0.99 --max-kl 1e-3 "$@"
		tail -n 7 "$C" | sed "s/^/    [$name] /" >>"$SUMMARY"
	}
	SERVE="$EMBER serve --stdio --ctx 4096"
	CMP_MODELS="tiny-q8_0 tiny-q4_k_m qwen3-0.6b-q8_0 qwen3-0.6b-q4_k_m"
	STEP_MODELS="tiny-q8_0 qwen3-0.6b-q8_0 qwen3-0.6b-q4_k_m"
	if [ "${QUICK:-0}" = 1 ]; then
		CMP_MODELS="tiny-q4_k_m qwen3-0.6b-q4_k_m"
		STEP_MODELS="qwen3-0.6b-q8_0"
	fi
	for m in $CMP_MODELS; do
		compare "cuda vs cpu $m" "$SERVE --backend cpu --model $MODELS/$m.gguf" "$SERVE --backend cuda --model $MODELS/$m.gguf"
	done
	compare "graph vs plain greedy qwen3-0.6b-q8_0" "env EMBER_GRAPHS=0 $SERVE --backend cuda --model $MODELS/qwen3-0.6b-q8_0.gguf" \
		"$SERVE --backend cuda --model $MODELS/qwen3-0.6b-q8_0.gguf" --prompts 2 --greedy 256 --greedy-strict
	for m in $STEP_MODELS; do
		run "$C" 200 "batched vs token-by-token $m" "$BIN/ember-bench" --model "$MODELS/$m.gguf" --backend cuda --check-stepwise 512 --reps 1
		grep "stepwise" "$C" | tail -n 1 | sed "s/^/    [$m] /" >>"$SUMMARY"
	done
fi

# ---- benchmark table ----
if [ "$WHAT" != check ]; then
	[ -n "${GEN_PID:-}" ] && wait "$GEN_PID"
	B=$OUT/bench.log
	for m in qwen3-8b-q4_k_m qwen3-8b-q8_0 qwen3-0.6b-q8_0; do
		if [ -s "$MODELS/$m.gguf" ]; then
			run "$B" 240 "bench $m" "$BIN/ember-bench" --model "$MODELS/$m.gguf" --backend cuda \
				--decode 128,4096,32768 --prefill 512,4096,32768 --reps 5 --gen 128
			awk -v m="$m" '/^===== /{cur=$0} /^(model|prefill|decode)/{ if (index(cur, m)) print "    " $0 }' "$B" >>"$SUMMARY"
		else
			log "SKIP bench $m: model missing"
		fi
	done
	# before/after of the decode switches on one binary (kernels/README.md)
	variant() { # label env-assignment model bench-args...
		local label=$1 envset=$2 m=$3
		shift 3
		run "$B" 120 "variant $label $m" env $envset "$BIN/ember-bench" --model "$MODELS/$m.gguf" --backend cuda --reps 5 "$@"
		awk '/^===== /{n=0; delete l} /^(decode|prefill)/{l[n++]=$0} END{for (i = 0; i < n; i++) print l[i]}' "$B" |
			sed "s/^/    [$label $m] /" >>"$SUMMARY"
	}
	for m in qwen3-8b-q4_k_m qwen3-0.6b-q8_0; do
		variant "EMBER_GEMV_STREAM=0" EMBER_GEMV_STREAM=0 $m --decode 128,32768
		variant "EMBER_ATTN_LEAN=0" EMBER_ATTN_LEAN=0 $m --decode 128,32768
		variant "EMBER_PDL=0" EMBER_PDL=0 $m --decode 128,32768
		variant "EMBER_GRAPHS=0" EMBER_GRAPHS=0 $m --decode 128,32768
		variant "EMBER_ATTN_PDL=1" EMBER_ATTN_PDL=1 $m --decode 128,32768
	done
	if [ "${QUICK:-0}" != 1 ]; then
		variant "EMBER_GEMV=simple" EMBER_GEMV=simple qwen3-8b-q4_k_m --decode 128 --gen 32
		variant "EMBER_FA=simple" EMBER_FA=simple qwen3-0.6b-q8_0 --prefill 4096 --reps 3
	fi
fi
if [ -n "${BUILD_PID:-}" ]; then
	wait "$BUILD_PID"
	log "source build on this machine: $(tail -n 1 "$OUT/build.log")"
fi
if [ "$WHAT" != bench ] && [ "${QUICK:-0}" != 1 ]; then
	C=$OUT/compare.log
	if "$PY" -c "import torch, transformers" 2>/dev/null; then
		for m in tiny-q8_0 qwen3-0.6b-q8_0; do
			compare "cuda vs hf $m" "$PY $ROOT/tools/hf_sut.py serve --stdio --model $MODELS/$m.gguf --dtype float32 --device cuda" \
				"$SERVE --backend cuda --model $MODELS/$m.gguf"
		done
	else
		log "SKIP cuda vs hf: torch/transformers not importable"
	fi
fi
log "done"
cat "$SUMMARY"
