#!/usr/bin/env python3
"""spec_tau.py - tau of a target/draft pair as ember measures it, on held-out prompts.

Starts `ember serve --stdio --model T --draft D`, sends every prompt twice (plain, then
"spec": true), checks the speculative tokens equal the plain ones, and prints per prompt and
overall tau = (tokens - 1) / target_steps (pooled over prompts: total tokens - 1 per prompt over
total target steps, as train_pair.py eval reports it). Prompts: windows cut from a raw
little-endian uint32 id file the way `train_pair.py eval` cuts them (same --seed), or --prompts-json.

  spec_tau.py --ember build/bin/ember --target T.gguf --draft D.gguf --ids heldout.u32 [--n 16]
              [--prompt-len 64] [--gen 64] [--depth 15] [--seed 5] [--min-tau X] [--backend cpu|cuda]
Exit status 1 when a spec answer differs from plain, or tau < --min-tau.
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np


def heldout_prompts(ids, n, plen, seed):
    """train_pair.py heldout_prompts, without torch."""
    rng = np.random.default_rng(seed)
    starts = rng.choice(np.arange(0, len(ids) - plen, plen), n, replace=False)
    return [ids[s:s + plen].tolist() for s in starts]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ember", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--ids", help="raw little-endian uint32 token ids")
    ap.add_argument("--prompts-json", help="a JSON array of prompts (arrays of ids)")
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--depth", type=int, default=0, help="EMBER_SPEC_DEPTH (0: block size - 1)")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--min-tau", type=float, default=0.0)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args()
    if a.prompts_json:
        prompts = json.load(open(a.prompts_json))
    else:
        prompts = heldout_prompts(np.fromfile(a.ids, dtype="<u4").astype(np.int64), a.n, a.prompt_len, a.seed)
    env = dict(os.environ)
    if a.depth:
        env["EMBER_SPEC_DEPTH"] = str(a.depth)
    proc = subprocess.Popen([a.ember, "serve", "--stdio", "--model", a.target, "--draft", a.draft, "--backend", a.backend,
                             "--threads", str(a.threads)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=env, text=True)
    ready = json.loads(proc.stdout.readline())
    if not ready.get("spec"):
        print("error: ember's ready line has no spec: %s" % ready, file=sys.stderr)
        return 1

    def ask(req):
        proc.stdin.write(json.dumps(req) + "\n")
        proc.stdin.flush()
        while True:
            ev = json.loads(proc.stdout.readline())
            if ev.get("event") == "done":
                return ev
            if ev.get("event") == "error":
                raise SystemExit("error from ember: %s" % ev.get("message"))

    mismatches, steps, tokens, per, ms = 0, 0, 0, [], [0.0, 0.0]
    for i, p in enumerate(prompts):
        plain = ask({"op": "generate", "id": "p%d" % i, "prompt": p, "max_tokens": a.gen})
        spec = ask({"op": "generate", "id": "s%d" % i, "prompt": p, "max_tokens": a.gen, "spec": True})
        if plain["tokens"] != spec["tokens"]:
            mismatches += 1
        ms[0] += plain["stats"]["decode_ms"]
        ms[1] += spec["stats"]["decode_ms"]
        st = spec["stats"]["target_steps"]
        steps += st
        tokens += len(spec["tokens"]) - 1
        per.append(round((len(spec["tokens"]) - 1) / st, 4))
    ask_quit = json.dumps({"op": "quit", "id": "q"}) + "\n"
    proc.stdin.write(ask_quit)
    proc.stdin.close()
    proc.wait(timeout=30)
    tau = tokens / steps if steps else 0.0
    out = {"target": os.path.basename(a.target), "draft": os.path.basename(a.draft), "prompts": len(prompts), "seed": a.seed, "gen": a.gen, "depth": a.depth or ready["spec"].get("block_size", 16) - 1,
           "tau": round(tau, 4), "tau_per_prompt": per,
           "decode_ms_plain": round(ms[0], 2), "decode_ms_spec": round(ms[1], 2),
           "spec_speedup": round(ms[0] / ms[1], 3) if ms[1] > 0 else None, "spec_mismatches": mismatches}
    if a.json:
        print(json.dumps(out))
    else:
        print("tau %.4f over %d prompts (depth %s, gen %d), spec != plain in %d, decode speedup %sx; per prompt %s"
              % (tau, len(prompts), out["depth"], a.gen, mismatches, out["spec_speedup"], per))
    return 1 if mismatches or tau < a.min_tau else 0


if __name__ == "__main__":
    sys.exit(main())
