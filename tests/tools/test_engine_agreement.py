#!/usr/bin/env python3
"""The C engine against the independent numpy reference: for every weight type, `ember gen` writes
a tiny model, then (1) `ember logits` vs ember_ref.py logits on fixed tokens: max abs error and
top-1 agreement, (2) `ember serve --backend cpu` vs `ember_ref.py serve` through sut_compare.py:
top-1 >= 0.99, mean KL <= 1e-4, identical greedy tokens. Usage: test_engine_agreement.py EMBER."""

import json
import os
import shlex
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_testlib as L  # noqa: E402
from gguf_testlib import G  # noqa: E402
import ember_ref  # noqa: E402

if __name__ == "__main__" and len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["EMBER_BIN"] = os.path.abspath(sys.argv.pop(1))
EMBER = os.environ.get("EMBER_BIN", "")
QUANTS = ["f32", "f16", "bf16", "q8_0", "q6_k", "q4_k_m"]
LOGIT_REL_TOL = 1e-4      # max |C - ref| / max |ref|; fp32 accumulation measures about 2e-6


def q(args):
    return " ".join(shlex.quote(a) for a in args)


@unittest.skipUnless(EMBER and os.access(EMBER, os.X_OK), "set EMBER_BIN to the ember binary")
class EngineAgreementTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.models = {}
        for quant in QUANTS:
            path = os.path.join(cls.tmp.name, "tiny-%s.gguf" % quant)
            subprocess.run([EMBER, "gen", "--shape", "tiny", "--quant", quant, "--seed", "11",
                            "-o", path], check=True, capture_output=True, timeout=300)
            cls.models[quant] = path

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_logits(self):
        rng = np.random.default_rng(2)
        for quant, path in self.models.items():
            model = ember_ref.Qwen3Ref(G.GGUFReader(path))
            tokens = rng.integers(0, model.hp["n_vocab"], 40).tolist()
            out = os.path.join(self.tmp.name, "c-%s.npy" % quant)
            subprocess.run([EMBER, "logits", "--model", path, "--backend", "cpu", "--threads", "2",
                            "--tokens", ",".join(map(str, tokens)), "--out", out],
                           check=True, capture_output=True, timeout=300)
            got = np.load(out).astype(np.float64)
            ref = model.logits(tokens)
            self.assertEqual(got.shape, ref.shape, quant)
            rel = np.abs(got - ref).max() / np.abs(ref).max()
            top1 = float(np.mean(got.argmax(1) == ref.argmax(1)))
            print("%-7s logits: max|C-ref| %.3g (max|ref| %.3g, rel %.2g), top-1 %.4f"
                  % (quant, np.abs(got - ref).max(), np.abs(ref).max(), rel, top1),
                  file=sys.stderr)
            self.assertLess(rel, LOGIT_REL_TOL, quant)
            self.assertEqual(top1, 1.0, quant)

    def compare(self, quant, *extra):
        path = self.models[quant]
        ref = q([L.PYTHON, os.path.join(L.TOOLS, "ember_ref.py"), "serve", "--stdio", "--model",
                 path])
        cand = q([EMBER, "serve", "--stdio", "--backend", "cpu", "--threads", "2", "--model", path])
        out = os.path.join(self.tmp.name, "cmp-%s.json" % quant)
        res = subprocess.run([L.PYTHON, os.path.join(L.TOOLS, "sut_compare.py"), "--ref", ref,
                              "--cand", cand, "--min-top1", "0.99", "--max-kl", "1e-4",
                              "--json", out] + list(extra),
                             capture_output=True, text=True, timeout=600)
        sys.stderr.write("%s %s\n%s" % (quant, " ".join(extra), res.stdout))
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        with open(out) as f:
            return json.load(f)

    def test_sut_agreement(self):
        for quant in QUANTS:
            doc = self.compare(quant, "--prompts", "2", "--prompt-len", "48", "--greedy", "16",
                               "--greedy-strict", "--seed", "3")
            self.assertEqual(doc["result"]["positions"], 96)

    def test_untied_mixed_model_from_another_writer(self):
        # a GGUF written by the test's own writer (not ember gen): untied output head, every
        # weight type in one file, alignment 64, other rope theta and epsilon
        path = os.path.join(self.tmp.name, "mixed.gguf")
        L.make_qwen3(path, weight_type=G.Q4_K, shape=L.QUANT_SHAPE, tied=False, seed=21,
                     rope_theta=5e5, eps=1e-5, alignment=64,
                     mix={"ffn_down": G.Q6_K, "attn_v": G.Q8_0, "output.weight": G.Q6_K,
                          "token_embd": G.BF16, "attn_q.": G.F16, "ffn_up": G.F32})
        self.models["mixed"] = path
        doc = self.compare("mixed", "--prompts", "2", "--prompt-len", "48", "--greedy", "16",
                           "--greedy-strict", "--seed", "9")
        self.assertEqual(doc["result"]["positions"], 96)

    def test_sut_agreement_long_context(self):
        doc = self.compare("q4_k_m", "--prompts", "1", "--prompt-len", "600", "--first", "560",
                           "--seed", "5")
        self.assertEqual(doc["result"]["positions"], 40)


if __name__ == "__main__":
    unittest.main(verbosity=2)
