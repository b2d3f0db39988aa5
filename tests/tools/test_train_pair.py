#!/usr/bin/env python3
"""test_train_pair.py - tools/train_pair.py end to end on the CPU (preset smoke: gpu64b's head_dim
64 and 4/2 GQA heads at a tiny size, ~45 s on 2 cores), then its files through ember:
  - `ember info` loads the target (arch qwen3) and both drafts (arch dflash) with the preset's heads;
  - `ember logits` on probe.npz's held-out prompt equals the logits of the models train_pair.py had in
    memory (the target at every position, the draft's block): max |diff| <= LOGIT_TOL, and the same
    argmax wherever the top-2 margin is over 2 * LOGIT_TOL;
  - tools/spec_tau.py on the held-out prompts train_pair.py evaluated (--seed = train seed + 11):
    spec == plain with the trained and the untrained draft (its exit status), and ember's tau equals
    log.json's prediction (eval.*.tau) within TAU_TOL, trained at depths 3/5/7/15, untrained at 15.
The smoke target is undertrained (its greedy text soon repeats one token, so tau is near its maximum);
the logits comparison is what sees a layout or math difference between the two sides (tried: GQA
heads paired in another order, or a draft that sees its anchor's state, fail it; tau misses the latter).
Exits 77 (CTest skip) when this python lacks torch, sentencepiece or numpy, or there is no corpus
(/usr/share/info/*.info*.gz), unless ABGATE_REQUIRE_TORCH=1 (ci/test.sh sets it): then it fails.
usage: test_train_pair.py EMBER_BINARY
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
SEED = 1                    # train seed; train_pair.py cuts its held-out prompts with seed + 11
EVAL_PROMPTS, PROMPT_LEN, EVAL_GEN = 8, 64, 32
LOGIT_TOL = 1e-3            # same Q8_0 weights, float32 on both sides: measured <= 3e-6 (logit std ~2)
TAU_TOL = 1e-3              # 4-decimal roundings of one greedy replay: equal at every depth, seeds 1-4;
                            # only a target/draft top-2 logit tie within ~1e-5 could make them differ


def missing_dependency():
    for module in ("numpy", "torch", "sentencepiece"):
        try:
            __import__(module)
        except ImportError:
            return "%s is not installed for %s (Debian: python3-%s)" % (module, sys.executable, module)
    if not glob.glob("/usr/share/info/*.info*.gz"):
        return "no corpus: /usr/share/info/*.info*.gz is empty"
    return None


def run(args, **kw):
    return subprocess.run(args, text=True, **kw)


def main():
    ember = os.path.abspath(sys.argv[1])
    missing = missing_dependency()
    if missing:
        if os.environ.get("ABGATE_REQUIRE_TORCH") == "1":
            print("FAIL: %s, and ABGATE_REQUIRE_TORCH=1" % missing)
            return 1
        print("SKIP: %s" % missing)
        return 77
    import numpy as np

    out = tempfile.mkdtemp(prefix="ember-train-pair-")
    failures = []

    def check(ok, what):
        print("%s %s" % ("ok  " if ok else "FAIL", what), flush=True)
        if not ok:
            failures.append(what)

    t0 = time.time()
    rc = run([sys.executable, os.path.join(TOOLS, "train_pair.py"), "all", "--out", out, "--preset", "smoke",
              "--seed", str(SEED), "--eval-prompts", str(EVAL_PROMPTS), "--eval-prompt-len", str(PROMPT_LEN),
              "--eval-gen", str(EVAL_GEN), "--threads", "1", "--cpu"]).returncode
    print("train_pair.py all --preset smoke: exit %d in %.1f s" % (rc, time.time() - t0))
    if rc != 0:
        print("FAIL: train_pair.py exited %d; its files are in %s" % (rc, out))
        return 1
    log = json.load(open(os.path.join(out, "log.json")))
    hp = log["hyper"]
    check(hp["head_dim"] == 64 and hp["n_head_kv"] < hp["n_head"], "preset smoke has head_dim 64 and GQA (%d/%d heads)"
          % (hp["n_head"], hp["n_head_kv"]))
    target = os.path.join(out, "target-q8_0.gguf")
    drafts = {"trained": os.path.join(out, "draft-q8_0.gguf"),
              "untrained": os.path.join(out, "draft-untrained-q8_0.gguf")}

    heads = "n_head %d, n_head_kv %d, head_dim %d" % (hp["n_head"], hp["n_head_kv"], hp["head_dim"])
    for path, arch in [(target, "arch qwen3"), (drafts["trained"], "arch dflash"),
                       (drafts["untrained"], "arch dflash")]:
        info = run([ember, "info", path], capture_output=True)
        check(info.returncode == 0 and arch in info.stdout and heads in info.stdout,
              "ember info %s: exit %d, %s, %s" % (os.path.basename(path), info.returncode, arch, heads))
        if info.returncode != 0:
            print(info.stdout[-2000:] + info.stderr[-2000:])

    probe = np.load(os.path.join(out, "probe.npz"))
    tokens = ",".join(str(int(t)) for t in probe["tokens"])
    for name, extra, want in [("target", [], probe["target_logits"]),
                              ("draft", ["--draft", drafts["trained"]], probe["draft_logits"])]:
        got_path = os.path.join(out, "ember-%s-logits.npy" % name)
        rc = run([ember, "logits", "--model", target, "--tokens", tokens, "--out", got_path, "--threads", "2"]
                 + extra).returncode
        got = np.load(got_path) if rc == 0 else np.zeros((0,))
        if rc != 0 or got.shape != want.shape:
            check(False, "ember logits (%s): exit %d, shape %s, want %s" % (name, rc, got.shape, want.shape))
            continue
        err = float(np.abs(got.astype(np.float64) - want).max())
        top2 = np.sort(want, -1)[:, -2:]
        clear = top2[:, 1] - top2[:, 0] > 2 * LOGIT_TOL          # rows whose argmax the tolerance cannot flip
        same = bool((got.argmax(-1) == want.argmax(-1))[clear].all())
        check(err <= LOGIT_TOL and same, "ember logits (%s) vs train_pair.py %s: max|diff| %.3g (<= %g), logit std "
              "%.2f, argmax equal %s (%d of %d rows with a top-2 margin > %g)"
              % (name, want.shape, err, LOGIT_TOL, float(want.std()), same, int(clear.sum()), len(clear),
                 2 * LOGIT_TOL))

    for name, depths in [("trained", (3, 5, 7, 15)), ("untrained", (15,))]:
        for depth in depths:
            r = run([sys.executable, os.path.join(TOOLS, "spec_tau.py"), "--ember", ember, "--target", target,
                     "--draft", drafts[name], "--ids", os.path.join(out, "heldout.u32"), "--n", str(EVAL_PROMPTS),
                     "--prompt-len", str(PROMPT_LEN), "--gen", str(EVAL_GEN), "--seed", str(SEED + 11),
                     "--depth", str(depth), "--json"], capture_output=True)
            if r.returncode not in (0, 1) or not r.stdout.strip():
                check(False, "spec_tau.py %s depth %d: exit %d\n%s" % (name, depth, r.returncode, r.stderr[-2000:]))
                continue
            got = json.loads(r.stdout)
            want = log["eval"][name]["tau"][str(depth)]
            check(r.returncode == 0 and got["spec_mismatches"] == 0,
                  "spec_tau.py %s depth %d: spec == plain on %d prompts (exit %d, %d differ)"
                  % (name, depth, got["prompts"], r.returncode, got["spec_mismatches"]))
            check(abs(got["tau"] - want) <= TAU_TOL, "tau %s depth %d: ember %.4f, train_pair.py %.4f (|diff| <= %g)"
                  % (name, depth, got["tau"], want, TAU_TOL))

    if failures:
        print("%d check(s) failed; the run's files are in %s" % (len(failures), out))
        return 1
    shutil.rmtree(out)
    print("all checks passed in %.1f s" % (time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
