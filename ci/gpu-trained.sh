#!/usr/bin/env bash
# ci/gpu-trained.sh - the trained pair's run on the GPU machine (not CI): trains a target + DFlash
# draft with tools/train_pair.py from a prep dir made here (`train_pair.py prep`: the corpus and
# tokenizer need sentencepiece, which the GPU image may lack), while ember builds for CUDA; then
# on the trained files: test_cuda_spec (speculative output equals plain on the GPU), tau on the
# held-out prompts at depths 3/5/7/15 through `ember serve --backend cuda` (tools/spec_tau.py, with
# ember's plain and spec decode times), and ember-bench --spec (plain vs spec tok/s on the GPU);
# then the same pair embedded at real shapes (`ember gen --embed`, engine/embed.h: the trained
# function in qwen3-0.6b / qwen3-8b tensors), with tau and spec speed measured on each embedded pair.
# The GGUF files, the training log and every step's log go to $OUT.
#   PREP (default .gpu/train/p64: `train_pair.py prep --out .gpu/train/p64 --preset gpu64b` here)
#   PRESET (default gpu64b)  SEED (default 1)
#   TRAIN_LIMIT_S (default 420)    OUT (default /tmp/trained-out)
#   EMBED (default "qwen3-0.6b:q8_0 qwen3-8b:q8_0 qwen3-8b:q4_k_m"; "" skips): SHAPE:QUANT pairs. q8_0
#   keeps the weights bit-identical; q4_k_m re-quantizes them (a nearby model: its own tau).
# jansson's Debian packages come from $DEB (default .gpu/deb) when the image lacks the headers.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/trained-out}
PREP=${PREP:-.gpu/train/p64}
PRESET=${PRESET:-gpu64b}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.log
source ci/gpu-lib.sh
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
gpu_jansson_setup "${DEB:-$PWD/.gpu/deb}"
log "$GPU_JANSSON_MSG"
log "host: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); $(python3 -c 'import torch; print("torch", torch.__version__)')"
[ -s "$PREP/train.u32" ] || { log "no prep dir at $PREP (run train_pair.py prep here first)"; exit 2; }

(cmake -S . -B build-cuda -DEMBER_CUDA=ON -DABGATE=OFF -DCMAKE_BUILD_TYPE=Release &&
 cmake --build build-cuda -j12 --target ember ember-bench test_cuda_spec) >"$OUT/build.log" 2>&1 &
BP=$!
run "$OUT/train.log" "${TRAIN_LIMIT_S:-420}" "train $PRESET" \
	python3 tools/train_pair.py train --out "$PREP" --preset "$PRESET" --seed "${SEED:-1}" --threads 4
grep -E "held-out ppl|tau|slot" "$OUT/train.log" | tail -6
for f in target-q8_0.gguf draft-q8_0.gguf draft-untrained-q8_0.gguf log.json; do
	[ -f "$PREP/$f" ] && cp "$PREP/$f" "$OUT/"
done
wait $BP && log "PASS build" || { log "FAIL build"; grep -E "error" "$OUT/build.log" | head; exit 1; }
[ -f "$PREP/draft-q8_0.gguf" ] || exit 1
B=build-cuda/bin
T=$PREP/target-q8_0.gguf
D=$PREP/draft-q8_0.gguf
run "$OUT/info.log" 30 "ember info" sh -c "$B/ember info $T && $B/ember info $D"
run "$OUT/spec.log" 120 "test_cuda_spec trained" $B/test_cuda_spec "$T" "$D"
grep -E "FAIL|FATAL|spec tokens|steps," "$OUT/spec.log" | head -10
for depth in 3 5 7 15; do
	run "$OUT/tau.log" 120 "tau cuda depth $depth" python3 tools/spec_tau.py --ember $B/ember --backend cuda \
		--target "$T" --draft "$D" --ids "$PREP/heldout.u32" --n 64 --seed 12 --gen 64 --depth $depth --json
done
run "$OUT/tau.log" 120 "tau cuda untrained" python3 tools/spec_tau.py --ember $B/ember --backend cuda \
	--target "$T" --draft "$PREP/draft-untrained-q8_0.gguf" --ids "$PREP/heldout.u32" --n 64 --seed 12 --gen 64 --json
grep '^{' "$OUT/tau.log" | python3 -c 'import json,sys
for l in sys.stdin:
    d = json.loads(l); print("depth %s tau %.4f speedup %s mismatches %d" % (d["depth"], d["tau"], d["spec_speedup"], d["spec_mismatches"]))'
run "$OUT/bench.log" 120 "bench trained spec" $B/ember-bench --model "$T" --decode 128 --gen 128 --reps 7 --verify 16 --spec "$D"
grep -E "^model|^draft|^decode|^verify|^spec" "$OUT/bench.log"

for sq in ${EMBED-qwen3-0.6b:q8_0 qwen3-8b:q8_0 qwen3-8b:q4_k_m}; do
	shape=${sq%%:*} quant=${sq##*:} ET=/tmp/embed-$shape-$quant.gguf ED=/tmp/embed-$shape-$quant-draft.gguf
	run "$OUT/embed.log" 240 "embed $shape $quant" $B/ember gen --embed "$T" --embed-draft "$D" --draft-out "$ED" \
		--shape "$shape" --quant "$quant" -o "$ET" || continue
	run "$OUT/tau-embed.log" 240 "tau cuda $shape $quant depth 15" python3 tools/spec_tau.py --ember $B/ember \
		--backend cuda --target "$ET" --draft "$ED" --ids "$PREP/heldout.u32" --n 64 --seed 12 --gen 64 --json
	run "$OUT/bench-embed.log" 240 "bench $shape $quant spec" $B/ember-bench --model "$ET" --decode 128 --gen 128 \
		--reps 7 --verify 16 --spec "$ED"
	rm -f "$ET" "$ED"
done
grep '^{' "$OUT/tau-embed.log" 2>/dev/null | python3 -c 'import json,sys
for l in sys.stdin:
    d = json.loads(l); print("embedded %s: tau %.4f speedup %s mismatches %d" % (d.get("target"), d["tau"], d["spec_speedup"], d["spec_mismatches"]))'
grep -E "^model|^spec" "$OUT/bench-embed.log" 2>/dev/null
cat "$SUMMARY"
