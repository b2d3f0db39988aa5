#!/usr/bin/env bash
# lib.sh - shared helpers for abgate's end-to-end tests: each test builds a fixture git repository in
# a temp dir with the mock SUT (tests/mock_sut.c) committed at two commits, runs `abgate eval` on it
# and checks the exit status and the abgate.result/1 document. Sourced by the test scripts.
set -euo pipefail

ABGATE=${ABGATE:?path to the abgate executable}
SRC_ROOT=${SRC_ROOT:?path to the source tree}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/abgate-it.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "PASS: $*"; }

# git with a fixed identity so fixture commits never depend on the machine's config
g() { git -C "$REPO" -c user.name=abgate-test -c user.email=test@abgate.invalid -c commit.gpgsign=false "$@"; }

# fixture_init [SUITE_JSON]: a repo with mock_sut.c, mock_sut.conf and guards/default.json on main.
fixture_init() {
  REPO=$WORK/repo
  mkdir -p "$REPO/guards"
  git init -q -b main "$REPO"
  cp "$SRC_ROOT/tests/mock_sut.c" "$REPO/mock_sut.c"
  cat > "$REPO/mock_sut.conf" <<CONF
vocab = 4096
decode_tps = 500
prefill_tps = 20000
noise = 0.02
CONF
  # With SPEC=1: tau 4 per prompt on average, a draft pass as costly as a verify window (so a draft
  # 25% faster makes speculative decode ~11% faster).
  [ -z "${SPEC:-}" ] || printf 'accept_len = 4\nverify_cost = 1\ndraft_cost = 1\n' >> "$REPO/mock_sut.conf"
  if [ $# -ge 1 ]; then
    printf '%s\n' "$1" > "$REPO/guards/default.json"
  else
    fixture_suite > "$REPO/guards/default.json"
  fi
  g add -A && g commit -qm "base: mock SUT"
}

# The default fixture suite: builds the mock with cc, one generated dummy "model", small sweep.
# Overrides through env: PAIRS_MIN, PAIRS_MAX, CONFIRM_PAIRS, REPS_CTX_MAX, REQUEST_TIMEOUT_S,
# READY_TIMEOUT_S, GEN_TOKENS (decode tokens per request).
fixture_suite() {
  cat <<JSON
{
  "schema": "abgate.suite/1",
  "name": "mock",
  "build": { "build": ["cc", "-O2", "-o", "{build}/mock_sut", "{src}/mock_sut.c", "-lm"], "timeout_s": 120 },
  "sut": { "command": ["{build}/mock_sut", "--config", "{src}/mock_sut.conf"$(fixture_draft_arg)],
           "ready_timeout_s": ${READY_TIMEOUT_S:-10}, "request_timeout_s": ${REQUEST_TIMEOUT_S:-10} },
  "models": [ { "name": "mock", "path": "{state}/models/mock.bin",
                "generate": ["sh", "-c", "echo mock-weights > {model}"]$(fixture_reference)$(fixture_draft) } ],
  "speed": { "decode": { "contexts": [512, 2048], "gen_tokens": ${GEN_TOKENS:-16} },
             "prefill": { "contexts": [512, 2048] },
             "pairs_min": ${PAIRS_MIN:-6}, "pairs_max": ${PAIRS_MAX:-12}, "confirm_pairs": ${CONFIRM_PAIRS:-4},
             "reps_ctx_max": ${REPS_CTX_MAX:-0},
             "margin": 0.01, "regression_ratio": 0.98, "alpha": 0.05, "max_failed_fraction": 0.25 },
  $(fixture_accuracy)$(fixture_spec)"harness_paths": ["guards/"]
}
JSON
}

# With ACCURACY=1 the suite scores held-out windows against a reference SUT: the base side's mock
# with the base commit's config (references are harness, they come from the base).
fixture_reference() {
  [ -n "${ACCURACY:-}" ] || return 0
  printf ',\n                "reference": { "command": ["{build}/mock_sut", "--config", "{src}/mock_sut.conf"] }'
}
fixture_accuracy() {
  [ -n "${ACCURACY:-}" ] || return 0
  printf '"accuracy": { "enabled": true, "windows": 4, "window_len": 96, "score_from": 32, "top_k": 16,\n'
  printf '                "top1_min": 0.90, "kl_max": 0.20, "top1_drop_max": 0.01, "kl_rise_max": 0.001,\n'
  printf '                "greedy_check": true },\n  '
}

# With SPEC=1 the model has a draft, the SUT is started with it and spec contexts are measured
# (SPEC_NO_DRAFT_ARG=1 keeps the spec section but starts the SUT without --draft).
fixture_draft() {
  [ -n "${SPEC:-}" ] || return 0
  printf ',\n                "draft": { "path": "{state}/models/mock-draft.bin", "generate": ["sh", "-c", "echo draft-for-{model} > {draft}"] }'
}
fixture_draft_arg() {
  [ -n "${SPEC:-}" ] && [ -z "${SPEC_NO_DRAFT_ARG:-}" ] || return 0
  printf ', "--draft", "{draft}"'
}
fixture_spec() {
  [ -n "${SPEC:-}" ] || return 0
  printf '"spec": { "contexts": [128, 512], "gen_tokens": 32, "regression_ratio": 0.98, "tau_floor_ratio": 0.95 },\n  '
}

# head_commit MSG [KEY=VALUE...]: a commit on branch "head" that sets mock_sut.conf keys.
head_commit() {
  local msg=$1; shift
  g checkout -q -B head
  local kv
  for kv in "$@"; do
    printf '%s = %s\n' "${kv%%=*}" "${kv#*=}" >> "$REPO/mock_sut.conf"
  done
  g add -A && g commit -qm "$msg"
  g checkout -q main
}

# run_eval [ARGS...]: runs abgate eval main..head; sets RC and RESULT (the JSON file).
run_eval() {
  RESULT=$WORK/result.json
  rm -f "$RESULT"
  set +e
  "$ABGATE" eval --repo "$REPO" --base main --head head --state "$WORK/state" \
    --json "$RESULT" --markdown "$WORK/comment.md" --seed "${SEED:-7}" --quiet "$@" \
    > "$WORK/stdout.txt" 2> "$WORK/stderr.txt"
  RC=$?
  set -e
}

jq_result() { jq -r "$1" "$RESULT"; }

expect_rc() {
  [ "$RC" -eq "$1" ] || { cat "$WORK/stderr.txt" >&2; [ -f "$RESULT" ] && jq '.verdict' "$RESULT" >&2; fail "exit status $RC, expected $1"; }
}

expect_label() {
  local got
  got=$(jq_result '.verdict.label')
  [ "$got" = "$1" ] || { jq '.verdict, [.metrics[] | {name, ctx, ratio, ci, outcome}]' "$RESULT" >&2; fail "label $got, expected $1"; }
}

has_label() { jq -e --arg l "$1" '.verdict.labels | index($l) != null' "$RESULT" >/dev/null; }
