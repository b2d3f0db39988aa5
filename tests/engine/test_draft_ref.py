#!/usr/bin/env python3
"""test_draft_ref.py - ember's CPU DFlash draft forward against the independent numpy reference
(tools/ember_ref.py draft-logits).

For a generated `tiny` q8_0 target and seeded drafts (f16 and q8_0; 2 layers reading 2 target
layers, block 8; 1 layer reading 3 target layers, block 5), runs the context through the target,
then one draft block, in ember (`ember logits --draft`, whose context goes in as a prefill plus a
window that is committed and cut back, so the rollback path is covered) and in ember_ref.py
(float64), and asserts max |logit difference| <= 1e-3 over the block's slots and equal argmax.
Exits 77 (CTest skip) when numpy or tools/ember_ref.py is missing.
usage: test_draft_ref.py EMBER_BINARY TOOLS_DIR
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
    failures = 0
    with tempfile.TemporaryDirectory(prefix="ember-draft-ref-") as tmp:
        target = os.path.join(tmp, "tiny-q8_0.gguf")
        subprocess.run([ember, "gen", "--shape", "tiny", "--quant", "q8_0", "--seed", "5", "-o", target],
                       check=True, stderr=subprocess.DEVNULL)
        cases = [("f16", 2, 2, 8, 40), ("q8_0", 2, 2, 8, 70), ("f16", 1, 3, 5, 9)]
        for quant, layers, target_layers, block, n_tok in cases:
            draft = os.path.join(tmp, "draft-%s-%d-%d.gguf" % (quant, layers, block))
            subprocess.run([ember, "gen", "--draft-for", "tiny", "--layers", str(layers), "--target-layers",
                            str(target_layers), "--block", str(block), "--quant", quant, "--seed", "9",
                            "-o", draft], check=True, stderr=subprocess.DEVNULL)
            tokens = ",".join(str((i * 7919 + 13 * block) % 2048) for i in range(n_tok))
            want_path, got_path = os.path.join(tmp, "want.npy"), os.path.join(tmp, "got.npy")
            subprocess.run([sys.executable, ref, "draft-logits", target, draft, "--tokens", tokens,
                            "--out", want_path], check=True, stderr=subprocess.DEVNULL)
            subprocess.run([ember, "logits", "--model", target, "--draft", draft, "--tokens", tokens,
                            "--out", got_path, "--threads", "2"], check=True)
            want, got = np.load(want_path).astype(np.float64), np.load(got_path).astype(np.float64)
            label = "%s draft, %d layers, %d target layers, block %d, %d tokens" % (quant, layers,
                                                                                   target_layers, block, n_tok)
            if got.shape != want.shape or want.shape[0] != block - 1:
                print("FAIL %s: shape %s vs reference %s" % (label, got.shape, want.shape))
                failures += 1
                continue
            err = np.abs(got - want)
            same = bool((got.argmax(1) == want.argmax(1)).all())
            print("%-52s max|err| %.3g  logit std %.2f  argmax equal %s" % (label, err.max(), want.std(), same))
            if not err.max() <= TOLERANCE or not same:
                print("FAIL %s: tolerance %g, argmax must be equal" % (label, TOLERANCE))
                failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
