#!/usr/bin/env bash
# ci/gpu-figures.sh STEP... - the GPU box's evaluation figures (time to verdict, calibration,
# injected slowdowns, stdio vs HTTP, the sandbox's cost) as one list of steps run in order within
# one time budget: a step starts only while its minimum time is left and is cut at the deadline,
# so one device call returns whatever it finished. Every step shares STATE (builds, models, the
# store with its calibrations) and WORK; OUT gets summary.log and results.tgz after each step.
#
#   full:NAME=BASE..HEAD     ci/gpu-eval.sh with the base's guards/default.json      (min 300 s)
#   quick:NAME=BASE..HEAD    guards/gpu-quick.json                                   (min 90 s)
#   speed:NAME=BASE..HEAD    gpu-quick with accuracy off (ci/gpu-suite.py speed)      (min 60 s)
#   http:NAME=BASE..HEAD     gpu-quick, SUT over `ember serve --http` (gpu-suite.py http) (min 90 s)
#   calibrate:REF:RUNS       ci/gpu-calibrate.sh, speed-only gpu-quick               (min 40 s a run)
#   overhead:ROUNDS          ci/sandbox-overhead.sh on the mock fixture (jq from .gpu/eval/bin) (min 60 s)
#
# Environment: DEADLINE_S (default 560: a 600 s device call less the archive), STATE, WORK, OUT,
# SEED_BASE and NO_SANDBOX as in ci/gpu-eval.sh.
# Longer than one device call: start it detached with OUT, STATE and WORK under the repository's
# git-ignored .abgate/ (kept on the box between calls while it stays warm), e.g.
#   DEADLINE_S=900 OUT=$PWD/.abgate/bg ... setsid nohup bash ci/gpu-figures.sh STEP... &
# and let the next calls wait on it and copy .abgate/bg into $OUT (how the 2026-12-04 figures in
# ci/h200-evaluations.md were taken: ten calibration runs and two evaluations over three calls).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export OUT=${OUT:-/tmp/abgate-out} STATE=${STATE:-/tmp/abgate-state} WORK=${WORK:-/tmp/abgate-work}
DEADLINE_S=${DEADLINE_S:-560}
mkdir -p "$OUT" "$STATE" "$WORK"
SUMMARY=$OUT/summary.log
source "$ROOT/ci/gpu-lib.sh" # log, gpu_archive
export PATH=$ROOT/.gpu/eval/bin:$PATH
[ $# -ge 1 ] || { sed -n '2,21p' "$0" >&2; exit 2; }

left() { echo $((DEADLINE_S - SECONDS)); }
for step in "$@"; do # every step is known before the first one runs
	case ${step%%:*} in full | quick | speed | http | calibrate | overhead) ;; *) log "unknown step '$step'"; exit 2 ;; esac
done
for step in "$@"; do
	kind=${step%%:*} arg=${step#*:}
	case $kind in
	full) need=300 ;; quick | http) need=90 ;; speed) need=60 ;; overhead) need=60 ;;
	calibrate) need=$((40 * ${arg##*:})) ;;
	esac
	if [ "$(left)" -lt "$need" ]; then
		log "step $step: skipped, $(left) s left, needs $need"
		continue
	fi
	log "step $step ($(left) s left)"
	case $kind in
	full) DEADLINE_S=$(left) SUITE= bash "$ROOT/ci/gpu-eval.sh" "$arg" ;;
	quick) DEADLINE_S=$(left) SUITE=$ROOT/guards/gpu-quick.json bash "$ROOT/ci/gpu-eval.sh" "$arg" ;;
	speed | http)
		suite=$WORK/gpu-quick-$kind.json
		python3 "$ROOT/ci/gpu-suite.py" "$kind" "$ROOT/guards/gpu-quick.json" "$suite" &&
			DEADLINE_S=$(left) SUITE=$suite bash "$ROOT/ci/gpu-eval.sh" "$arg" ;;
	calibrate) CAL_TIMEOUT_S=$(left) RUNS=${arg##*:} bash "$ROOT/ci/gpu-calibrate.sh" "${arg%%:*}" ;;
	overhead)
		# the sandboxed runs bind the box's toolchain as the evaluations do (gpu_abgate_env's config)
		( gpu_abgate_env "$ROOT/.gpu/eval" "$WORK" >/dev/null
		  ROUNDS=$arg SANDBOX_CONFIG=${SB_CONFIG:-} ABGATE=$ROOT/.gpu/eval/bin/abgate \
			timeout --kill-after=10 "$(left)" bash "$ROOT/ci/sandbox-overhead.sh" ) >"$WORK/overhead.txt" 2>&1
		log "overhead: exit $?"; tail -n 4 "$WORK/overhead.txt" | tee -a "$SUMMARY" ;;
	esac
	gpu_archive "$OUT" "$WORK" "$STATE"
done
log "figures: done, $(left) s of the budget left"
gpu_archive "$OUT" "$WORK" "$STATE"
