#!/usr/bin/env python3
"""Self-tests of tools/gguf_to_hf.py and tools/hf_sut.py. Without torch: the Qwen3Config values,
the HF parameter names and shapes, and a numpy forward written in HF's conventions (x @ W.T,
rotate_half, repeat_kv) over the mapped state dict, which must equal ember_ref's logits. With torch
and transformers installed (the GPU machine), also the real Qwen3ForCausalLM and the hf_sut SUT."""

import importlib.util
import json
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
import gguf_to_hf  # noqa: E402

HAVE_HF = all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers"))
HF_SUT = os.path.join(L.TOOLS, "hf_sut.py")

# Qwen3ForCausalLM's parameter names for one decoder layer (HF modeling_qwen3.py module tree).
HF_LAYER_PARAMS = [
    "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
    "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
    "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
    "input_layernorm.weight", "post_attention_layernorm.weight",
]


def hf_style_forward(sd, cfg, tokens):
    """Qwen3 as HF's modeling code computes it, in numpy float64, from an HF state dict."""
    H, KV, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    T = len(tokens)
    sd = {k: v.astype(np.float64) for k, v in sd.items()}

    def rmsnorm(x, w):
        return w * (x / np.sqrt(np.mean(x ** 2, axis=-1, keepdims=True) + eps))

    def linear(x, name):
        return x @ sd[name].T

    def rotate_half(x):
        x1, x2 = x[..., :D // 2], x[..., D // 2:]
        return np.concatenate([-x2, x1], axis=-1)

    inv_freq = 1.0 / (theta ** (np.arange(0, D, 2) / D))
    freqs = np.outer(np.arange(T), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)                  # [T, D]
    cos, sin = np.cos(emb)[None], np.sin(emb)[None]
    x = sd["model.embed_tokens.weight"][tokens]
    mask = np.triu(np.full((T, T), -np.inf), k=1)
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        h = rmsnorm(x, sd[p + "input_layernorm.weight"])
        q = linear(h, p + "self_attn.q_proj.weight").reshape(T, H, D).transpose(1, 0, 2)
        k = linear(h, p + "self_attn.k_proj.weight").reshape(T, KV, D).transpose(1, 0, 2)
        v = linear(h, p + "self_attn.v_proj.weight").reshape(T, KV, D).transpose(1, 0, 2)
        q = rmsnorm(q, sd[p + "self_attn.q_norm.weight"])
        k = rmsnorm(k, sd[p + "self_attn.k_norm.weight"])
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = np.repeat(k, H // KV, axis=0)                          # repeat_kv
        v = np.repeat(v, H // KV, axis=0)
        a = q @ k.transpose(0, 2, 1) / np.sqrt(D) + mask
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        o = (a @ v).transpose(1, 0, 2).reshape(T, H * D)
        x = x + linear(o, p + "self_attn.o_proj.weight")
        h = rmsnorm(x, sd[p + "post_attention_layernorm.weight"])
        g = linear(h, p + "mlp.gate_proj.weight")
        x = x + linear((g / (1 + np.exp(-g))) * linear(h, p + "mlp.up_proj.weight"),
                       p + "mlp.down_proj.weight")
    x = rmsnorm(x, sd["model.norm.weight"])
    head = sd["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else sd["lm_head.weight"]
    return x @ head.T


class GgufToHfTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.tied = L.make_qwen3(os.path.join(cls.tmp.name, "tied.gguf"), seed=8,
                                rope_theta=1e6, eps=1e-6)
        cls.untied = L.make_qwen3(os.path.join(cls.tmp.name, "untied.gguf"), seed=9, tied=False,
                                  weight_type=G.Q8_0, shape=L.QUANT_SHAPE, rope_theta=5e5,
                                  eps=1e-5)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_config(self):
        r = G.GGUFReader(self.tied)
        kw = gguf_to_hf.hf_config_kwargs(r)
        s = L.TINY_SHAPE
        self.assertEqual(kw["vocab_size"], s["n_vocab"])
        self.assertEqual(kw["hidden_size"], s["n_embd"])
        self.assertEqual(kw["intermediate_size"], s["n_ff"])
        self.assertEqual(kw["num_hidden_layers"], s["n_layer"])
        self.assertEqual(kw["num_attention_heads"], s["n_head"])
        self.assertEqual(kw["num_key_value_heads"], s["n_head_kv"])
        self.assertEqual(kw["head_dim"], s["head_dim"])
        self.assertNotEqual(kw["head_dim"] * kw["num_attention_heads"], kw["hidden_size"])
        self.assertAlmostEqual(kw["rms_norm_eps"], 1e-6, places=12)
        self.assertEqual(kw["rope_theta"], 1e6)
        self.assertEqual(kw["max_position_embeddings"], s["n_ctx"])
        self.assertIs(kw["tie_word_embeddings"], True)
        self.assertIs(kw["attention_bias"], False)
        kw2 = gguf_to_hf.hf_config_kwargs(G.GGUFReader(self.untied))
        self.assertIs(kw2["tie_word_embeddings"], False)
        self.assertEqual(kw2["rope_theta"], 5e5)
        self.assertAlmostEqual(kw2["rms_norm_eps"], 1e-5, places=10)

    def test_names_and_shapes(self):
        for path, tied in ((self.tied, True), (self.untied, False)):
            r = G.GGUFReader(path)
            hp = ember_ref.load_hparams(r)
            sd = gguf_to_hf.hf_state_dict(r)
            expect = gguf_to_hf.hf_expected_shapes(hp)
            self.assertEqual(set(sd), set(expect))
            for name, arr in sd.items():
                self.assertEqual(arr.shape, expect[name], name)
                self.assertEqual(arr.dtype, np.float32)
            want = {"model.embed_tokens.weight", "model.norm.weight"}
            want |= {"model.layers.%d.%s" % (i, n) for i in range(hp["n_layer"])
                     for n in HF_LAYER_PARAMS}
            if not tied:
                want.add("lm_head.weight")
            self.assertEqual(set(sd), want)
            # values are the dequantized GGUF tensors, unpermuted
            np.testing.assert_array_equal(sd["model.layers.1.self_attn.q_proj.weight"],
                                          r.dequantize("blk.1.attn_q.weight"))
            np.testing.assert_array_equal(sd["model.layers.0.mlp.down_proj.weight"],
                                          r.dequantize("blk.0.ffn_down.weight"))
        self.assertIsNone(gguf_to_hf.hf_name("blk.0.rope_freqs.weight"))
        self.assertEqual(gguf_to_hf.hf_name("blk.12.attn_k_norm.weight"),
                         "model.layers.12.self_attn.k_norm.weight")

    def test_unmapped_tensor_is_an_error(self):
        r = G.GGUFReader(self.tied)
        r.tensors.append(G.TensorInfo("blk.0.extra.weight", [4], G.F32, 0))
        with self.assertRaisesRegex(ember_ref.ModelError, "no Qwen3ForCausalLM counterpart"):
            list(gguf_to_hf.iter_hf_tensors(r))

    def test_hf_style_forward_matches_ember_ref(self):
        tokens = [3, 200, 17, 17, 5, 99, 1, 0, 42]
        for path in (self.tied, self.untied):
            r = G.GGUFReader(path)
            cfg = gguf_to_hf.hf_config_kwargs(r)
            hf = hf_style_forward(gguf_to_hf.hf_state_dict(r), cfg, tokens)
            ref = ember_ref.Qwen3Ref(r).logits(tokens)
            self.assertLess(np.abs(hf - ref).max(), 1e-9 * np.abs(ref).max(), path)

    def test_hf_sut_help_without_torch(self):
        res = subprocess.run([L.PYTHON, HF_SUT, "--help"], capture_output=True, text=True,
                             timeout=60)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("serve", res.stdout)
        if not HAVE_HF:
            res = subprocess.run([L.PYTHON, HF_SUT, "serve", "--stdio", "--model", self.tied],
                                 capture_output=True, text=True, timeout=60,
                                 stdin=subprocess.DEVNULL)
            self.assertEqual(res.returncode, 1)
            self.assertIn("needs torch and transformers", res.stderr)

    @unittest.skipUnless(HAVE_HF, "torch and transformers are not installed")
    def test_transformers_model_matches_ember_ref(self):
        tokens = [3, 200, 17, 17, 5, 99, 1, 0, 42]
        for path in (self.tied, self.untied):
            r = G.GGUFReader(path)
            model = gguf_to_hf.load_model(r, device="cpu")
            import torch
            with torch.no_grad():
                got = model(input_ids=torch.tensor([tokens]), use_cache=False).logits[0]
            ref = ember_ref.Qwen3Ref(r).logits(tokens)
            err = np.abs(got.double().numpy() - ref).max()
            self.assertLess(err, 1e-4 * np.abs(ref).max(), path)

    @unittest.skipUnless(HAVE_HF, "torch and transformers are not installed")
    def test_hf_sut_protocol(self):
        p = subprocess.Popen([L.PYTHON, HF_SUT, "serve", "--stdio", "--model", self.untied,
                              "--device", "cpu"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
        try:
            ready = json.loads(p.stdout.readline())
            self.assertEqual(ready["engine"], "hf-transformers-qwen3")
            p.stdin.write(json.dumps({"op": "score", "id": 1, "prompt": [1, 2, 3, 4], "top_k": 3,
                                      "ids": [[0], [1], [2], [3]]}) + "\n")
            p.stdin.write(json.dumps({"op": "generate", "id": 2, "prompt": [1, 2, 3],
                                      "max_tokens": 5}) + "\n")
            p.stdin.flush()
            sc = json.loads(p.stdout.readline())
            self.assertEqual(len(sc["positions"]), 4)
            self.assertEqual(json.loads(p.stdout.readline())["event"], "first")
            done = json.loads(p.stdout.readline())
            m = ember_ref.Qwen3Ref(G.GGUFReader(self.untied))
            seq = [1, 2, 3]
            for t in done["tokens"]:
                self.assertEqual(int(np.argmax(m.logits(seq)[-1])), t)
                seq.append(t)
        finally:
            p.stdin.write('{"op":"quit"}\n')
            p.stdin.flush()
            self.assertEqual(p.wait(timeout=60), 0)
            p.stdout.close()
            p.stdin.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
