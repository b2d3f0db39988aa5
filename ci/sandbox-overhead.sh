#!/usr/bin/env bash
# ci/sandbox-overhead.sh - what the bubblewrap sandbox costs per build and per SUT process start, on
# this machine: ROUNDS rounds, each one A/A evaluation of the mock fixture (tests/integration/lib.sh)
# sandboxed and one with --no-sandbox, in alternating order, with a fixed number of pairs so both
# start the same number of SUT processes. Prints each run and the medians and spreads of the build
# time, the measuring time and (measuring difference) / processes. A benchmark, not a test.
#   usage: ABGATE=build/bin/abgate [ROUNDS=5] [PAIRS=6] [SANDBOX_CONFIG=F] bash ci/sandbox-overhead.sh
# SANDBOX_CONFIG: an abgate config whose sandbox object the sandboxed runs use (on the GPU box, the
# toolchain paths ci/gpu-lib.sh's gpu_abgate_env binds).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export ABGATE=${ABGATE:-$ROOT/build/bin/abgate} SRC_ROOT=$ROOT
ROUNDS=${ROUNDS:-5}
export PAIRS_MIN=${PAIRS:-6} PAIRS_MAX=${PAIRS:-6}
command -v bwrap >/dev/null || { echo "sandbox-overhead: bubblewrap is not installed (ci/deps.sh)" >&2; exit 2; }
source "$ROOT/tests/integration/lib.sh"
fixture_init
head_commit "head: comment only" "# no functional change=1"
rows=$WORK/rows.tsv
: > "$rows"
one() {   # one MODE [abgate eval options]
  local mode=$1; shift
  rm -rf "$WORK/state"   # nothing reused: every run builds both sides and generates the model
  SEED=$((100 + RANDOM % 1000)) run_eval "$@"
  [ "$RC" -eq 0 ] || { cat "$WORK/stderr.txt" >&2; echo "sandbox-overhead: $mode run exited $RC" >&2; exit 1; }
  jq -r --arg m "$mode" '[$m, .timing.build_s, .timing.measure_s, .environment.runs.processes,
    .verdict.label] | @tsv' "$RESULT" | tee -a "$rows"
}
sb_args=()
[ -n "${SANDBOX_CONFIG:-}" ] && sb_args=(--config "$SANDBOX_CONFIG")
printf 'mode\tbuild_s\tmeasure_s\tprocesses\tlabel\n'
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then one sandboxed "${sb_args[@]}"; one plain --no-sandbox; else one plain --no-sandbox; one sandboxed "${sb_args[@]}"; fi
done
awk -F'\t' '
  function med(a, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
    return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2 }
  $1 == "sandboxed" { sb[++ns] = $2; sm[ns] = $3; sp = $4 }
  $1 == "plain"     { pb[++np] = $2; pm[np] = $3 }
  END {
    for (i = 1; i <= ns; i++) { d[i] = (sm[i] - pm[i]) / (sp > 0 ? sp : 1) * 1000; bd[i] = sb[i] - pb[i] }
    printf "\nbuild:     sandboxed %.2f s, plain %.2f s (medians of %d); per round +%.2f s (min %.2f, max %.2f)\n",
      med(sb, ns), med(pb, np), ns, med(bd, ns), mn(bd, ns), mx(bd, ns)
    printf "measuring: sandboxed %.2f s, plain %.2f s, %d SUT processes each\n", med(sm, ns), med(pm, np), sp
    printf "per SUT process start: +%.1f ms (median of %d rounds; min %.1f, max %.1f)\n", med(d, ns), ns, mn(d, ns), mx(d, ns)
  }
  function mn(a, n,   i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] < m) m = a[i]; return m }
  function mx(a, n,   i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] > m) m = a[i]; return m }
' "$rows"
