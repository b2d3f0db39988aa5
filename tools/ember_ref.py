#!/usr/bin/env python3
"""ember_ref.py - an independent numpy reference of the Qwen3 dense forward, and a Contract-1 SUT.

Written from the Qwen3 definition (engine-anchors.md 5.1 / HF Qwen3ForCausalLM), not from ember's
C code: embedding; per layer pre-RMSNorm, q/k/v projections, per-head RMSNorm of q and k before
RoPE, NEOX rotate-half RoPE over head_dim, causal GQA attention scaled by 1/sqrt(head_dim), output
projection, residual; pre-RMSNorm SwiGLU MLP, residual; final RMSNorm and LM head (token_embd
when output.weight is absent). Weights are dequantized exactly to float32 by gguf_reader.py and
then held and computed in float64 by default (--dtype float32 halves memory and time).

  ember_ref.py logits MODEL.gguf --tokens 1,2,3 --out FILE.npy   float32 [n_tokens, n_vocab]
  ember_ref.py serve --stdio --model MODEL.gguf                  Contract-1 SUT on stdin/stdout
  ember_ref.py info MODEL.gguf                                   hyper-parameters and tensors
  ember_ref.py draft-logits MODEL.gguf DRAFT.gguf --tokens 1,2,3 --out FILE.npy
      a DFlash draft's logits [block_size - 1, n_vocab] for the block [last, MASK...] that opens
      with the last token, the others being the context the target runs first

The DFlash draft (z-lab dflash model.py, arXiv 2602.06036) is written from its definition too: the
target's hidden states after the draft's target layers (GGUF dflash.target_layers holds layer id +
1, llama.cpp's convention) are concatenated, projected by fc and RMS-normed (hidden_norm) into one
context feature per position; every draft layer projects that feature with its own k/v (k-norm,
RoPE at the context positions) in front of the block's own K/V; the block's queries attend to all
of it without a mask; proposals come from output_norm and the target's LM head.
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_reader import GGUFError, GGUFReader  # noqa: E402
import sut_protocol  # noqa: E402

ENGINE_NAME = "ember-ref-numpy"
ATTN_SCORE_BYTES = 64 << 20      # attention scores are computed in query chunks of about this size


class ModelError(Exception):
    """A GGUF that is not a Qwen3 dense model this reference can run."""


def load_hparams(reader):
    """Qwen3 hyper-parameters from the GGUF metadata, as a dict (shared with gguf_to_hf.py)."""
    try:
        arch = reader.get("general.architecture")
        if arch != "qwen3":
            raise ModelError("general.architecture is %r; only 'qwen3' dense models are supported"
                             % (arch,))
        pre = arch + "."
        n_embd = reader.get_int(pre + "embedding_length")
        n_head = reader.get_int(pre + "attention.head_count")
        hp = {
            "arch": arch,
            "n_embd": n_embd,
            "n_layer": reader.get_int(pre + "block_count"),
            "n_head": n_head,
            "n_head_kv": reader.get_int(pre + "attention.head_count_kv", n_head),
            "n_ff": reader.get_int(pre + "feed_forward_length"),
            "n_ctx_train": reader.get_int(pre + "context_length", 4096),
            "rms_eps": reader.get_float(pre + "attention.layer_norm_rms_epsilon", 1e-6),
            "rope_theta": reader.get_float(pre + "rope.freq_base", 10000.0),
        }
        hp["head_dim"] = reader.get_int(pre + "attention.key_length",
                                        n_embd // n_head if n_head else 0)
        value_len = reader.get_int(pre + "attention.value_length", hp["head_dim"])
        rope_dims = reader.get_int(pre + "rope.dimension_count", hp["head_dim"])
    except GGUFError as exc:
        raise ModelError(str(exc)) from None
    scaling = reader.get(pre + "rope.scaling.type")
    if scaling not in (None, "none"):
        raise ModelError("rope scaling %r is not supported" % scaling)
    if value_len != hp["head_dim"]:
        raise ModelError("attention.value_length %d != key_length %d" % (value_len, hp["head_dim"]))
    if rope_dims != hp["head_dim"]:
        raise ModelError("rope.dimension_count %d != head_dim %d (partial RoPE unsupported)"
                         % (rope_dims, hp["head_dim"]))
    for key in ("n_embd", "n_layer", "n_head", "n_head_kv", "n_ff", "head_dim", "n_ctx_train"):
        if hp[key] <= 0:
            raise ModelError("%s must be positive, metadata gives %d" % (key, hp[key]))
    if hp["n_head"] % hp["n_head_kv"]:
        raise ModelError("head_count %d is not a multiple of head_count_kv %d"
                         % (hp["n_head"], hp["n_head_kv"]))
    if hp["head_dim"] % 2:
        raise ModelError("head_dim %d is odd; RoPE needs pairs" % hp["head_dim"])
    if not hp["rms_eps"] > 0 or not hp["rope_theta"] > 0:
        raise ModelError("rms epsilon and rope theta must be positive")
    emb = reader.tensor_map.get("token_embd.weight")
    if emb is None or len(emb.dims) != 2 or emb.dims[0] != hp["n_embd"]:
        raise ModelError("token_embd.weight missing or not {n_embd=%d, n_vocab}" % hp["n_embd"])
    hp["n_vocab"] = int(emb.dims[1])
    hp["tied_output"] = "output.weight" not in reader.tensor_map
    return hp


def expected_shapes(hp):
    """GGUF tensor name -> numpy shape (rows, cols) that a Qwen3 dense file must have."""
    e, f, d = hp["n_embd"], hp["n_ff"], hp["head_dim"]
    qd, kvd = hp["n_head"] * d, hp["n_head_kv"] * d
    shapes = {"token_embd.weight": (hp["n_vocab"], e), "output_norm.weight": (e,)}
    if not hp["tied_output"]:
        shapes["output.weight"] = (hp["n_vocab"], e)
    for i in range(hp["n_layer"]):
        b = "blk.%d." % i
        shapes.update({
            b + "attn_norm.weight": (e,), b + "ffn_norm.weight": (e,),
            b + "attn_q.weight": (qd, e), b + "attn_k.weight": (kvd, e),
            b + "attn_v.weight": (kvd, e), b + "attn_output.weight": (e, qd),
            b + "attn_q_norm.weight": (d,), b + "attn_k_norm.weight": (d,),
            b + "ffn_gate.weight": (f, e), b + "ffn_up.weight": (f, e),
            b + "ffn_down.weight": (e, f),
        })
    return shapes


def check_tensors(reader, hp):
    """Raises ModelError unless every Qwen3 tensor is present with the right shape."""
    for name, shape in expected_shapes(hp).items():
        info = reader.tensor_map.get(name)
        if info is None:
            raise ModelError("tensor %s is missing" % name)
        if info.shape != shape:
            raise ModelError("tensor %s has numpy shape %s, expected %s" % (name, info.shape, shape))


def rms_norm(x, w, eps):
    """x / sqrt(mean(x^2) + eps) * w over the last axis (no 1+w offset in Qwen3)."""
    ms = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(ms + eps) * w


def silu(x):
    # x * sigmoid(x), written with tanh so large |x| never overflows
    return x * (0.5 * (1.0 + np.tanh(0.5 * x)))


class KVCache:
    """Per-layer keys and values, [n_head_kv, capacity, head_dim], grown by doubling."""

    def __init__(self, n_layer, n_head_kv, head_dim, dtype, capacity=256):
        self.k = [np.zeros((n_head_kv, capacity, head_dim), dtype) for _ in range(n_layer)]
        self.v = [np.zeros((n_head_kv, capacity, head_dim), dtype) for _ in range(n_layer)]
        self.length = 0

    def reserve(self, n):
        cap = self.k[0].shape[1]
        if n <= cap:
            return
        while cap < n:
            cap *= 2
        for lst in (self.k, self.v):
            for i, old in enumerate(lst):
                new = np.zeros((old.shape[0], cap, old.shape[2]), old.dtype)
                new[:, :self.length] = old[:, :self.length]
                lst[i] = new


class Qwen3Ref:
    """The Qwen3 dense forward over weights dequantized from a GGUF."""

    def __init__(self, reader, dtype=np.float64, log=None):
        self.reader = reader
        self.hp = hp = load_hparams(reader)
        check_tensors(reader, hp)
        self.dtype = np.dtype(dtype)
        t0 = time.monotonic()

        def w(name):
            return reader.dequantize(name).astype(self.dtype, copy=False)

        self.tok_embd = w("token_embd.weight")
        self.output_norm = w("output_norm.weight")
        self.output = self.tok_embd if hp["tied_output"] else w("output.weight")
        self.layers = []
        for i in range(hp["n_layer"]):
            b = "blk.%d." % i
            self.layers.append({k: w(b + k + ".weight") for k in (
                "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm",
                "attn_k_norm", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")})
        half = hp["head_dim"] // 2
        # inv_freq[i] = theta^(-2i/head_dim), computed in float64
        self.inv_freq = hp["rope_theta"] ** (-np.arange(half, dtype=np.float64) * 2.0
                                             / hp["head_dim"])
        self.load_seconds = time.monotonic() - t0
        if log:
            print("ember-ref: loaded %s in %.2fs (%s)" % (reader.path, self.load_seconds,
                                                          self.dtype.name), file=log, flush=True)

    def new_cache(self):
        hp = self.hp
        return KVCache(hp["n_layer"], hp["n_head_kv"], hp["head_dim"], self.dtype)

    def rope(self, x, positions):
        """NEOX rotate-half: element i pairs with i + head_dim/2. x: [T, heads, head_dim]."""
        half = self.hp["head_dim"] // 2
        ang = positions.astype(np.float64)[:, None] * self.inv_freq[None, :]      # [T, half]
        cos = np.cos(ang).astype(self.dtype)[:, None, :]
        sin = np.sin(ang).astype(self.dtype)[:, None, :]
        x1, x2 = x[..., :half], x[..., half:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    def forward(self, tokens, cache, logits_from=0, hidden_only=False, capture=None):
        """Runs tokens at positions cache.length.. through the model, appending to the cache.
        Returns logits [len(tokens) - logits_from, n_vocab] for tokens[logits_from:], or with
        hidden_only the final-normed hidden states [.., n_embd] that the LM head multiplies.
        capture: None, or a dict {layer id: None} filled with the residual stream [T, n_embd]
        after those decoder layers (HF hidden_states[id + 1])."""
        hp = self.hp
        tokens = np.asarray(tokens, dtype=np.int64)
        n_tok = tokens.size
        if n_tok == 0:
            return np.zeros((0, hp["n_vocab"]), self.dtype)
        if tokens.min() < 0 or tokens.max() >= hp["n_vocab"]:
            raise ValueError("token id outside the vocabulary")
        pos0 = cache.length
        n_ctx = pos0 + n_tok
        cache.reserve(n_ctx)
        positions = np.arange(pos0, n_ctx)
        H, KV, D, eps = hp["n_head"], hp["n_head_kv"], hp["head_dim"], hp["rms_eps"]
        n_rep = H // KV
        scale = 1.0 / np.sqrt(D)
        # key s is visible to query t when s <= pos0 + t
        visible = np.arange(n_ctx)[None, :] <= positions[:, None]                    # [T, S]
        q_chunk = max(1, ATTN_SCORE_BYTES // max(1, H * n_ctx * self.dtype.itemsize))

        x = self.tok_embd[tokens]                                                     # [T, E]
        for li, L in enumerate(self.layers):
            h = rms_norm(x, L["attn_norm"], eps)
            q = (h @ L["attn_q"].T).reshape(n_tok, H, D)
            k = (h @ L["attn_k"].T).reshape(n_tok, KV, D)
            v = (h @ L["attn_v"].T).reshape(n_tok, KV, D)
            q = self.rope(rms_norm(q, L["attn_q_norm"], eps), positions)
            k = self.rope(rms_norm(k, L["attn_k_norm"], eps), positions)
            cache.k[li][:, pos0:n_ctx] = k.transpose(1, 0, 2)
            cache.v[li][:, pos0:n_ctx] = v.transpose(1, 0, 2)
            keys = cache.k[li][:, :n_ctx]                                             # [KV, S, D]
            vals = cache.v[li][:, :n_ctx]
            # query head h reads kv head h // n_rep
            qg = q.transpose(1, 0, 2).reshape(KV, n_rep, n_tok, D)
            attn = np.empty((KV, n_rep, n_tok, D), self.dtype)
            for t0 in range(0, n_tok, q_chunk):
                t1 = min(n_tok, t0 + q_chunk)
                s = np.matmul(qg[:, :, t0:t1], keys[:, None].transpose(0, 1, 3, 2)) * scale
                s = np.where(visible[None, None, t0:t1], s, -np.inf)
                s = np.exp(s - s.max(axis=-1, keepdims=True))
                s /= s.sum(axis=-1, keepdims=True)
                attn[:, :, t0:t1] = np.matmul(s, vals[:, None])
            attn = attn.reshape(H, n_tok, D).transpose(1, 0, 2).reshape(n_tok, H * D)
            x = x + attn @ L["attn_output"].T
            h = rms_norm(x, L["ffn_norm"], eps)
            g = h @ L["ffn_gate"].T
            u = h @ L["ffn_up"].T
            x = x + (silu(g) * u) @ L["ffn_down"].T
            if capture is not None and li in capture:
                capture[li] = x.copy()
        cache.length = n_ctx
        h = rms_norm(x[logits_from:], self.output_norm, eps)
        return h if hidden_only else h @ self.output.T

    def logits(self, tokens):
        return self.forward(tokens, self.new_cache())


class DFlashRef:
    """A DFlash draft over a Qwen3Ref target (see the module docstring)."""

    def __init__(self, reader, target):
        self.target = target
        thp = target.hp
        try:
            arch = reader.get("general.architecture")
            if arch != "dflash":
                raise ModelError("draft architecture is %r, expected 'dflash'" % (arch,))
            g = lambda k, d=None: reader.get_int("dflash." + k, d)  # noqa: E731
            n_head = g("attention.head_count")
            hp = {"n_embd": g("embedding_length"), "n_layer": g("block_count"), "n_head": n_head,
                  "n_head_kv": g("attention.head_count_kv", n_head), "n_ff": g("feed_forward_length"),
                  "block_size": g("block_size"),
                  "rms_eps": reader.get_float("dflash.attention.layer_norm_rms_epsilon", 1e-6),
                  "rope_theta": reader.get_float("dflash.rope.freq_base", 10000.0)}
            hp["head_dim"] = g("attention.key_length", hp["n_embd"] // n_head)
            layers = reader.get("dflash.target_layers")
            mask = reader.get_int("tokenizer.ggml.mask_token_id",
                                  reader.get_int("dflash.mask_token_id", thp["n_vocab"] - 1))
        except GGUFError as exc:
            raise ModelError(str(exc)) from None
        if hp["n_embd"] != thp["n_embd"]:
            raise ModelError("draft n_embd %d != target %d" % (hp["n_embd"], thp["n_embd"]))
        self.layer_ids = [int(v) - 1 for v in layers]
        if not self.layer_ids or min(self.layer_ids) < 0 or max(self.layer_ids) >= thp["n_layer"]:
            raise ModelError("dflash.target_layers %s outside 1..%d" % (list(layers), thp["n_layer"]))
        if not 0 <= mask < thp["n_vocab"]:
            raise ModelError("mask token %d outside the target vocabulary" % mask)
        self.hp, self.mask = hp, mask
        dt = target.dtype

        def w(name):
            return reader.dequantize(name).astype(dt, copy=False)

        self.fc, self.hidden_norm, self.output_norm = w("fc.weight"), w("hidden_norm.weight"), \
            w("output_norm.weight")
        tm = reader.tensor_map
        self.embed = w("token_embd.weight") if "token_embd.weight" in tm else target.tok_embd
        self.head = w("output.weight") if "output.weight" in tm else target.output
        self.layers = [{k: w("blk.%d.%s.weight" % (i, k)) for k in (
            "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm",
            "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")} for i in range(hp["n_layer"])]
        half = hp["head_dim"] // 2
        self.inv_freq = hp["rope_theta"] ** (-np.arange(half, dtype=np.float64) * 2.0 / hp["head_dim"])

    def rope(self, x, positions):
        half = self.hp["head_dim"] // 2
        ang = positions.astype(np.float64)[:, None] * self.inv_freq[None, :]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        x1, x2 = x[..., :half], x[..., half:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    def block_logits(self, context, last):
        """Logits [B - 1, n_vocab] of block slots 1..B-1 after the target ran `context`."""
        hp = self.hp
        H, KV, D, eps, B = hp["n_head"], hp["n_head_kv"], hp["head_dim"], hp["rms_eps"], hp["block_size"]
        captured = {i: None for i in self.layer_ids}
        self.target.forward(context, self.target.new_cache(), logits_from=len(context), capture=captured)
        feats = np.concatenate([captured[i] for i in self.layer_ids], axis=-1)      # [C, n_tl * E]
        ctx = rms_norm(feats @ self.fc.T, self.hidden_norm, eps)                      # [C, E]
        C = ctx.shape[0]
        ctx_pos, blk_pos = np.arange(C), np.arange(C, C + B)
        x = self.embed[[last] + [self.mask] * (B - 1)]
        for L in self.layers:
            h = rms_norm(x, L["attn_norm"], eps)
            q = self.rope(rms_norm((h @ L["attn_q"].T).reshape(B, H, D), L["attn_q_norm"], eps), blk_pos)
            k_ctx = self.rope(rms_norm((ctx @ L["attn_k"].T).reshape(C, KV, D), L["attn_k_norm"], eps), ctx_pos)
            k_blk = self.rope(rms_norm((h @ L["attn_k"].T).reshape(B, KV, D), L["attn_k_norm"], eps), blk_pos)
            k = np.concatenate([k_ctx, k_blk])                                        # [C + B, KV, D]
            v = np.concatenate([(ctx @ L["attn_v"].T).reshape(C, KV, D), (h @ L["attn_v"].T).reshape(B, KV, D)])
            k, v = np.repeat(k, H // KV, axis=1), np.repeat(v, H // KV, axis=1)      # q head h reads kv h // rep
            s = np.einsum("bhd,khd->hbk", q, k) / np.sqrt(D)                          # no mask: bidirectional
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            attn = np.einsum("hbk,khd->bhd", s, v).reshape(B, H * D)
            x = x + attn @ L["attn_output"].T
            h = rms_norm(x, L["ffn_norm"], eps)
            x = x + (silu(h @ L["ffn_gate"].T) * (h @ L["ffn_up"].T)) @ L["ffn_down"].T
        return rms_norm(x[1:], self.output_norm, eps) @ self.head.T


class RefBackend:
    """Contract-1 backend (see sut_protocol.py) over a Qwen3Ref."""

    score_chunk_bytes = 256 << 20     # float64 logits held at once while scoring

    def __init__(self, model, max_context):
        self.model = model
        self.vocab_size = model.hp["n_vocab"]
        self.max_context = max_context

    def generate(self, prompt, max_tokens, on_first):
        cache = self.model.new_cache()
        t0 = time.monotonic()
        logits = self.model.forward(prompt, cache, logits_from=len(prompt) - 1)
        tok = int(np.argmax(logits[-1]))
        t1 = time.monotonic()
        on_first()
        tokens = [tok]
        while len(tokens) < max_tokens:
            logits = self.model.forward([tok], cache)
            tok = int(np.argmax(logits[-1]))
            tokens.append(tok)
        t2 = time.monotonic()
        stats = {"prefill_ms": round((t1 - t0) * 1000.0, 3),
                 "decode_ms": round((t2 - t1) * 1000.0, 3),
                 "prompt_tokens": len(prompt), "gen_tokens": len(tokens)}
        return tokens, stats

    def score(self, prompt, first, top_k, ids):
        hidden = self.model.forward(prompt, self.model.new_cache(), logits_from=first,
                                    hidden_only=True)
        # the LM head in position chunks: [positions, vocab] float64 for a long prompt and a
        # 152k vocabulary would be gigabytes
        chunk = max(1, self.score_chunk_bytes // (8 * self.vocab_size))
        positions = []
        for c0 in range(0, hidden.shape[0], chunk):
            logits = hidden[c0:c0 + chunk] @ self.model.output.T
            positions += sut_protocol.topk_positions(sut_protocol.log_softmax(logits), top_k,
                                                     ids[c0:c0 + chunk])
        return positions


def parse_tokens(text):
    try:
        return [int(t) for t in text.replace(",", " ").split()]
    except ValueError:
        raise SystemExit("error: --tokens must be integers separated by commas") from None


def cmd_logits(args):
    reader = GGUFReader(args.model)
    model = Qwen3Ref(reader, dtype=np.dtype(args.dtype), log=sys.stderr)
    tokens = parse_tokens(args.tokens)
    if not tokens:
        raise SystemExit("error: no tokens")
    bad = [t for t in tokens if t < 0 or t >= model.hp["n_vocab"]]
    if bad:
        raise SystemExit("error: token %d outside the vocabulary [0, %d)" % (bad[0],
                                                                            model.hp["n_vocab"]))
    t0 = time.monotonic()
    logits = model.logits(tokens).astype(np.float32)
    np.save(args.out, logits)
    print("ember-ref: %d tokens -> %s %s in %.2fs" % (len(tokens), args.out, logits.shape,
                                                   time.monotonic() - t0), file=sys.stderr)
    return 0


def cmd_draft_logits(args):
    model = Qwen3Ref(GGUFReader(args.model), dtype=np.dtype(args.dtype), log=sys.stderr)
    draft = DFlashRef(GGUFReader(args.draft), model)
    tokens = parse_tokens(args.tokens)
    if len(tokens) < 2 or min(tokens) < 0 or max(tokens) >= model.hp["n_vocab"]:
        raise SystemExit("error: need >= 2 token ids inside the vocabulary")
    logits = draft.block_logits(tokens[:-1], tokens[-1]).astype(np.float32)
    np.save(args.out, logits)
    return 0


def cmd_serve(args):
    if not args.stdio:
        raise SystemExit("error: only --stdio serving is implemented")
    reader = GGUFReader(args.model)
    model = Qwen3Ref(reader, dtype=np.dtype(args.dtype), log=sys.stderr)
    hp = model.hp
    max_context = args.max_context or hp["n_ctx_train"]
    ready = {"ready": True, "protocol": sut_protocol.PROTOCOL_VERSION, "engine": ENGINE_NAME,
             "model": sut_protocol.model_info(reader, hp, {"compute_dtype": model.dtype.name,
                                                           "max_context": max_context}),
             "device": "cpu numpy"}
    return sut_protocol.Server(RefBackend(model, max_context), ready).run()


def cmd_info(args):
    reader = GGUFReader(args.model)
    hp = load_hparams(reader)
    check_tensors(reader, hp)
    for key in sorted(hp):
        print("%-12s %s" % (key, hp[key]))
    for t in reader.tensors:
        print("%-32s %-5s %s" % (t.name, t.type_name, list(t.shape)))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("logits", help="logits at every position for fixed tokens, saved as .npy")
    p.add_argument("model")
    p.add_argument("--tokens", required=True, help="comma-separated token ids")
    p.add_argument("--out", required=True, help="output .npy: float32 [n_tokens, n_vocab]")
    p.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                   help="compute dtype (weights are dequantized to float32 exactly first)")
    p = sub.add_parser("serve", help="Contract-1 SUT (generate, score, quit)")
    p.add_argument("--stdio", action="store_true", help="serve JSON lines on stdin/stdout")
    p.add_argument("--model", required=True)
    p.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    p.add_argument("--max-context", type=int, default=0,
                   help="longest prompt + generation accepted (default: qwen3.context_length)")
    p = sub.add_parser("draft-logits", help="a DFlash draft's block logits after a context")
    p.add_argument("model")
    p.add_argument("draft")
    p.add_argument("--tokens", required=True, help="context token ids, then the block's first")
    p.add_argument("--out", required=True, help="output .npy: float32 [block_size - 1, n_vocab]")
    p.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    p = sub.add_parser("info", help="print hyper-parameters and tensor shapes")
    p.add_argument("model")
    args = ap.parse_args(argv)
    try:
        return {"logits": cmd_logits, "serve": cmd_serve, "info": cmd_info,
                "draft-logits": cmd_draft_logits}[args.cmd](args)
    except (GGUFError, ModelError) as exc:
        print("error: %s" % exc, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
