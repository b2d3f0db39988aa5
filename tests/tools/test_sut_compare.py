#!/usr/bin/env python3
"""Self-tests of tools/sut_compare.py: identical SUTs agree exactly; a quantized candidate gives a
small positive KL; the KL formula with its tail bucket against a direct full-vocabulary KL;
thresholds turn into exit status 1; crashed, silent, hung or protocol-breaking SUTs into 2."""

import json
import math
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
import sut_compare  # noqa: E402

COMPARE = os.path.join(L.TOOLS, "sut_compare.py")
FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_sut.py")


def ref_cmd(model):
    return " ".join(shlex.quote(a) for a in [L.PYTHON, os.path.join(L.TOOLS, "ember_ref.py"),
                                              "serve", "--stdio", "--model", model])


def fake_cmd(mode):
    return json.dumps([L.PYTHON, FAKE, mode])


def load_json(path):
    with open(path) as f:
        return json.load(f)


def run(*args, timeout=300):
    return subprocess.run([L.PYTHON, COMPARE] + list(args), capture_output=True, text=True,
                          timeout=timeout)


class SutCompareTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.f32 = L.make_qwen3(os.path.join(d, "f32.gguf"), shape=L.QUANT_SHAPE, seed=5)
        cls.q8 = L.make_qwen3(os.path.join(d, "q8.gguf"), weight_type=G.Q8_0,
                              shape=L.QUANT_SHAPE, seed=5)
        cls.other = L.make_qwen3(os.path.join(d, "other.gguf"), shape=L.QUANT_SHAPE, seed=6)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_identical_suts(self):
        out = os.path.join(self.tmp.name, "same.json")
        res = run("--ref", ref_cmd(self.f32), "--cand", ref_cmd(self.f32), "--prompts", "3",
                  "--prompt-len", "24", "--greedy", "8", "--greedy-strict", "--json", out,
                  "--min-top1", "1.0", "--max-kl", "1e-12")
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.assertIn("positions scored: 72", res.stdout)
        doc = load_json(out)
        self.assertEqual(doc["schema"], "ember.sut_compare/1")
        self.assertTrue(doc["pass"])
        r = doc["result"]
        self.assertEqual(r["positions"], 72)
        self.assertEqual(r["top1_agree"], 1.0)
        self.assertEqual(r["kl_max"], 0.0)
        self.assertEqual(doc["greedy"]["identical"], 3)
        self.assertEqual(doc["reference"]["ready"]["engine"], "ember-ref-numpy")
        self.assertEqual(len(r["prompts"]), 3)

    def test_quantized_candidate_and_thresholds(self):
        out = os.path.join(self.tmp.name, "q8.json")
        args = ["--ref", ref_cmd(self.f32), "--cand", ref_cmd(self.q8), "--prompts", "3",
                "--prompt-len", "32", "--first", "8", "--top-k", "16", "--json", out]
        res = run(*args)
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        r = load_json(out)["result"]
        self.assertEqual(r["positions"], 3 * 24)
        self.assertGreater(r["kl_mean"], 1e-6)
        self.assertLess(r["kl_mean"], 0.05)
        self.assertGreater(r["top1_agree"], 0.9)
        self.assertLessEqual(r["kl_p99"], r["kl_max"])
        lo, hi = r["top1_wilson95"]
        self.assertLessEqual(lo, r["top1_agree"])
        self.assertGreaterEqual(hi, r["top1_agree"])
        # the same run with a KL threshold below what it measures fails with status 1
        res = run(*(args + ["--max-kl", "1e-9"]))
        self.assertEqual(res.returncode, 1, res.stdout + res.stderr)
        self.assertIn("FAIL: mean KL", res.stdout)
        # a different model altogether: far below any sane top-1 gate
        res = run("--ref", ref_cmd(self.f32), "--cand", ref_cmd(self.other), "--prompts", "2",
                  "--prompt-len", "32", "--min-top1", "0.9")
        self.assertEqual(res.returncode, 1, res.stdout + res.stderr)
        self.assertIn("FAIL: top-1 agreement", res.stdout)

    def test_kl_with_tail_bucket(self):
        # direct full-vocabulary KL between the f32 and q8 models vs the top-k + tail estimate
        tokens = [3, 9, 27, 81, 243, 20, 60]
        lp = []
        for path in (self.f32, self.q8):
            logits = ember_ref.Qwen3Ref(G.GGUFReader(path)).logits(tokens)
            m = logits.max(1, keepdims=True)
            lp.append(logits - m - np.log(np.exp(logits - m).sum(1, keepdims=True)))
        p_lp, q_lp = lp
        for pos in range(len(tokens)):
            full = float(np.sum(np.exp(p_lp[pos]) * (p_lp[pos] - q_lp[pos])))
            top = np.argsort(-p_lp[pos])[:300]               # the whole vocabulary: no tail
            est = sut_compare.position_kl([[int(i), p_lp[pos, i]] for i in top],
                                          [q_lp[pos, i] for i in top])
            self.assertAlmostEqual(est, full, delta=1e-12 + 1e-9 * full)
            top = np.argsort(-p_lp[pos])[:8]                 # 8 + tail: a lower bound (log-sum)
            est8 = sut_compare.position_kl([[int(i), p_lp[pos, i]] for i in top],
                                           [q_lp[pos, i] for i in top])
            self.assertLessEqual(est8, full + 1e-12)
            self.assertGreaterEqual(est8, -1e-12)
        # a hand-made case: p = (0.5, 0.25 | tail 0.25), q = (0.25, 0.25 | tail 0.5)
        kl = sut_compare.position_kl([[0, math.log(0.5)], [1, math.log(0.25)]],
                                     [math.log(0.25), math.log(0.25)])
        self.assertAlmostEqual(kl, 0.5 * math.log(2) + 0.25 * math.log(0.5))

    def test_stats_helpers(self):
        lo, hi = sut_compare.wilson(95, 100)
        self.assertAlmostEqual(lo, 0.8882, places=3)
        self.assertAlmostEqual(hi, 0.9785, places=3)
        self.assertEqual(sut_compare.wilson(0, 0), [0.0, 1.0])
        ci = sut_compare.bootstrap_mean_ci(np.arange(100.0), seed=1)
        self.assertLess(ci[0], 49.5)
        self.assertGreater(ci[1], 49.5)
        self.assertEqual(sut_compare.parse_command('["a", "b c"]'), ["a", "b c"])
        self.assertEqual(sut_compare.parse_command("a 'b c'"), ["a", "b c"])

    def test_token_file(self):
        toks = os.path.join(self.tmp.name, "tokens.txt")
        with open(toks, "w") as f:
            f.write(" ".join(str(i % 300) for i in range(1000)))
        out = os.path.join(self.tmp.name, "tf.json")
        res = run("--ref", ref_cmd(self.f32), "--cand", ref_cmd(self.f32), "--tokens-file", toks,
                  "--prompts", "2", "--prompt-len", "16", "--seed", "4", "--json", out)
        self.assertEqual(res.returncode, 0, res.stderr)
        r = load_json(out)["result"]
        for pp, prompt in zip(r["per_prompt"], r["prompts"]):
            self.assertEqual(prompt, [i % 300 for i in range(pp["start"], pp["start"] + 16)])
        bad = os.path.join(self.tmp.name, "bad.txt")
        with open(bad, "w") as f:
            f.write("1 2 999")
        res = run("--ref", ref_cmd(self.f32), "--cand", ref_cmd(self.f32), "--tokens-file", bad,
                  "--prompt-len", "2")
        self.assertEqual(res.returncode, 2)
        self.assertIn("outside the vocabulary", res.stderr)

    def test_broken_suts(self):
        good = fake_cmd("uniform")
        cases = [("crash", "exited with status 3(.|\n)*simulated crash"),
                 ("garbage", "not a JSON line"),
                 ("noready", "not a JSON line|ready"),
                 ("wrongid", "answer for id 'other'"),
                 ("shortids", "requested ids")]
        for mode, pattern in cases:
            res = run("--ref", good, "--cand", fake_cmd(mode), "--prompts", "1",
                      "--prompt-len", "4", "--top-k", "4", timeout=60)
            self.assertEqual(res.returncode, 2, mode + ": " + res.stderr)
            self.assertRegex(res.stderr, pattern)
        res = run("--ref", good, "--cand", fake_cmd("hang"), "--prompts", "1", "--prompt-len",
                  "4", "--timeout", "2", timeout=60)
        self.assertEqual(res.returncode, 2)
        self.assertIn("no answer within", res.stderr)
        res = run("--ref", good, "--cand", "/nonexistent/sut", timeout=60)
        self.assertEqual(res.returncode, 2)
        self.assertIn("cannot start", res.stderr)
        # the uniform fake against itself is a valid comparison
        res = run("--ref", good, "--cand", good, "--prompts", "1", "--prompt-len", "4",
                  "--top-k", "4", "--greedy", "3", timeout=60)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("greedy 3 tokens: 1/1 prompts identical", res.stdout)
        # different vocabularies cannot be compared
        res = run("--ref", good, "--cand", ref_cmd(L.make_qwen3(
            os.path.join(self.tmp.name, "v320.gguf"))), timeout=60)
        self.assertEqual(res.returncode, 2)
        self.assertIn("vocabulary sizes differ", res.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
