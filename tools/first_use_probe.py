#!/usr/bin/env python3
# first_use_probe.py EMBER MODEL LABEL [ENV=V ...]: what the first prefill of a new prompt length costs
# in one `ember serve` process (issue 13). Prefill-only requests (max_tokens 1) at PROBE_LENGTHS (a
# comma list; each length usually twice, different prompts), after one 16-token warm-up as abgate
# does; prints the harness TTFT and the engine's prefill_ms. ENV=V pairs go to the ember process
# (CUDA_MODULE_LOADING=EAGER, CUBLASLT_HEURISTICS_CACHE_CAPACITY=0, EMBER_PREFILL_CHUNK=256, ...).
# ci/gpu-first-use.sh runs the set of variants kernels/NOTES.md reports.
import json, os, random, subprocess, sys, time
ember, model, label = sys.argv[1], sys.argv[2], sys.argv[3]
env = dict(os.environ)
for kv in sys.argv[4:]:
    k, v = kv.split("=", 1); env[k] = v
lengths = [int(x) for x in env.get("PROBE_LENGTHS", "512,512,4096,4096,1000,1000,777,777,512").split(",")]
p = subprocess.Popen([ember, "serve", "--stdio", "--model", model, "--backend", "cuda", "--ctx", "8192"],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True, bufsize=1)
t0 = time.monotonic()
ready = json.loads(p.stdout.readline())
vocab = ready["model"]["vocab_size"]
print(f"== {label}: ready in {time.monotonic() - t0:.2f} s  env {' '.join(sys.argv[4:])}")
rng = random.Random(5)
def gen(n, max_tokens=1, i=[0]):
    i[0] += 1
    prompt = [rng.randrange(vocab) for _ in range(n)]
    t = time.monotonic()
    p.stdin.write(json.dumps({"op": "generate", "id": i[0], "prompt": prompt, "max_tokens": max_tokens}) + "\n")
    p.stdin.flush()
    first = None
    while True:
        o = json.loads(p.stdout.readline())
        if o.get("event") == "first":
            first = time.monotonic()
        elif o.get("event") == "done":
            return (first - t) * 1e3, o.get("stats", {}).get("prefill_ms")
        elif o.get("event") == "error":
            raise SystemExit(o)
gen(16, 4)  # process warm-up, as abgate does
for n in lengths:
    ttft, pre = gen(n)
    print(f"{label:10s} len {n:5d}  ttft {ttft:7.2f} ms  engine prefill {pre:7.2f} ms")
p.stdin.write('{"op":"quit"}\n'); p.stdin.flush(); p.wait(timeout=20)
