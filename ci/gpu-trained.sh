#!/usr/bin/env bash
# ci/gpu-trained.sh - the trained pair's run on the GPU machine (not CI). PHASE=train (default):
# trains a target + DFlash draft with tools/train_pair.py for each preset in VARIANTS, in parallel
# on the one GPU (each with the same --time-budget; they share the prep dir made here, since the
# corpus and tokenizer need sentencepiece, which the GPU image may lack) while ember builds for
# CUDA; picks the variant whose train_pair.py tau (depth 15, held-out prompts, the Q8_0 weights)
# is highest; then on its files: test_cuda_spec (speculative output equals plain on the GPU), tau
# at depths 3/5/7/15 through `ember serve --backend cuda` (tools/spec_tau.py, with ember's plain
# and spec decode times) on the prompts train_pair.py evaluated (seed 12) and on a second set it
# did not (seed 31, so the pick is not judged on the prompts it was picked by), the untrained
# draft, and ember-bench --spec (plain vs spec tok/s). PHASE=embed (PAIR=dir with target-q8_0.gguf,
# draft-q8_0.gguf, heldout.u32): the pair embedded at real shapes (`ember gen --embed`,
# engine/embed.h: the trained function in qwen3-0.6b / qwen3-8b tensors), with tau and spec speed
# on each. PHASE=all does both. The GGUF files, the training logs and every step's log go to $OUT.
#   PREP (default .gpu/train/p64: `train_pair.py prep --out .gpu/train/p64 --preset gpu64b` here)
#   VARIANTS (default "gpu64b gpu64c gpu64d")  SEED (default 1)  TRAIN_BUDGET_S (default 330)
#   OUT (default /tmp/trained-out)
#   EMBED (default "qwen3-0.6b:q8_0 qwen3-8b:q8_0 qwen3-8b:q4_k_m"): SHAPE:QUANT pairs. q8_0 keeps
#   the weights bit-identical; q4_k_m re-quantizes them (a nearby model: its own tau).
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
PHASE=${PHASE:-train}
VARIANTS=${VARIANTS:-gpu64b gpu64c gpu64d}
B=build-cuda/bin

(cmake -S . -B build-cuda -DEMBER_CUDA=ON -DABGATE=OFF -DCMAKE_BUILD_TYPE=Release &&
 cmake --build build-cuda -j12 --target ember ember-bench test_cuda_spec) >"$OUT/build.log" 2>&1 &
BP=$!

tau_json() { # LOGFILE -> one line per spec_tau JSON result
	grep '^{' "$1" 2>/dev/null | python3 -c 'import json,sys
for l in sys.stdin:
    d = json.loads(l); print("%s | %s depth %s seed %s: tau %.4f speedup %s mismatches %d" % (d.get("target"), d.get("draft"),
        d["depth"], d.get("seed"), d["tau"], d["spec_speedup"], d["spec_mismatches"]))'
}

if [ "$PHASE" = train ] || [ "$PHASE" = all ]; then
	[ -s "$PREP/train.u32" ] || { log "no prep dir at $PREP (run train_pair.py prep here first)"; exit 2; }
	pids=()
	for v in $VARIANTS; do
		d=/tmp/train-$v
		mkdir -p "$d" && cp "$PREP"/{train.u32,heldout.u32,prep.json,vocab.json,tokenizer.model} "$d/" 2>/dev/null
		run "$OUT/train-$v.log" $((${TRAIN_BUDGET_S:-330} + 90)) "train $v" python3 tools/train_pair.py train --out "$d" \
			--preset "$v" --seed "${SEED:-1}" --threads 3 --time-budget "${TRAIN_BUDGET_S:-330}" &
		pids+=($!)
	done
	wait "${pids[@]}"
	best= best_tau=0
	for v in $VARIANTS; do
		d=/tmp/train-$v
		[ -f "$d/log.json" ] || continue
		mkdir -p "$OUT/$v" && cp "$d"/{target-q8_0.gguf,draft-q8_0.gguf,draft-untrained-q8_0.gguf,log.json,heldout.u32} "$OUT/$v/"
		t=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); e=d["eval"]["trained"]
print(e["tau"]["15"], "ppl %s, draft steps %s, tau %s, slot accept %s" % (d["target_ppl"]["heldout"],
      d["draft_loss"]["steps_run"], e["tau"], e["accept_rate_per_slot"][:4]))' "$d/log.json")
		log "variant $v: tau(15) ${t}"
		if python3 -c "import sys; sys.exit(0 if ${t%% *} > $best_tau else 1)"; then best=$v best_tau=${t%% *}; fi
	done
	[ -n "$best" ] || { log "no variant finished"; exit 1; }
	log "picked $best (train_pair.py tau at depth 15: $best_tau)"
	echo "$best" >"$OUT/picked"
	PAIR=/tmp/train-$best
fi
wait $BP && log "PASS build" || { log "FAIL build"; grep -E "error" "$OUT/build.log" | head; exit 1; }
PAIR=${PAIR:-.gpu/train/best}
T=$PAIR/target-q8_0.gguf
D=$PAIR/draft-q8_0.gguf
[ -f "$T" ] && [ -f "$D" ] || { log "no pair in $PAIR"; exit 1; }
run "$OUT/info.log" 30 "ember info" sh -c "$B/ember info $T && $B/ember info $D"

if [ "$PHASE" = train ] || [ "$PHASE" = all ]; then
	run "$OUT/spec.log" 120 "test_cuda_spec trained" $B/test_cuda_spec "$T" "$D"
	grep -E "FAIL|FATAL|spec tokens|steps," "$OUT/spec.log" | head -10
	for depth in 3 5 7 15; do
		run "$OUT/tau.log" 120 "tau cuda depth $depth" python3 tools/spec_tau.py --ember $B/ember --backend cuda \
			--target "$T" --draft "$D" --ids "$PAIR/heldout.u32" --n 64 --seed 12 --gen 64 --depth $depth --json
	done
	run "$OUT/tau.log" 120 "tau cuda depth 15 seed 31" python3 tools/spec_tau.py --ember $B/ember --backend cuda \
		--target "$T" --draft "$D" --ids "$PAIR/heldout.u32" --n 64 --seed 31 --gen 64 --depth 15 --json
	run "$OUT/tau.log" 120 "tau cuda untrained" python3 tools/spec_tau.py --ember $B/ember --backend cuda \
		--target "$T" --draft "$PAIR/draft-untrained-q8_0.gguf" --ids "$PAIR/heldout.u32" --n 64 --seed 12 --gen 64 --json
	tau_json "$OUT/tau.log"
	run "$OUT/bench.log" 120 "bench trained spec" $B/ember-bench --model "$T" --decode 128 --gen 128 --reps 7 --verify 16 --spec "$D"
	grep -E "^model|^draft|^decode|^verify|^spec" "$OUT/bench.log"
fi
[ "$PHASE" = embed ] || [ "$PHASE" = all ] || { cat "$SUMMARY"; exit 0; }

for sq in ${EMBED-qwen3-0.6b:q8_0 qwen3-8b:q8_0 qwen3-8b:q4_k_m}; do
	shape=${sq%%:*} quant=${sq##*:} ET=/tmp/embed-$shape-$quant.gguf ED=/tmp/embed-$shape-$quant-draft.gguf
	run "$OUT/embed.log" 240 "embed $shape $quant" $B/ember gen --embed "$T" --embed-draft "$D" --draft-out "$ED" \
		--shape "$shape" --quant "$quant" -o "$ET" || continue
	run "$OUT/tau-embed.log" 240 "tau cuda $shape $quant depth 15" python3 tools/spec_tau.py --ember $B/ember \
		--backend cuda --target "$ET" --draft "$ED" --ids "$PAIR/heldout.u32" --n 64 --seed 12 --gen 64 --json
	run "$OUT/bench-embed.log" 240 "bench $shape $quant spec" $B/ember-bench --model "$ET" --decode 128 --gen 128 \
		--reps 7 --verify 16 --spec "$ED"
	rm -f "$ET" "$ED"
done
tau_json "$OUT/tau-embed.log"
grep -E "^model|^spec" "$OUT/bench-embed.log" 2>/dev/null
cat "$SUMMARY"
