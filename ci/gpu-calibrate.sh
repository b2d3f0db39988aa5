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
# Results in WORK: calibration.json, calibration.md, calibrate.txt and calibrate.log; OUT gets
# summary.log and results.tgz (gpu_archive: WORK and the state dir's logs).
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
source "$ROOT/ci/gpu-lib.sh" # log, gpu_abgate_env, gpu_archive
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
	--runs "$RUNS" --state "$STATE" "${sandbox_args[@]}" --json "$WORK/calibration.json" \
	--markdown "$WORK/calibration.md" >"$WORK/calibrate.txt" 2>"$WORK/calibrate.log"
rc=$?
log "calibrate: exit $rc, $((SECONDS - start)) s"
tail -n 15 "$WORK/calibrate.txt" | tee -a "$SUMMARY"
tail -n 3 "$WORK/calibrate.log" | sed 's/^/    /' | tee -a "$SUMMARY"
gpu_archive "$OUT" "$WORK" "$STATE"
exit $rc
