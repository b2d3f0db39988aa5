#!/usr/bin/env bash
# ci/gpu-eval.sh - full abgate evaluations of ember on a GPU machine (the H200 box): abgate checks
# out base and head from a repository, builds ember from source for each (CUDA), generates the
# models, measures interleaved pairs on the GPU and scores accuracy against the references of the
# suite (ember's CPU backend, HF transformers). CI has no GPU: this is run by hand on the box.
#
#   ci/gpu-eval.sh NAME=BASE..HEAD [NAME=BASE..HEAD ...]
#
# Each argument is one evaluation, run in order, all sharing one state dir (so builds of identical
# trees and generated models are reused). Environment:
#   ABGATE      the abgate binary (default: .gpu/eval/bin/abgate, with its libraries in .gpu/eval/lib,
#               as ci/gpu-pack.sh packs them; the GPU image has no libgit2)
#   REPO        the repository to evaluate (default: .gpu/eval/repo.git, a bare copy packed here)
#   SUITE       the suite (default: the base commit's guards/default.json; e.g. guards/gpu-quick.json)
#   STATE       the state dir (default /tmp/abgate-state)      OUT  where results go (default /tmp/abgate-out)
#   SEED_BASE   if set, evaluation i uses seed SEED_BASE+i (default: a fresh seed each)
#   EVAL_TIMEOUT_S  limit per evaluation (default 900)
#   DEADLINE_S  stop starting (and cut) evaluations this many seconds after the start (default none)
#   NO_SANDBOX  1: evaluate with --no-sandbox (default: bubblewrap from the carried package)
# Results: WORK/NAME.{json,md,txt,log} per evaluation (WORK defaults to /tmp/abgate-work), and in
# OUT only summary.log and results.tgz (all of WORK plus the SUT and build logs of the state dir),
# refreshed after every evaluation so a run cut short still returns what it finished.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CARRY=$ROOT/.gpu/eval
OUT=${OUT:-/tmp/abgate-out}
STATE=${STATE:-/tmp/abgate-state}
REPO=${REPO:-$CARRY/repo.git}
ABGATE=${ABGATE:-$CARRY/bin/abgate}
EVAL_TIMEOUT_S=${EVAL_TIMEOUT_S:-900}
WORK=${WORK:-/tmp/abgate-work}
mkdir -p "$OUT" "$STATE" "$WORK"
SUMMARY=$OUT/summary.log
export PYTHONUNBUFFERED=1

source "$ROOT/ci/gpu-lib.sh" # log, gpu_abgate_env, gpu_archive
# json_get FILE EXPR: a value out of a result document (python3 is on the box; jq may not be).
json_get() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null || echo "?"; }

[ $# -ge 1 ] || { echo "usage: $0 NAME=BASE..HEAD ..." >&2; exit 2; }

archive() { gpu_archive "$OUT" "$WORK" "$STATE"; }
gpu_abgate_env "$CARRY" "$WORK" # libraries, jansson for ember's builds, the sandbox: sets sandbox_args

log "host: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null | head -1); $(nproc) cores"
"$ABGATE" version >/dev/null 2>&1 || { log "abgate does not run here: $("$ABGATE" version 2>&1 | head -3)"; exit 3; }

suite_args=()
[ -n "${SUITE:-}" ] && suite_args=(--suite "$SUITE")
i=0
for exp in "$@"; do
	name=${exp%%=*}
	refs=${exp#*=}
	base=${refs%%..*}
	head=${refs#*..}
	seed_args=()
	[ -n "${SEED_BASE:-}" ] && seed_args=(--seed $((SEED_BASE + i)))
	i=$((i + 1))
	limit=$EVAL_TIMEOUT_S
	if [ -n "${DEADLINE_S:-}" ]; then
		left=$((DEADLINE_S - SECONDS))
		if [ "$left" -lt 60 ]; then
			log "eval $name: skipped, $left s left before the deadline"
			continue
		fi
		[ "$left" -lt "$limit" ] && limit=$left
	fi
	log "eval $name: base $base, head $head (limit $limit s)"
	start=$SECONDS
	timeout --kill-after=20 "$limit" "$ABGATE" eval --repo "$REPO" --base "$base" --head "$head" \
		"${suite_args[@]}" "${seed_args[@]}" "${sandbox_args[@]}" --state "$STATE" \
		--json "$WORK/$name.json" --markdown "$WORK/$name.md" >"$WORK/$name.txt" 2>"$WORK/$name.log"
	rc=$?
	label=$(json_get "$WORK/$name.json" "d['verdict']['label']")
	timing=$(json_get "$WORK/$name.json" "json.dumps(d.get('timing'))")
	log "eval $name: exit $rc, $label, $((SECONDS - start)) s, timing $timing"
	tail -n 3 "$WORK/$name.log" | sed 's/^/    /' | tee -a "$SUMMARY"
	archive
done
log "done: $(ls -1 "$WORK"/*.json 2>/dev/null | wc -l) results in $OUT/results.tgz"
