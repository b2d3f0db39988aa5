#!/bin/sh
# run_fuzz.sh - runs the GGUF reader fuzzer for a bounded time on a seed corpus made by
# test_gguf. Exits 77 (CTest skip) when the fuzzer could not be built (no clang/libFuzzer).
# usage: run_fuzz.sh FUZZ_BINARY TEST_GGUF_BINARY SECONDS
fuzz=$1 seeds_tool=$2 seconds=$3
if [ ! -x "$fuzz" ]; then
	echo "SKIP: $fuzz was not built (needs clang with -fsanitize=fuzzer)"
	exit 77
fi
fuzz=$(cd "$(dirname "$fuzz")" && pwd)/$(basename "$fuzz")
work=$(mktemp -d "${TMPDIR:-/tmp}/ember-fuzz-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus" "$work/seeds"
"$seeds_tool" seeds "$work/seeds" >/dev/null || exit 1
cd "$work" || exit 1
"$fuzz" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=1024 \
	-print_final_stats=1 corpus seeds >fuzz.log 2>&1
status=$?
grep -E "^(Done|stat::|==|SUMMARY|ERROR)" fuzz.log | head -n 40
ls crash-* leak-* timeout-* oom-* >/dev/null 2>&1 && { echo "FAIL: the fuzzer found an input (see above)"; exit 1; }
exit $status
