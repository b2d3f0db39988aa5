#!/usr/bin/env bash
# http_cases.sh CASE - abgate eval end to end over HTTP on ember itself (issue 15): the fixture
# repository's SUT is `ember serve --http` (the ember of this build, copied by the fixture's build
# step) on a generated tiny model, driven through abgate's llama-server adapter. The fixture
# commits ember.args, which the SUT command hands to ember (@FILE); a head that adds
# --debug-token-delay-us to it is an engine whose decode got slower. HTTP SUTs run only without
# the sandbox today (docs/http-sut.md), hence --no-sandbox.
#   usage: ABGATE=... SRC_ROOT=... EMBER=... http_cases.sh aa|slower
source "$(dirname "$0")/lib.sh"
EMBER=${EMBER:?path to the ember executable}

if "$EMBER" serve --http 127.0.0.1:0 --model /nonexistent 2>&1 | grep -q "without libmicrohttpd"; then
  echo "SKIP: this ember was built without libmicrohttpd"
  exit 77
fi

# A repo with ember.args and the suite on main.
http_fixture() {
  REPO=$WORK/repo
  mkdir -p "$REPO/guards"
  git init -q -b main "$REPO"
  printf '# options of ember serve for this fixture (one per line)\n--threads 1\n' > "$REPO/ember.args"
  cat > "$REPO/guards/default.json" <<JSON
{
  "schema": "abgate.suite/1",
  "name": "ember-http",
  "build": { "build": ["cp", "$EMBER", "{build}/ember"], "timeout_s": 60 },
  "sut": { "kind": "openai", "api": "llama",
           "command": ["{build}/ember", "serve", "--http", "127.0.0.1:{port}", "--model", "{model}",
                       "--backend", "cpu", "--ctx", "512", "@{src}/ember.args"],
           "url": "http://127.0.0.1:{port}", "ready_timeout_s": 30, "request_timeout_s": 30 },
  "models": [ { "name": "tiny", "path": "{state}/models/tiny.gguf",
                "generate": ["$EMBER", "gen", "--shape", "tiny", "--quant", "q8_0", "--seed", "1", "-o", "{model}"] } ],
  "speed": { "decode": { "contexts": [64, 256], "gen_tokens": 32 },
             "prefill": { "contexts": [256] },
             "pairs_min": 6, "pairs_max": 10, "confirm_pairs": 4,
             "margin": 0.01, "regression_ratio": 0.98, "alpha": 0.05, "max_failed_fraction": 0.25 },
  "harness_paths": ["guards/"]
}
JSON
  g add -A && g commit -qm "base: ember over HTTP"
}

# head_args MSG LINE: a commit on branch "head" that appends LINE to ember.args.
head_args() {
  g checkout -q -B head
  printf '%s\n' "$2" >> "$REPO/ember.args"
  g add -A && g commit -qm "$1"
  g checkout -q main
}

case "${1:?case}" in
aa)
  # A/A: the head only adds a comment to ember.args.
  http_fixture
  head_args "head: comment only" "# no functional change"
  start=$(date +%s)
  run_eval --no-sandbox
  expect_rc 0
  expect_label "eval:none"
  ! jq -e '.verdict.labels[] | select(startswith("regression-"))' "$RESULT" >/dev/null \
    || fail "A/A produced a regression label"
  jq -e '[.samples[] | select(.metric == "decode_tps" and .ok == true)] | length >= 12' "$RESULT" >/dev/null \
    || fail "too few decode samples: $(jq -c '[.samples[] | select(.metric == "decode_tps")][0]' "$RESULT")"
  jq -e '[.samples[] | select(.ok == false)] | length == 0' "$RESULT" >/dev/null \
    || fail "failed samples: $(jq -c '[.samples[] | select(.ok == false)][0]' "$RESULT")"
  pass "ember over HTTP, A/A -> eval:none in $(( $(date +%s) - start )) s"
  ;;
slower)
  # The head's ember sleeps 1 ms after every decode step (~0.5 ms of compute on the tiny model).
  http_fixture
  head_args "head: slower decode" "--debug-token-delay-us 1000"
  start=$(date +%s)
  run_eval --no-sandbox
  expect_rc 1
  expect_label "eval:REJECT"
  has_label "regression-64" || has_label "regression-256" || fail "no regression-<ctx> label: $(jq -c .verdict.labels "$RESULT")"
  jq -e '[.metrics[] | select(.name == "decode_tps" and .outcome == "regressed")] | length > 0' "$RESULT" >/dev/null \
    || fail "decode not marked regressed: $(jq -c '[.metrics[] | {name, ctx, ratio, outcome}]' "$RESULT")"
  pass "ember over HTTP, decode delay -> REJECT $(jq -c .verdict.labels "$RESULT") in $(( $(date +%s) - start )) s"
  ;;
*)
  fail "unknown case $1"
  ;;
esac
