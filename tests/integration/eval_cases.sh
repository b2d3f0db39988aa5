#!/usr/bin/env bash
# eval_cases.sh CASE - end-to-end cases of `abgate eval` on fixture repositories (issue: the
# evaluation pipeline). Each case builds its own repo with the mock SUT at two commits.
#   usage: ABGATE=... SRC_ROOT=... eval_cases.sh CASE   (the cases below)
source "$(dirname "$0")/lib.sh"

case "${1:?case}" in
aa)
  # A/A: two commits whose trees differ only in a comment line of the config.
  fixture_init
  head_commit "head: comment only" "# no functional change=1"
  run_eval
  expect_rc 0
  expect_label "eval:none"
  ! jq -e '.verdict.labels[] | select(startswith("regression-"))' "$RESULT" >/dev/null \
    || fail "A/A produced a regression label"
  [ "$(jq_result '.samples | length')" -gt 0 ] || fail "no samples recorded"
  [ "$(jq_result '.head.sha')" != "$(jq_result '.base.sha')" ] || fail "base and head sha equal"
  pass "A/A -> eval:none"
  ;;
slower)
  fixture_init
  head_commit "head: 20% slower decode" "decode_speed=0.8"
  run_eval
  expect_rc 1
  expect_label "eval:REJECT"
  has_label "regression-512" || has_label "regression-2k" || fail "no regression-<ctx> label: $(jq -c .verdict.labels "$RESULT")"
  jq -e '[.metrics[] | select(.name == "decode_tps" and .outcome == "regressed")] | length > 0' "$RESULT" >/dev/null \
    || fail "decode not marked regressed"
  jq -e '[.metrics[] | select(.name == "prefill_tps" and .outcome == "regressed")] | length == 0' "$RESULT" >/dev/null \
    || fail "prefill marked regressed though only decode changed"
  grep -q "REJECT" "$WORK/comment.md" || fail "markdown lacks the verdict"
  pass "20% slower decode -> REJECT with $(jq -c .verdict.labels "$RESULT")"
  ;;
faster)
  fixture_init
  head_commit "head: 20% faster" "speed=1.2"
  run_eval
  expect_rc 0
  label=$(jq_result '.verdict.label')
  case "$label" in eval:M|eval:L|eval:XL) ;; *) expect_label "a tier >= M (got $label)" ;; esac
  pass "20% faster -> $label"
  ;;
nobuild)
  fixture_init
  g checkout -q -B head
  printf '\n#error "this head does not compile"\n' >> "$REPO/mock_sut.c"
  g add -A && g commit -qm "head: broken" && g checkout -q main
  run_eval
  expect_rc 1
  expect_label "eval:REJECT"
  jq_result '.verdict.reason' | grep -qi "does not compile" || fail "reason: $(jq_result .verdict.reason)"
  jq_result '.build.head.log_tail' | grep -q "this head does not compile" || fail "head build log tail missing"
  pass "broken head -> REJECT does not compile"
  ;;
basecrash)
  # The base SUT crashes on its first request; the head is fine. No verdict can be reached.
  fixture_init
  printf 'crash_after = 0\n' >> "$REPO/mock_sut.conf"
  g add -A && g commit -qm "base: crashing SUT"
  g checkout -q -B head
  sed -i 's/^crash_after = 0$/crash_after = -1/' "$REPO/mock_sut.conf"
  g add -A && g commit -qm "head: fixed" && g checkout -q main
  run_eval
  expect_rc 3
  expect_label "eval:infra-error"
  jq_result '.verdict.reason' | grep -qiE "crash|signal" || fail "reason does not name the crash: $(jq_result .verdict.reason)"
  pass "crashing base SUT -> infra-error"
  ;;
hang)
  # The head SUT hangs on its first request: killed at the request timeout, infra error.
  export REQUEST_TIMEOUT_S=2 PAIRS_MIN=2 PAIRS_MAX=2
  fixture_init
  head_commit "head: hangs" "hang_after=1"
  start=$(date +%s)
  run_eval
  elapsed=$(( $(date +%s) - start ))
  expect_rc 3
  expect_label "eval:infra-error"
  jq_result '.verdict.reason' | grep -qi "timeout" || fail "reason does not name the timeout: $(jq_result .verdict.reason)"
  # 2 pairs, one hanging process each, 2 s per timeout, plus builds: far below a minute.
  [ "$elapsed" -lt 60 ] || fail "took ${elapsed}s: the timeout was not enforced"
  pass "hanging SUT -> infra-error in ${elapsed}s"
  ;;
oom)
  # The head SUT runs out of memory on its first request: infra, never a REJECT, and the reason
  # says which kind of failure it was.
  export PAIRS_MIN=2 PAIRS_MAX=2
  fixture_init
  head_commit "head: runs out of memory" "oom_after=0"
  run_eval
  expect_rc 3
  expect_label "eval:infra-error"
  jq_result '.verdict.reason' | grep -qiE "oom|out of memory" || fail "reason does not name the OOM: $(jq_result .verdict.reason)"
  [ "$(jq_result '.failures.head.oom')" -gt 0 ] || fail "failures.head.oom is $(jq_result '.failures.head.oom')"
  [ "$(jq_result '.environment.runs.retries')" -gt 0 ] || fail "the failed process was not retried"
  pass "OOM in the head SUT -> infra-error: $(jq_result .verdict.reason)"
  ;;
reuse)
  export PAIRS_MIN=2 PAIRS_MAX=2
  fixture_init
  head_commit "head: comment only" "# touch=1"
  run_eval
  expect_rc 0
  [ "$(jq_result '.build.base.reused')" = "false" ] || fail "first base build claimed reuse"
  # Second evaluation of the same trees: both builds must be reused.
  run_eval
  expect_rc 0
  [ "$(jq_result '.build.base.reused')" = "true" ] || fail "base build not reused"
  [ "$(jq_result '.build.head.reused')" = "true" ] || fail "head build not reused"
  "$ABGATE" history --state "$WORK/state" > "$WORK/history.txt"
  [ "$(grep -c 'eval:' "$WORK/history.txt")" -ge 2 ] || { cat "$WORK/history.txt"; fail "history lacks the two evaluations"; }
  id=$(jq_result '.id')
  "$ABGATE" report "$id" --state "$WORK/state" --format md > "$WORK/report.md"
  grep -q "decode" "$WORK/report.md" || fail "report re-render lacks the table"
  pass "unchanged trees -> builds reused; history and report work"
  ;;
harness)
  # The head edits the suite: the evaluation must still use the base commit's suite, and say that
  # the PR touches the harness.
  export PAIRS_MIN=2 PAIRS_MAX=2
  fixture_init
  base_suite_sha=$(sha256sum "$REPO/guards/default.json" | cut -d' ' -f1)
  g checkout -q -B head
  sed -i 's/"regression_ratio": 0.98/"regression_ratio": 0.5/' "$REPO/guards/default.json"
  g add -A && g commit -qm "head: loosen the gate" && g checkout -q main
  run_eval
  expect_rc 0
  has_label "harness-touched" || fail "no harness-touched label: $(jq -c .verdict.labels "$RESULT")"
  [ "$(jq_result '.suite.sha256')" = "$base_suite_sha" ] || fail "the suite did not come from the base commit"
  [ "$(jq_result '.statistics.regression_ratio')" = "0.98" ] || fail "regression_ratio from the head's suite"
  jq -e '.changed_files | index("guards/default.json") != null' "$RESULT" >/dev/null || fail "changed files"
  pass "head edits the suite -> base suite used, harness-touched"
  ;;
harness_rename)
  # The head moves the suite out of the harness: the old path counts, so it is still harness-touched.
  export PAIRS_MIN=2 PAIRS_MAX=2
  fixture_init
  g checkout -q -B head
  g mv guards/default.json suite.json
  g commit -qm "head: move the suite away" && g checkout -q main
  run_eval
  expect_rc 0
  has_label "harness-touched" || fail "no harness-touched label: $(jq -c .verdict.labels "$RESULT")"
  jq -e '.changed_files | index("suite.json") != null' "$RESULT" >/dev/null || fail "changed files"
  pass "head renames a harness file away -> harness-touched"
  ;;
accuracy_ok)
  # Same engine, accuracy gates on: every gate passes, greedy tokens identical.
  export ACCURACY=1
  fixture_init
  head_commit "head: comment only" "# no functional change=1"
  run_eval
  expect_rc 0
  expect_label "eval:none"
  [ "$(jq '[.gates[] | select(.name != "greedy_agreement" and .name != "engine_clock")] | length' "$RESULT")" -eq 4 ] || fail "expected 4 accuracy gates"
  jq -e '[.gates[] | select(.pass | not)] | length == 0' "$RESULT" >/dev/null || fail "a gate failed: $(jq -c .gates "$RESULT")"
  [ "$(jq_result '.accuracy.models[0].positions')" -eq 256 ] || fail "positions: $(jq_result '.accuracy.models[0].positions')"
  [ "$(jq_result '.accuracy.models[0].head.top1')" = "1" ] || fail "head top-1 vs the reference is not 1"
  # Greedy agreement compares every decode request once: 2 decode contexts per pair.
  requests=$(( 2 * $(jq '[.samples[].pair] | unique | length' "$RESULT") ))
  jq -e --arg n "all $requests decode requests" \
    '[.gates[] | select(.name == "greedy_agreement" and .pass and .advisory and (.detail | contains($n)))] | length == 1' \
    "$RESULT" >/dev/null || fail "greedy agreement over $requests requests: $(jq -c '.gates' "$RESULT")"
  # A second evaluation answers the reference from the cache.
  run_eval
  [ "$(jq_result '.accuracy.models[0].reference_cached_windows')" -eq 4 ] || fail "reference answers not cached"
  pass "A/A with accuracy gates -> eval:none, gates pass, reference cached"
  ;;
accuracy_bug)
  # The head's distributions are slightly off (a numerical bug) while its speed is unchanged:
  # REJECT by the accuracy gate, with the speed tier still computed.
  export ACCURACY=1
  fixture_init
  head_commit "head: subtle numerical error" "score_noise=0.15"
  run_eval
  expect_rc 1
  expect_label "eval:REJECT"
  has_label "accuracy-regression" || fail "no accuracy-regression label: $(jq -c .verdict.labels "$RESULT")"
  ! jq -e '.verdict.labels[] | select(startswith("regression-"))' "$RESULT" >/dev/null \
    || fail "speed regression labels on an accuracy-only change"
  jq -e '[.gates[] | select(.name == "kl_rise" and (.pass | not))] | length == 1' "$RESULT" >/dev/null \
    || fail "kl_rise did not fail: $(jq -c '.gates' "$RESULT")"
  grep -q "accuracy" "$WORK/comment.md" || grep -q "kl_rise" "$WORK/comment.md" || fail "markdown lacks the gate"
  pass "subtle numerical error -> REJECT accuracy-regression: $(jq -r .verdict.reason "$RESULT")"
  ;;
spec_aa)
  # A/A with speculative decoding: no spec label fires, every speculative answer equals its plain twin.
  export SPEC=1
  fixture_init
  head_commit "head: comment only" "# no functional change=1"
  run_eval
  expect_rc 0
  expect_label "eval:none"
  has_label "eval-dflash:none" || fail "no eval-dflash:none label: $(jq -c .verdict.labels "$RESULT")"
  ! jq -e '.verdict.labels[] | select(startswith("regression-") or . == "tau-regression" or . == "spec-mismatch")' \
    "$RESULT" >/dev/null || fail "A/A produced a spec label: $(jq -c .verdict.labels "$RESULT")"
  for m in spec_decode_tps tau spec_speedup; do
    jq -e --arg m "$m" '[.metrics[] | select(.name == $m)] | length == 2' "$RESULT" >/dev/null \
      || fail "no $m series at both spec contexts"
  done
  jq -e '[.gates[] | select(.name == "spec_exact" and .pass == true)] | length == 1' "$RESULT" >/dev/null \
    || fail "spec_exact gate missing or failed: $(jq -c '.gates' "$RESULT")"
  jq -e '[.metrics[] | select(.name == "tau")][0].head.median > 3' "$RESULT" >/dev/null \
    || fail "tau not measured: $(jq -c '[.metrics[] | select(.name == "tau")]' "$RESULT")"
  grep -q "Speculative decoding" "$WORK/comment.md" || fail "markdown lacks the spec section"
  pass "A/A with spec -> eval:none, eval-dflash:none ($(jq_result '.pairs.count') pairs)"
  ;;
spec_faster)
  # A 25% faster draft at the same tau: spec tok/s rises ~11% (lib.sh: the draft pass costs as much
  # as the verify window), plain decode is unchanged. Up to 20 pairs: at 12 the Bonferroni-adjusted
  # lower bound sat at +4..9% on a loaded 2-core box, and one CI run under ASan read eval-dflash:S.
  export SPEC=1 PAIRS_MAX=20
  fixture_init
  head_commit "head: faster draft" "draft_speed=1.25"
  run_eval
  expect_rc 0
  spec=$(jq -r '.verdict.labels[] | select(startswith("eval-dflash:"))' "$RESULT")
  case "$spec" in eval-dflash:M|eval-dflash:L|eval-dflash:XL) ;; *) fail "spec label $spec, expected a tier >= M: $(jq -c .verdict.labels "$RESULT")" ;; esac
  case "$(jq_result .verdict.label)" in eval:M|eval:L|eval:XL) ;; *) fail "headline $(jq_result .verdict.label) does not carry the spec tier" ;; esac
  pass "25% faster draft -> $spec, $(jq_result .verdict.label)"
  ;;
spec_off)
  # The head switches speculation off (tau -> 1) and makes plain decode 3% faster: it must not win.
  export SPEC=1
  fixture_init
  head_commit "head: speculation off" "spec_disabled=1" "decode_speed=1.03"
  run_eval
  expect_rc 1
  expect_label "eval:REJECT"
  has_label "tau-regression" || fail "no tau-regression label: $(jq -c .verdict.labels "$RESULT")"
  has_label "eval-dflash:REJECT" || fail "no eval-dflash:REJECT label: $(jq -c .verdict.labels "$RESULT")"
  pass "speculation switched off -> REJECT $(jq -c .verdict.labels "$RESULT")"
  ;;
spec_diverge)
  # One speculative answer of the head (one pair, one context) differs from plain greedy.
  export SPEC=1
  fixture_init
  head_commit "head: diverges once" "spec_diverge_at=5" "spec_diverge_file=$WORK/diverge.count"
  # The mock keeps its "once" counter in a host file across SUT processes: a sandboxed SUT cannot
  # write outside its private /tmp (that is the point), so this fixture runs unsandboxed.
  run_eval --no-sandbox
  expect_rc 1
  expect_label "eval:REJECT"
  has_label "spec-mismatch" || fail "no spec-mismatch label: $(jq -c .verdict.labels "$RESULT")"
  jq -e '[.gates[] | select(.name == "spec_exact" and .pass == false and .value == 1)] | length == 1' "$RESULT" \
    >/dev/null || fail "spec_exact does not count one divergence: $(jq -c '.gates' "$RESULT")"
  jq -r '.gates[] | select(.name == "spec_exact") | .detail' "$RESULT" | grep -q "token 5" \
    || fail "the detail does not name the first divergent position"
  grep -q "spec-mismatch\|spec_exact" "$WORK/comment.md" || fail "markdown does not show the mismatch"
  pass "one diverging speculative answer -> REJECT spec-mismatch"
  ;;
spec_nodraft)
  # The suite asks for spec, but the SUT is started without a draft: a clear infra error naming the
  # model, found on the first process (no retries, no pairs wasted).
  export SPEC=1 SPEC_NO_DRAFT_ARG=1
  fixture_init
  head_commit "head: comment only" "# touch=1"
  run_eval
  expect_rc 3
  expect_label "eval:infra-error"
  jq_result '.verdict.reason' | grep -q "model mock" || fail "reason does not name the model: $(jq_result .verdict.reason)"
  jq_result '.verdict.reason' | grep -qi "draft" || fail "reason does not say draft: $(jq_result .verdict.reason)"
  [ "$(jq_result '.environment.runs.processes')" -le 2 ] || fail "$(jq_result '.environment.runs.processes') processes started"
  pass "spec without a draft -> infra-error: $(jq_result .verdict.reason)"
  ;;
spec_lie)
  # The head's stats claim a tau 40% above what it delivered: every head spec sample is a protocol
  # fault, so the spec family cannot be judged (infra), and the reason says why.
  export SPEC=1 PAIRS_MIN=2 PAIRS_MAX=2
  fixture_init
  head_commit "head: lies about tau" "spec_stats_lie=1.4"
  run_eval
  expect_rc 3
  expect_label "eval:infra-error"
  jq -r '[.samples[] | select(.side == "head" and .metric == "tau")][0].reason' "$RESULT" | grep -q "accept_mean" \
    || fail "head tau samples do not name the disagreement: $(jq -c '[.samples[] | select(.metric == "tau")][0]' "$RESULT")"
  has_label "eval-dflash:infra-error" || fail "no eval-dflash:infra-error label: $(jq -c .verdict.labels "$RESULT")"
  pass "lying spec stats -> infra-error"
  ;;
ember_spec)
  # ember's real speculative path, end to end through abgate: this repository's own HEAD against
  # itself with guards/spec-cpu.json (the shipped trained pair of guards/trained/, held-out prompts).
  # Every speculative answer must equal the plain one, the stats must pass the harness's cross-check,
  # nothing may fire, and the trained draft must accept (median tau > 1.3; untrained gives 1.0).
  git -C "$SRC_ROOT" rev-parse --verify -q HEAD >/dev/null || { echo "SKIP: $SRC_ROOT is not a git checkout"; exit 77; }
  RESULT=$WORK/result.json
  set +e
  "$ABGATE" eval --repo "$SRC_ROOT" --base HEAD --head HEAD --suite "$SRC_ROOT/guards/spec-cpu.json" \
    --state "$WORK/state" --json "$RESULT" --markdown "$WORK/comment.md" --seed 11 --quiet \
    --pairs-max 6 > "$WORK/stdout.txt" 2> "$WORK/stderr.txt"
  RC=$?
  set -e
  expect_rc 0
  has_label "eval-dflash:none" || fail "no eval-dflash:none: $(jq -c .verdict.labels "$RESULT")"
  jq -e '[.gates[] | select(.name == "spec_exact" and .pass == true)] | length == 1' "$RESULT" >/dev/null \
    || fail "spec_exact: $(jq -c '.gates' "$RESULT")"
  jq -e '.spec.models.trained.head.compared >= 12 and .spec.models.trained.head.stats_faults == 0 and .spec.models.trained.kind == "dflash"' \
    "$RESULT" >/dev/null || fail "spec record: $(jq -c .spec "$RESULT")"
  jq -e '[.samples[] | select(.metric == "tau" and .ok == true and .value >= 1)] | length >= 24' "$RESULT" >/dev/null \
    || fail "tau samples: $(jq -c '[.samples[] | select(.metric == "tau")][0]' "$RESULT")"
  jq -e '[.metrics[] | select(.name == "tau")] | length >= 1 and all(.head.median > 1.3)' "$RESULT" >/dev/null \
    || fail "trained draft tau: $(jq -c '[.metrics[] | select(.name == "tau")]' "$RESULT")"
  pass "ember spec A/A -> $(jq -c .verdict.labels "$RESULT"), tau $(jq -r '[.metrics[] | select(.name == "tau")][0].head.median' "$RESULT")"
  ;;
*)
  fail "unknown case $1"
  ;;
esac
