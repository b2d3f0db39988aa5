#!/usr/bin/env bash
# ci/gpu-calibrate.sh - `abgate calibrate` of ember on a GPU machine (the H200 box): RUNS A/A
# evaluations of REF against itself with fresh seeds, through the same packed abgate, sandbox and
# state dir as ci/gpu-eval.sh (so a later ci/gpu-eval.sh in the same state cites this calibration).
#
#   ci/gpu-calibrate.sh REF
#
# Environment: RUNS (default 10), SUITE (default guards/gpu-quick.json turned speed-only by
# ci/gpu-suite.py: both sides are one tree, so the accuracy gates cannot differ), STATE, OUT, WORK,
# ABGATE, REPO and NO_SANDBOX as in ci/gpu-eval.sh, CAL_TIMEOUT_S (default 900).
# Results in OUT: calibration.json, calibration.md, calibrate.log and summary.log.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CARRY=$ROOT/.gpu/eval
OUT=${OUT:-/tmp/abgate-out}
STATE=${STATE:-/tmp/abgate-state}
REPO=${REPO:-$CARRY/repo.git}
ABGATE=${ABGATE:-$CARRY/bin/abgate}
WORK=${WORK:-/tmp/abgate-work}
RUNS=${RUNS:-10}
mkdir -p "$OUT" "$STATE" "$WORK"
SUMMARY=$OUT/summary.log
export PYTHONUNBUFFERED=1
source "$ROOT/ci/gpu-lib.sh" # log, gpu_abgate_env
ref=${1:?usage: $0 REF}

gpu_abgate_env "$CARRY" "$WORK"
suite=${SUITE:-}
if [ -z "$suite" ]; then
	suite=$WORK/gpu-quick-speed.json
	python3 "$ROOT/ci/gpu-suite.py" speed "$ROOT/guards/gpu-quick.json" "$suite" || exit 2
fi
log "calibrate $ref: $RUNS runs of $suite"
start=$SECONDS
timeout --kill-after=20 "${CAL_TIMEOUT_S:-900}" "$ABGATE" calibrate --repo "$REPO" --ref "$ref" --suite "$suite" \
	--runs "$RUNS" --state "$STATE" "${sandbox_args[@]}" --json "$OUT/calibration.json" \
	--markdown "$OUT/calibration.md" >"$OUT/calibrate.txt" 2>"$OUT/calibrate.log"
rc=$?
log "calibrate: exit $rc, $((SECONDS - start)) s"
tail -n 15 "$OUT/calibrate.txt" | tee -a "$SUMMARY"
exit $rc
