#!/usr/bin/env bash
# ci/gpu-decode-sweep.sh - decode-speed sweep of the GEMV and attention switches on one binary, for
# kernels/NOTES.md (GPU machine only; CI has no GPU). Builds ember from this checkout, generates the
# models, runs the CUDA tests, then `ember-bench --decode` for each configuration in CONFIGS on each
# model in SWEEP_MODELS, and (PROFILE=1) ncu over one decode layer of the first model with the
# configuration in PROFILE_ENV. Every step has a time limit; logs go to $OUT, summary.log last.
#
#   ci/gpu-decode-sweep.sh
# Environment: OUT (default /tmp/ember-sweep-out), EMBER_MODELS_DIR, DEB_DIR (carried jansson
# packages, see ci/gpu-lib.sh), SWEEP_MODELS ("qwen3-8b:q4_k_m qwen3-0.6b:q8_0"), CONTEXTS
# (128,4096), GEN (64), REPS (3), CONFIGS (one env assignment list per line, "-" = defaults),
# TESTS (1), PROFILE (1), PROFILE_ENV, EMBER_BIN (use these binaries, no build), CUDA_DEFS (extra nvcc flags, e.g. -DGEMV_MIN_BLOCKS=5) with
# BUILD_TAG (its build directory's suffix).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/ember-sweep-out}
MODELS=${EMBER_MODELS_DIR:-/tmp/ember-models}
CUDA_DEFS=${CUDA_DEFS:-}
BUILD=/tmp/ember-sweep-build${BUILD_TAG:+-$BUILD_TAG}
SWEEP_MODELS=${SWEEP_MODELS:-"qwen3-8b:q4_k_m qwen3-0.6b:q8_0"}
CONTEXTS=${CONTEXTS:-128,4096}
GEN=${GEN:-64}
REPS=${REPS:-3}
CONFIGS=${CONFIGS:-"-
EMBER_GEMV_STREAM=1
EMBER_GEMV_STREAM=1 EMBER_GEMV_WARPS=4"}
PROFILE_ENV=${PROFILE_ENV:-EMBER_GEMV_STREAM=1}
mkdir -p "$OUT" "$MODELS"
SUMMARY=$OUT/summary.log
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}

source "$ROOT/ci/gpu-lib.sh" # log, run, gen, gpu_jansson_setup

log "build ${BUILD_TAG:-default} ($CUDA_DEFS); host: $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null | head -1)"
gpu_jansson_setup "${DEB_DIR:-$ROOT/.gpu/deb}"
log "$GPU_JANSSON_MSG"
if [ -n "${EMBER_BIN:-}" ]; then
	BIN=$EMBER_BIN
	log "using the binaries in $BIN"
else
	run "$OUT/build.log" 300 "configure" cmake -S "$ROOT" -B "$BUILD" -DABGATE=OFF -DEMBER_CUDA=ON -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_FLAGS=$CUDA_DEFS" || exit 1
	run "$OUT/build.log" 400 "build" cmake --build "$BUILD" -j "$(nproc)" --target ember ember-bench test_cuda_kernels test_cuda_e2e || exit 1
	BIN=$BUILD/bin
fi

EMBER=$BIN/ember
(for m in $SWEEP_MODELS; do gen "${m%%:*}" "${m##*:}"; done) >"$OUT/gen.log" 2>&1 &
GEN_PID=$!

if [ "${TESTS:-1}" = 1 ]; then
	T=$OUT/tests.log
	run "$T" 240 "test_cuda_kernels" "$BIN/test_cuda_kernels"
	run "$T" 300 "test_cuda_e2e" "$BIN/test_cuda_e2e"
	grep -hE "FAIL|not |DIFFER|diverge" "$T" | head -n 20 | sed 's/^/    /' >>"$SUMMARY"
fi
wait "$GEN_PID"

B=$OUT/bench.log
while IFS= read -r cfg; do
	[ -z "$cfg" ] && continue
	envset=${cfg/#-/}
	for m in $SWEEP_MODELS; do
		f=$MODELS/${m%%:*}-${m##*:}.gguf
		run "$B" 150 "bench [$cfg] $m" env $envset "$BIN/ember-bench" --model "$f" --backend cuda \
			--decode "$CONTEXTS" --gen "$GEN" --reps "$REPS"
		grep -E "^decode" "$B" | tail -n "$(echo "$CONTEXTS" | tr ',' '\n' | wc -l)" | sed "s/^/    [$cfg] $m /" >>"$SUMMARY"
	done
done <<<"$CONFIGS"

if [ "${PROFILE:-1}" = 1 ] && command -v ncu >/dev/null; then
	m=${SWEEP_MODELS%% *}
	f=$MODELS/${m%%:*}-${m##*:}.gguf
	STALL_METRICS=$(for r in long_scoreboard short_scoreboard barrier wait math_pipe_throttle mio_throttle lg_throttle \
		not_selected selected dispatch_stall no_instruction membar sleeping drain tex_throttle branch_resolving; do
		printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' "$r"; done)
	STALL_METRICS=${STALL_METRICS%,}
	# One decode layer (5 kernels) well into the timed run; graphs off so ncu sees every launch.
	run "$OUT/ncu.log" 240 "ncu [$PROFILE_ENV] $m" env EMBER_GRAPHS=0 $PROFILE_ENV ncu --clock-control none \
		--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
		--section MemoryWorkloadAnalysis --section InstructionStats --section ComputeWorkloadAnalysis --metrics "$STALL_METRICS" --launch-skip 3000 --launch-count ${PROFILE_LAUNCHES:-10} \
		"$BIN/ember-bench" --model "$f" --backend cuda --decode 128 --gen 64 --reps 1
	grep -E "gemv|attn|Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Dynamic Shared|Grid Size|Block Size|Waves Per SM|Stall|Executed Ipc|Issue Slots|Issued Instructions|Warp Cycles Per Issued|Compute \(SM\)|issue_stalled" "$OUT/ncu.log" |
		head -n 200 >"$OUT/ncu-summary.log"
fi
log "done"
cat "$SUMMARY"
