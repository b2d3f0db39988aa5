#!/usr/bin/env bash
# calibrate.sh N [KEY=VALUE ...] - measures how often abgate labels a change, over N evaluations of
# one fixture repository with the mock SUT: with no KEY=VALUE the head differs from the base only
# by a comment (A/A: every label other than eval:none is a false positive); with settings such as
# decode_speed=0.98 the head is that much slower (power). Each evaluation uses a fresh seed.
# SPEC=1 measures speculative decoding too (lib.sh's spec fixture), so the spec family counts.
# Prints one line per evaluation and a summary. Not a CTest case: it takes minutes.
#   usage: ABGATE=build/bin/abgate SRC_ROOT=. tests/integration/calibrate.sh 40 [noise=0.05]
source "$(dirname "$0")/lib.sh"
n=${1:?number of evaluations}
shift
fixture_init
if [ $# -eq 0 ]; then
  head_commit "head: comment only" "# A/A=1"
else
  head_commit "head: $*" "$@"
fi
declare -A count
for i in $(seq 1 "$n"); do
  SEED=$((1000 + i)) run_eval
  label=$(jq_result '.verdict.label')
  count[$label]=$(( ${count[$label]:-0} + 1 ))
  printf '%3d seed %d exit %d %-12s pairs %s  measure %.1f s  %s\n' "$i" $((1000 + i)) "$RC" "$label" \
    "$(jq_result '.pairs.count')" "$(jq_result '.timing.measure_s')" "$(jq -c '.verdict.labels' "$RESULT")"
done
echo "summary over $n evaluations ($([ $# -eq 0 ] && echo "A/A" || echo "$*")):"
for k in "${!count[@]}"; do printf '  %-16s %d (%.1f%%)\n' "$k" "${count[$k]}" "$(echo "100*${count[$k]}/$n" | bc -l)"; done
