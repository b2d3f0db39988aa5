#!/usr/bin/env python3
"""test_ref.py - ember's CPU logits against the independent numpy reference (tools/ember_ref.py).

For the generated `tiny` model in q8_0, q4_k_m and bf16, runs the same 100 tokens through
`ember logits` (batched prefill in chunks of 32 tokens, and token by token) and through
ember_ref.py (float64), and asserts max |logit difference| <= 1e-3 (logits have a spread of about
7 and a range of about +-30, so this is ~1e-4 of their scale) and top-1 agreement = 1.0.
Exits 77 (CTest skip) when numpy or tools/ember_ref.py is missing.
usage: test_ref.py EMBER_BINARY TOOLS_DIR
"""
import os
import subprocess
import sys
import tempfile

TOLERANCE = 1e-3


def main():
    ember, tools = sys.argv[1], sys.argv[2]
    ref = os.path.join(tools, "ember_ref.py")
    try:
        import numpy as np
    except ImportError:
        print("SKIP: numpy is not installed for %s" % sys.executable)
        return 77
    if not os.path.exists(ref):
        print("SKIP: %s is missing" % ref)
        return 77
    tokens = [(i * 7919 + 13) % 2048 for i in range(100)]
    token_arg = ",".join(map(str, tokens))
    failures = 0
    with tempfile.TemporaryDirectory(prefix="ember-ref-") as tmp:
        for quant in ("q8_0", "q4_k_m", "bf16"):
            model = os.path.join(tmp, "tiny-%s.gguf" % quant)
            subprocess.run([ember, "gen", "--shape", "tiny", "--quant", quant, "--seed", "5", "-o", model],
                           check=True, stderr=subprocess.DEVNULL)
            ref_out = os.path.join(tmp, "ref-%s.npy" % quant)
            subprocess.run([sys.executable, ref, "logits", model, "--tokens", token_arg, "--out", ref_out],
                           check=True, stderr=subprocess.DEVNULL)
            want = np.load(ref_out).astype(np.float64)
            for mode in ("batched", "stepwise"):
                out = os.path.join(tmp, "ember-%s-%s.npy" % (quant, mode))
                cmd = [ember, "logits", "--model", model, "--tokens", token_arg, "--out", out,
                       "--threads", "2", "--batch", "32"]
                if mode == "stepwise":
                    cmd.append("--stepwise")
                subprocess.run(cmd, check=True)
                got = np.load(out).astype(np.float64)
                if got.shape != want.shape:
                    print("FAIL %s %s: shape %s vs reference %s" % (quant, mode, got.shape, want.shape))
                    failures += 1
                    continue
                err = np.abs(got - want)
                top1 = float((got.argmax(1) == want.argmax(1)).mean())
                print("%-7s %-8s max|err| %.3g  mean|err| %.3g  logit std %.2f  max|logit| %.1f  "
                      "top-1 agreement %.3f" % (quant, mode, err.max(), err.mean(), want.std(),
                                                np.abs(want).max(), top1))
                if not err.max() <= TOLERANCE or top1 != 1.0:
                    print("FAIL %s %s: tolerance %g, top-1 must be 1.0" % (quant, mode, TOLERANCE))
                    failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
