#!/usr/bin/env python3
"""gpu-process-timing.py - what one SUT process of a suite costs: starts a SUT command, times its
ready line (model load), one warm-up request, then one generate per context as abgate's measurement
loop does (max_tokens = gen for decode contexts, 1 for prefill-only ones), and prints each step.
Used to estimate a full suite's time to verdict from one process's figures.

  gpu-process-timing.py --decode 128,512,4096,16384,32768 --prefill 512,4096,16384,32768 --gen 128 \\
      -- ember serve --stdio --model M --backend cuda --ctx 33024
"""
import argparse
import json
import random
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--decode", default="")
    ap.add_argument("--prefill", default="")
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    dec = {int(x) for x in a.decode.split(",") if x}
    pre = {int(x) for x in a.prefill.split(",") if x}
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    ready = json.loads(p.stdout.readline())
    vocab = ready["model"]["vocab_size"]
    print(f"ready after {time.monotonic() - t0:.2f} s ({ready.get('device')})", flush=True)
    rng = random.Random(1)

    def gen(n_prompt, n_gen, rid):
        prompt = [rng.randrange(vocab) for _ in range(n_prompt)]
        t = time.monotonic()
        p.stdin.write(json.dumps({"op": "generate", "id": rid, "prompt": prompt, "max_tokens": n_gen}) + "\n")
        first = json.loads(p.stdout.readline())
        t_first = time.monotonic()
        done = json.loads(p.stdout.readline())
        t_done = time.monotonic()
        assert first.get("event") == "first" and done.get("event") == "done", (first, done)
        return t_first - t, t_done - t_first

    ttft, dec_s = gen(min(dec | pre), 4, 0)
    print(f"warm-up {ttft + dec_s:.2f} s", flush=True)
    for i, ctx in enumerate(sorted(dec | pre)):
        n = a.gen if ctx in dec else 1
        ttft, dec_s = gen(ctx, n, i + 1)
        rate = f", decode {(n - 1) / dec_s:.0f} tok/s" if n > 1 else ""
        print(f"ctx {ctx}: prefill {ctx / ttft:.0f} tok/s ({ttft:.2f} s){rate}; request {ttft + dec_s:.2f} s",
              flush=True)
    p.stdin.write('{"op":"quit"}\n')
    p.stdin.flush()
    p.wait(timeout=60)
    print(f"process total {time.monotonic() - t0:.2f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
