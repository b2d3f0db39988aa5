#!/usr/bin/env python3
"""test_embed.py - `ember gen --embed`: a small model and its DFlash draft written at the qwen3-0.6b
shape must compute the small model's function (engine/embed.h).

1. A generated `tiny` q8_0 target (head_dim 64) and a seeded q8_0 draft, embedded in qwen3-0.6b at
   q8_0: the quantized blocks are the small file's, so the target's logits over the small
   vocabulary and the draft's block logits agree to 1e-4 (float sums in another order), the
   logits of every id past the small vocabulary are exactly 0, every argmax is the same, and
   speculative decoding through the embedded pair gives the small pair's tokens and stats.
2. The shipped trained pair (guards/trained/, head_dim 64 into 128: every Q8_0 block is kept, as
   in 1), on 128 held-out tokens: the same argmax at every position and logits within 1e-4 of their
   range (measured: 6.2e-7 for the target, 3.3e-7 for the draft).
   The draft written alone (no -o) is byte-identical to the one written with its target.
3. What does not fit is refused: a model into a smaller shape, a draft without its output file.
Exits 77 (CTest skip) without numpy.
usage: test_embed.py EMBER_BINARY SOURCE_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL: " + what)


def run(*args, ok=True):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if ok and r.returncode != 0:
        raise SystemExit("FAIL: %s -> %d\n%s" % (" ".join(args), r.returncode, r.stderr[-2000:]))
    return r


def logits(np, ember, model, tokens, out, draft=None):
    args = [ember, "logits", "--model", model, "--tokens", ",".join(map(str, tokens)), "--threads", "2",
            "--out", out]
    if draft:
        args += ["--draft", draft]
    run(*args)
    return np.load(out)


def compare(np, small, big, what, abs_tol=None, rel_tol=None):
    v = small.shape[1]
    diff = float(np.abs(small - big[:, :v]).max())
    scale = float(np.abs(small).max())
    print("%s: %d positions, max |diff| %.3g (%.3g of the range), extra ids nonzero %d, argmax same %d/%d" % (
        what, small.shape[0], diff, diff / scale, np.count_nonzero(big[:, v:]),
        int((small.argmax(1) == big.argmax(1)).sum()), small.shape[0]))
    check(abs_tol is None or diff <= abs_tol, "%s: max |logit diff| %.3g over %.3g" % (what, diff, abs_tol or 0))
    check(rel_tol is None or diff <= rel_tol * scale, "%s: max |logit diff| %.3g over %.3g of %.3g" % (
        what, diff, rel_tol or 0, scale))
    check(np.count_nonzero(big[:, v:]) == 0, "%s: ids past the small vocabulary have nonzero logits" % what)
    check((small.argmax(1) == big.argmax(1)).all(), "%s: argmax differs" % what)


def serve(ember, model, draft, prompts, n):
    """plain and speculative answers of ember serve --stdio: {id: done event}"""
    lines = []
    for i, p in enumerate(prompts):
        lines.append(json.dumps({"op": "generate", "id": 2 * i + 1, "prompt": p, "max_tokens": n}))
        lines.append(json.dumps({"op": "generate", "id": 2 * i + 2, "prompt": p, "max_tokens": n, "spec": True}))
    lines.append('{"op":"quit"}')
    r = subprocess.run([ember, "serve", "--stdio", "--model", model, "--draft", draft, "--threads", "2",
                        "--backend", "cpu"], input="\n".join(lines) + "\n", capture_output=True, text=True)
    done = {}
    for line in r.stdout.splitlines():
        ev = json.loads(line)
        if ev.get("event") == "done":
            done[ev["id"]] = ev
    if len(done) != 2 * len(prompts):
        raise SystemExit("FAIL: serve %s: %s" % (model, r.stderr[-2000:]))
    return done


def main():
    ember, root = sys.argv[1], sys.argv[2]
    try:
        import numpy as np
    except ImportError:
        print("SKIP: numpy is not installed for %s" % sys.executable)
        return 77
    with tempfile.TemporaryDirectory(prefix="ember-embed-") as d:
        p = lambda name: os.path.join(d, name)
        run(ember, "gen", "--shape", "tiny", "--quant", "q8_0", "--seed", "1", "-o", p("tiny.gguf"))
        run(ember, "gen", "--draft-for", "tiny", "--layers", "2", "--block", "8", "--seed", "3", "--quant", "q8_0",
            "-o", p("tiny-draft.gguf"))
        run(ember, "gen", "--embed", p("tiny.gguf"), "--embed-draft", p("tiny-draft.gguf"), "--draft-out",
            p("big-draft.gguf"), "--shape", "qwen3-0.6b", "--quant", "q8_0", "-o", p("big.gguf"))
        info = run(ember, "info", p("big.gguf")).stdout
        check("n_embd 1024, n_layer 28, n_head 16, n_head_kv 8, head_dim 128" in info and "rope_theta 1e+12" in info,
              "ember info of the embedded target: " + info[-600:])
        rng = np.random.default_rng(5)
        tokens = rng.integers(0, 2048, 48).tolist()
        compare(np, logits(np, ember, p("tiny.gguf"), tokens, p("a.npy")),
                logits(np, ember, p("big.gguf"), tokens, p("b.npy")), "tiny target in qwen3-0.6b", abs_tol=1e-4)
        compare(np, logits(np, ember, p("tiny.gguf"), tokens, p("da.npy"), p("tiny-draft.gguf")),
                logits(np, ember, p("big.gguf"), tokens, p("db.npy"), p("big-draft.gguf")),
                "tiny draft in qwen3-0.6b", abs_tol=1e-4)
        prompts = [rng.integers(0, 2048, n).tolist() for n in (12, 40)]
        small = serve(ember, p("tiny.gguf"), p("tiny-draft.gguf"), prompts, 24)
        big = serve(ember, p("big.gguf"), p("big-draft.gguf"), prompts, 24)
        for k in small:
            check(small[k]["tokens"] == big[k]["tokens"], "answer %d: embedded tokens differ" % k)
            if k % 2 == 0:
                s, b = small[k]["stats"], big[k]["stats"]
                check((s["target_steps"], s["accepted"]) == (b["target_steps"], b["accepted"]),
                      "answer %d: spec stats %s vs %s" % (k, s, b))
                check(big[k]["tokens"] == big[k - 1]["tokens"], "answer %d: embedded spec != plain" % k)
        for path in ("big.gguf", "big-draft.gguf"):
            os.unlink(p(path))

        g = os.path.join(root, "guards", "trained")
        run(ember, "gen", "--embed", os.path.join(g, "target-q8_0.gguf"), "--embed-draft",
            os.path.join(g, "draft-q8_0.gguf"), "--draft-out", p("tdraft.gguf"), "--shape", "qwen3-0.6b", "--quant",
            "q8_0", "-o", p("trained.gguf"))
        # the draft alone (no -o: what a suite's models[].draft.generate runs) is the same file
        run(ember, "gen", "--embed", os.path.join(g, "target-q8_0.gguf"), "--embed-draft",
            os.path.join(g, "draft-q8_0.gguf"), "--draft-out", p("tdraft-only.gguf"), "--shape", "qwen3-0.6b",
            "--quant", "q8_0")
        with open(p("tdraft.gguf"), "rb") as f1, open(p("tdraft-only.gguf"), "rb") as f2:
            check(f1.read() == f2.read(), "the draft written alone differs from the one written with its target")
        os.unlink(p("tdraft-only.gguf"))
        held = np.fromfile(os.path.join(g, "heldout.u32"), dtype="<u4")[1000:1128].tolist()
        compare(np, logits(np, ember, os.path.join(g, "target-q8_0.gguf"), held, p("ta.npy")),
                logits(np, ember, p("trained.gguf"), held, p("tb.npy")), "trained target in qwen3-0.6b", rel_tol=1e-4)
        compare(np, logits(np, ember, os.path.join(g, "target-q8_0.gguf"), held, p("tda.npy"),
                           os.path.join(g, "draft-q8_0.gguf")),
                logits(np, ember, p("trained.gguf"), held, p("tdb.npy"), p("tdraft.gguf")),
                "trained draft in qwen3-0.6b", rel_tol=1e-4)

        r = run(ember, "gen", "--embed", p("trained.gguf"), "--shape", "tiny", "--quant", "q8_0", "-o", p("x.gguf"),
                ok=False)
        check(r.returncode == 1 and "does not fit into tiny" in r.stderr, "a bigger model into tiny: %d %s" % (
            r.returncode, r.stderr))
        check(not os.path.exists(p("x.gguf")), "a refused embed left its output file")
        r = run(ember, "gen", "--embed", p("tiny.gguf"), "--embed-draft", p("tiny-draft.gguf"), "--shape",
                "qwen3-0.6b", "--quant", "q8_0", "-o", p("y.gguf"), ok=False)
        check(r.returncode == 2 and "--embed-draft goes with --draft-out" in r.stderr, "draft without --draft-out: %d %s"
              % (r.returncode, r.stderr))
        r = run(ember, "gen", "--embed", p("tiny.gguf"), "--shape", "qwen3-0.6b", "--quant", "q3_x", "-o", p("z.gguf"),
                ok=False)
        check(r.returncode == 1 and "unknown quant" in r.stderr, "bad quant: %d %s" % (r.returncode, r.stderr))
    if failures:
        print("test_embed: %d check(s) failed" % failures)
        return 1
    print("test_embed: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
