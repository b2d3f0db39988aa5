#!/usr/bin/env python3
"""Self-tests of tools/ember_ref.py: the vectorised forward against a deliberately naive one
(token by token, head by head, RoPE as complex rotation), prefill vs incremental decode, tied and
untied heads, every weight type, the logits CLI, and the Contract-1 server (ready line, generate
determinism, score normalisation and consistency, error events), and how sut_protocol puts
log-probs on the wire (-inf, NaN, a failing backend)."""

import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_testlib as L  # noqa: E402
from gguf_testlib import G  # noqa: E402
import ember_ref  # noqa: E402

EMBER_REF = os.path.join(L.TOOLS, "ember_ref.py")


def naive_logits(reader, tokens):
    """Qwen3 forward written the slow, obvious way in float64, from the definition."""
    kv = reader.kv
    H = int(kv["qwen3.attention.head_count"])
    KVH = int(kv["qwen3.attention.head_count_kv"])
    D = int(kv["qwen3.attention.key_length"])
    eps = float(kv["qwen3.attention.layer_norm_rms_epsilon"])
    theta = float(kv["qwen3.rope.freq_base"])
    n_layer = int(kv["qwen3.block_count"])

    def W(name):
        return reader.dequantize(name).astype(np.float64)

    def norm(v, w):
        return v / math.sqrt(sum(float(a) * float(a) for a in v) / len(v) + eps) * w

    def rope(vec, pos):
        half = D // 2
        z = vec[:half] + 1j * vec[half:]                       # pair (i, i + D/2) as a complex
        z = z * np.exp(1j * pos * theta ** (-2.0 * np.arange(half) / D))
        return np.concatenate([z.real, z.imag])

    emb = W("token_embd.weight")
    out_w = W("output.weight") if "output.weight" in reader.tensor_map else emb
    layers = [{k: W("blk.%d.%s.weight" % (i, k)) for k in (
        "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm",
        "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")} for i in range(n_layer)]
    keys = [[] for _ in range(n_layer)]
    vals = [[] for _ in range(n_layer)]
    logits = []
    for pos, tok in enumerate(tokens):
        x = emb[tok].copy()
        for li, Lw in enumerate(layers):
            h = norm(x, Lw["attn_norm"])
            q = Lw["attn_q"].dot(h)
            k = Lw["attn_k"].dot(h)
            v = Lw["attn_v"].dot(h)
            keys[li].append([rope(norm(k[j * D:(j + 1) * D], Lw["attn_k_norm"]), pos)
                             for j in range(KVH)])
            vals[li].append([v[j * D:(j + 1) * D] for j in range(KVH)])
            heads = []
            for hh in range(H):
                qh = rope(norm(q[hh * D:(hh + 1) * D], Lw["attn_q_norm"]), pos)
                g = hh // (H // KVH)
                scores = [float(qh.dot(keys[li][s][g])) / math.sqrt(D) for s in range(pos + 1)]
                mx = max(scores)
                wts = [math.exp(s - mx) for s in scores]
                tot = sum(wts)
                heads.append(sum(wts[s] / tot * vals[li][s][g] for s in range(pos + 1)))
            x = x + Lw["attn_output"].dot(np.concatenate(heads))
            h = norm(x, Lw["ffn_norm"])
            gate = Lw["ffn_gate"].dot(h)
            up = Lw["ffn_up"].dot(h)
            act = np.array([gv / (1.0 + math.exp(-gv)) if gv > -700 else 0.0 for gv in gate]) * up
            x = x + Lw["ffn_down"].dot(act)
        logits.append(out_w.dot(norm(x, W("output_norm.weight"))))
    return np.array(logits)


class Sut:
    """A running `ember_ref.py serve --stdio` process."""

    def __init__(self, model, *extra):
        self.p = subprocess.Popen([L.PYTHON, EMBER_REF, "serve", "--stdio", "--model", model]
                                  + list(extra), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.ready = json.loads(self.p.stdout.readline())

    def raw(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def req(self, obj):
        return self.raw(json.dumps(obj))

    def close(self):
        try:
            self.p.stdin.write('{"op":"quit"}\n')
            self.p.stdin.flush()
        except BrokenPipeError:
            pass
        rc = self.p.wait(timeout=30)
        self.p.stdout.close()
        self.p.stderr.close()
        return rc


class EmberRefTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.f32 = L.make_qwen3(os.path.join(cls.tmp.name, "f32.gguf"), seed=3)
        cls.untied = L.make_qwen3(os.path.join(cls.tmp.name, "untied.gguf"), seed=4, tied=False,
                                  rope_theta=1e6, eps=1e-5)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_matches_naive_forward(self):
        tokens = [5, 17, 300, 2, 2, 99, 0, 250]
        for path in (self.f32, self.untied):
            r = G.GGUFReader(path)
            fast = ember_ref.Qwen3Ref(r).logits(tokens)
            slow = naive_logits(r, tokens)
            err = np.abs(fast - slow).max()
            self.assertLess(err, 1e-9 * max(1.0, np.abs(slow).max()), path)
            self.assertEqual(fast.shape, (len(tokens), 320))

    def test_all_weight_types(self):
        tokens = [1, 2, 3, 4, 5, 6]
        for name, t, mix in (("f16", G.F16, None), ("bf16", G.BF16, None), ("q8_0", G.Q8_0, None),
                             ("q4_k_m", G.Q4_K, {"ffn_down": G.Q6_K, "attn_v": G.Q6_K}),
                             ("q6_k", G.Q6_K, None)):
            path = L.make_qwen3(os.path.join(self.tmp.name, name + ".gguf"), weight_type=t,
                                shape=L.QUANT_SHAPE, tied=(name != "q8_0"), mix=mix)
            r = G.GGUFReader(path)
            fast = ember_ref.Qwen3Ref(r).logits(tokens)
            slow = naive_logits(r, tokens)
            self.assertLess(np.abs(fast - slow).max(), 1e-9 * np.abs(slow).max(), name)

    def test_prefill_equals_incremental_and_float32(self):
        r = G.GGUFReader(self.untied)
        m = ember_ref.Qwen3Ref(r)
        tokens = list(range(40, 80))
        full = m.logits(tokens)
        cache = m.new_cache()
        part = [m.forward(tokens[:13], cache)]
        for t in tokens[13:]:
            part.append(m.forward([t], cache))
        inc = np.concatenate(part)
        self.assertLess(np.abs(full - inc).max(), 1e-10 * np.abs(full).max())
        self.assertGreater(cache.k[0].shape[1], 0)
        last = m.forward(tokens, m.new_cache(), logits_from=len(tokens) - 1)
        np.testing.assert_allclose(last[0], full[-1], rtol=0, atol=1e-9)
        m32 = ember_ref.Qwen3Ref(r, dtype=np.float32)
        self.assertLess(np.abs(m32.logits(tokens) - full).max(), 1e-3 * np.abs(full).max())

    def test_score_chunks(self):
        m = ember_ref.Qwen3Ref(G.GGUFReader(self.untied))
        prompt = list(range(100, 140))
        ids = [[i % 7, 300] for i in range(35)]
        whole = ember_ref.RefBackend(m, 256).score(prompt, 5, 4, ids)
        small = ember_ref.RefBackend(m, 256)
        small.score_chunk_bytes = 3 * 8 * 320              # three positions per chunk
        chunked = small.score(prompt, 5, 4, ids)
        self.assertEqual(len(chunked), len(whole))
        for a, b in zip(chunked, whole):           # BLAS may round a different M differently
            self.assertEqual([t for t, _ in a["top"]], [t for t, _ in b["top"]])
            np.testing.assert_allclose([lp for _, lp in a["top"]] + a["ids"],
                                       [lp for _, lp in b["top"]] + b["ids"], rtol=0, atol=1e-10)
        self.assertEqual(len(whole), 35)

    def test_model_errors(self):
        w = L.Writer()
        w.add_kv("general.architecture", G.T_STRING, "llama")
        p = w.write(os.path.join(self.tmp.name, "llama.gguf"))
        with self.assertRaisesRegex(ember_ref.ModelError, "only 'qwen3'"):
            ember_ref.load_hparams(G.GGUFReader(p))
        # a Qwen3 file with one tensor missing
        r = G.GGUFReader(self.f32)
        hp = ember_ref.load_hparams(r)
        del r.tensor_map["blk.1.ffn_up.weight"]
        with self.assertRaisesRegex(ember_ref.ModelError, "blk.1.ffn_up.weight is missing"):
            ember_ref.check_tensors(r, hp)

    def test_logits_cli(self):
        out = os.path.join(self.tmp.name, "l.npy")
        res = subprocess.run([L.PYTHON, EMBER_REF, "logits", self.untied, "--tokens", "3,1,4,1,5",
                              "--out", out], capture_output=True, text=True, timeout=120)
        self.assertEqual(res.returncode, 0, res.stderr)
        got = np.load(out)
        self.assertEqual(got.dtype, np.float32)
        self.assertEqual(got.shape, (5, 320))
        ref = ember_ref.Qwen3Ref(G.GGUFReader(self.untied)).logits([3, 1, 4, 1, 5])
        np.testing.assert_allclose(got, ref.astype(np.float32), rtol=1e-6, atol=1e-5)
        res = subprocess.run([L.PYTHON, EMBER_REF, "logits", self.untied, "--tokens", "3,999",
                              "--out", out], capture_output=True, text=True, timeout=120)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("outside the vocabulary", res.stderr)
        res = subprocess.run([L.PYTHON, EMBER_REF, "logits", out, "--tokens", "1", "--out", out],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(res.returncode, 1)
        self.assertIn("bad magic", res.stderr)

    def test_serve_protocol(self):
        sut = Sut(self.untied)
        try:
            rd = sut.ready
            self.assertIs(rd["ready"], True)
            self.assertEqual(rd["protocol"], 1)
            self.assertEqual(rd["engine"], "ember-ref-numpy")
            self.assertEqual(rd["device"], "cpu numpy")
            for key, val in (("vocab_size", 320), ("n_layer", 2), ("n_embd", 64), ("arch", "qwen3")):
                self.assertEqual(rd["model"][key], val)
            self.assertIn("name", rd["model"])

            prompt = [7, 8, 9, 10, 11]
            sut.p.stdin.write(json.dumps({"op": "generate", "id": 7, "prompt": prompt,
                                          "max_tokens": 6}) + "\n")
            sut.p.stdin.flush()
            first = json.loads(sut.p.stdout.readline())
            self.assertEqual(first, {"id": 7, "event": "first"})
            done = json.loads(sut.p.stdout.readline())
            self.assertEqual(done["event"], "done")
            self.assertEqual(len(done["tokens"]), 6)
            for key in ("prefill_ms", "decode_ms"):
                self.assertGreaterEqual(done["stats"][key], 0)
            # greedy continuation equals the argmax of full-sequence logits
            m = ember_ref.Qwen3Ref(G.GGUFReader(self.untied))
            seq = list(prompt)
            for t in done["tokens"]:
                self.assertEqual(int(np.argmax(m.logits(seq)[-1])), t)
                seq.append(t)
            sut.raw(json.dumps({"op": "generate", "id": 8, "prompt": prompt, "max_tokens": 6}))
            again = json.loads(sut.p.stdout.readline())
            self.assertEqual(again["tokens"], done["tokens"])

            full = m.logits(prompt)
            lp_ref = full - np.log(np.exp(full - full.max(1, keepdims=True)).sum(1, keepdims=True)) \
                - full.max(1, keepdims=True)
            ids = [[0, 1, 319], [5], [], [42]]
            sc = sut.req({"op": "score", "id": "s1", "prompt": prompt, "top_k": 5, "ids": ids,
                          "first": 1})
            self.assertEqual(sc["id"], "s1")
            self.assertEqual(sc["event"], "done")
            self.assertEqual(len(sc["positions"]), 4)
            for i, pos in enumerate(sc["positions"]):
                p = i + 1
                top = pos["top"]
                self.assertEqual(len(top), 5)
                lps = [lp for _, lp in top]
                self.assertEqual(lps, sorted(lps, reverse=True))
                self.assertTrue(all(lp <= 0 for lp in lps))
                self.assertEqual(top[0][0], int(np.argmax(full[p])))
                self.assertLessEqual(sum(math.exp(lp) for lp in lps), 1 + 1e-9)
                for (tid, lp) in top:
                    self.assertAlmostEqual(lp, lp_ref[p, tid], places=9)
                self.assertEqual(len(pos["ids"]), len(ids[i]))
                for tid, lp in zip(ids[i], pos["ids"]):
                    self.assertAlmostEqual(lp, lp_ref[p, tid], places=9)
            # whole vocabulary: probabilities sum to one
            sc = sut.req({"op": "score", "id": 9, "prompt": prompt[:2], "top_k": 4096})
            self.assertEqual(len(sc["positions"]), 2)
            self.assertAlmostEqual(sum(math.exp(lp) for _, lp in sc["positions"][0]["top"]), 1.0,
                                   places=9)
            self.assertEqual(sc["positions"][0]["ids"], [])

            # errors keep the server alive
            for line, pat in (("this is not json", "malformed JSON"),
                              ('[1,2]', "JSON object"),
                              ('{"op":"dance","id":3}', "unknown op"),
                              ('{"op":"generate","id":4,"prompt":[1,400]}', "outside the vocab"),
                              ('{"op":"generate","id":5,"prompt":[]}', "empty"),
                              ('{"op":"generate","id":5,"prompt":[1],"max_tokens":0}', "max_tokens"),
                              ('{"op":"generate","id":5,"prompt":[1,2],"max_tokens":255}',
                               "context"),
                              ('{"op":"generate","id":6,"prompt":[1,true]}', "integers"),
                              ('{"op":"score","id":6,"prompt":[1,2],"ids":[[1]]}', "one list"),
                              ('{"op":"score","id":6,"prompt":[1,2],"first":2}', "first"),
                              ('{"op":"score","id":6,"prompt":[1,2],"top_k":-1}', "top_k")):
                ans = sut.raw(line)
                self.assertEqual(ans["event"], "error", line)
                self.assertRegex(ans["message"], pat)
            self.assertEqual(sut.raw('{"op":"dance","id":33}')["id"], 33)
            ok = sut.req({"op": "score", "id": 10, "prompt": [1, 2, 3], "top_k": 1})
            self.assertEqual(ok["event"], "done")
        finally:
            self.assertEqual(sut.close(), 0)

    def test_serve_bad_model(self):
        p = subprocess.run([L.PYTHON, EMBER_REF, "serve", "--stdio", "--model",
                            os.path.join(self.tmp.name, "absent.gguf")],
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 1)
        self.assertIn("error", p.stderr)
        self.assertEqual(p.stdout, "")


class _FixedScores:
    """A backend whose score answers one position with the given log-probs, or raises."""
    vocab_size = 8
    max_context = 16

    def __init__(self, top_lp, ids_lp):
        self.top_lp, self.ids_lp = top_lp, ids_lp

    def score(self, prompt, first, top_k, ids):
        if self.top_lp is None:
            raise RuntimeError("backend broke")
        return [{"top": [[0, self.top_lp]], "ids": [self.ids_lp]}]


class ServerTest(unittest.TestCase):
    """sut_protocol.Server in-process: what a backend's log-probs become on the wire."""

    def answer(self, backend):
        import io
        import sut_protocol
        out, log = io.StringIO(), io.StringIO()
        req = {"op": "score", "id": 1, "prompt": [3], "top_k": 1, "ids": [[0]]}
        server = sut_protocol.Server(backend, {"ready": True, "engine": "fixed"},
                                     inp=io.BytesIO((json.dumps(req) + "\n").encode()), out=out,
                                     log=log)
        self.assertEqual(server.run(), 0)
        lines = out.getvalue().splitlines()
        self.assertEqual(len(lines), 2)             # ready, then the answer
        return json.loads(lines[1]), log.getvalue()

    def test_log_probs_on_the_wire(self):
        done, _ = self.answer(_FixedScores(-0.5, -math.inf))
        self.assertEqual(done["event"], "done")
        self.assertEqual(done["positions"], [{"top": [[0, -0.5]], "ids": [-1e30]}])
        for bad in (math.nan, math.inf):
            err, _ = self.answer(_FixedScores(-0.5, bad))
            self.assertEqual(err["event"], "error")
            self.assertIn("non-finite", err["message"])
        err, log = self.answer(_FixedScores(None, None))
        self.assertIn("internal error: RuntimeError: backend broke", err["message"])
        self.assertIn("fixed: internal error", log)


if __name__ == "__main__":
    unittest.main(verbosity=2)
