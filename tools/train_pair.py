#!/usr/bin/env python3
"""train_pair.py - a small Qwen3 target trained on real text and a DFlash draft distilled from it.

One script, corpus to GGUF: GNU info manuals and license texts that Debian installs
(/usr/share/info/*.info*.gz, /usr/share/common-licenses/*; no download) -> a sentencepiece BPE
tokenizer with a reserved <|mask|> -> a Qwen3 target (the math of tools/ember_ref.py: pre-RMSNorm,
per-head q/k RMSNorm, NEOX RoPE, GQA, SwiGLU, tied LM head) -> the target's greedy continuations of
training prompts and its hidden states -> a DFlash draft trained as SpecForge does (anchors in the
generated text, block [token, MASK x 15] at positions a..a+15, context = fc + hidden_norm over the
target layers' states strictly before the anchor, non-causal in-block attention, slot k labelled
with token a+k, loss weight exp(-(k-1)/gamma)) -> GGUF v3 files (general.alignment 32, tensors in
ggml's {ne0 = in, ne1 = out} order, the key names engine/gen.c writes) and held-out prompt ids,
plus probe.npz (both models' logits on one held-out prompt, to compare with `ember logits`).

  train_pair.py all  --out DIR [--preset NAME] [--seed N]   everything; DIR/log.json has it all
  train_pair.py eval --target T.gguf --draft D.gguf --prompts P.u32 [--n-prompts N] [--gen N]
      tau at depths 3/5/7/15, per-slot acceptance, held-out perplexity, from the GGUF files (the
      weights ember reads), with the greedy loop of engine/spec.c replayed exactly

Weights are written as Q8_0 (norms F32); training evaluates with the Q8_0-rounded weights (what
ember dequantizes) so its predicted tau is the one ember measures on the files.
"""

import argparse
import glob
import gzip
import hashlib
import json
import math
import os
import struct
import sys
import time
import zlib

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

PRESETS = {
    # d, layers, heads, kv heads, head_dim, ffn, vocab, train seq, batch, steps, lr
    "cpu": dict(n_embd=128, n_layer=4, n_head=4, n_head_kv=2, head_dim=32, n_ff=384, n_vocab=2048,
                seq=256, batch=16, steps=1500, lr=3e-3,
                gen_prompts=768, prompt_len=64, gen_len=96,
                draft_layers=2, draft_steps=1500, draft_batch=16, draft_anchors=8, draft_lr=2e-3),
    "gpu": dict(n_embd=192, n_layer=6, n_head=6, n_head_kv=2, head_dim=32, n_ff=512, n_vocab=2048,
                seq=256, batch=64, steps=3000, lr=3e-3,
                gen_prompts=8192, prompt_len=64, gen_len=128,
                draft_layers=2, draft_steps=3000, draft_batch=64, draft_anchors=16, draft_lr=2e-3),
    # head_dim 64 (the CUDA attention kernels take 64 or 128, not 32), a 3-layer draft trained twice
    # as long on twice the greedy data: the gpu preset's draft accepted its first slot 33% of the time.
    "gpu64": dict(n_embd=256, n_layer=6, n_head=4, n_head_kv=2, head_dim=64, n_ff=768, n_vocab=2048,
                  seq=256, batch=64, steps=3000, lr=3e-3,
                  gen_prompts=16384, prompt_len=64, gen_len=128,
                  draft_layers=3, draft_steps=6000, draft_batch=64, draft_anchors=16, draft_lr=2e-3),
    # gpu64 on the H200 (2026-12-02, cut at draft step 3500 of 6000): the target memorised its 2.2M
    # tokens (3000 steps of 64x256 = 22 epochs: train ppl 1.41, held-out 10.63), so its greedy
    # continuations of training prompts are recalled text, unlike what it generates on held-out
    # prompts. gpu64b: a third of the target steps (~7 epochs), and greedy data from training
    # prompts with 15% of their tokens replaced at random, so the draft learns the target generating.
    "gpu64b": dict(n_embd=256, n_layer=6, n_head=4, n_head_kv=2, head_dim=64, n_ff=768, n_vocab=2048,
                   seq=256, batch=64, steps=1000, lr=3e-3,
                   gen_prompts=16384, prompt_len=64, gen_len=128, prompt_noise=0.15,
                   draft_layers=3, draft_steps=6000, draft_batch=64, draft_anchors=16, draft_lr=2e-3),
    # CI's end-to-end run on the CPU (tests/tools/test_train_pair.py, ~45 s on 2 cores): gpu64b's head_dim-64
    # 4/2 GQA shapes, tiny; vocab 512 (sentencepiece needs 395 here: 256 bytes, 4 reserved, the characters).
    "smoke": dict(n_embd=128, n_layer=2, n_head=4, n_head_kv=2, head_dim=64, n_ff=256, n_vocab=512,
                  seq=128, batch=4, steps=60, lr=3e-3,
                  gen_prompts=64, prompt_len=64, gen_len=48, prompt_noise=0.15, ppl_windows=16,
                  draft_layers=2, draft_steps=60, draft_batch=4, draft_anchors=4, draft_lr=2e-3, draft_soft=0.5),
}
# gpu64b's target with a stronger draft: gpu64c mixes the target's distribution into the labels
# (draft_soft, half of the loss) on twice the greedy data; gpu64d adds a fourth draft layer.
PRESETS["gpu64c"] = dict(PRESETS["gpu64b"], gen_prompts=32768, draft_steps=8000, draft_soft=0.5)
PRESETS["gpu64d"] = dict(PRESETS["gpu64c"], draft_layers=4)
BLOCK = 16
RMS_EPS = 1e-6
ROPE_THETA = 10000.0
LOSS_GAMMA = 7.0
N_TARGET_LAYERS = 4


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


# ---------------------------------------------------------------- corpus and tokenizer

def corpus_files():
    files = sorted(glob.glob("/usr/share/info/*.info*.gz"))
    seen, lic = set(), []
    for p in sorted(glob.glob("/usr/share/common-licenses/*")):
        real = os.path.realpath(p)
        if os.path.isfile(real) and real not in seen:
            seen.add(real)
            lic.append(real)
    return files + lic


def read_doc(path):
    raw = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
    text = raw.decode("utf-8", errors="replace")
    lines = []
    for ln in text.split("\n"):
        ln = ln.rstrip()
        if "\x1f" in ln or ln.startswith("File: ") or ln.startswith("Tag Table:") or \
                ln.startswith("End Tag Table") or ln.startswith("Node: ") or ln.startswith("Ref: "):
            continue
        if not ln and lines and not lines[-1]:
            continue                                  # at most one blank line in a row
        lines.append(ln)
    return lines


def split_corpus(holdout_every=20, chunk_lines=64):
    """(train chunks, held-out chunks, file list): each document cut into chunks of chunk_lines
    lines; a chunk is held out when crc32(file name, index) % holdout_every == 0."""
    train, held, files = [], [], []
    for path in corpus_files():
        lines = read_doc(path)
        name = os.path.basename(path)
        files.append({"file": path, "lines": len(lines), "bytes": sum(len(x) + 1 for x in lines)})
        for i in range(0, len(lines), chunk_lines):
            chunk = lines[i:i + chunk_lines]
            (held if zlib.crc32(("%s:%d" % (name, i)).encode()) % holdout_every == 0 else train).append(chunk)
    return train, held, files


def train_tokenizer(train_chunks, prefix, vocab):
    import sentencepiece as spm
    lines = [ln for ch in train_chunks for ln in ch if ln]
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=prefix, vocab_size=vocab, model_type="bpe",
        byte_fallback=True, character_coverage=1.0, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=False, split_digits=True,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, control_symbols=["<|mask|>"],
        num_threads=2, minloglevel=2, max_sentence_length=8192)
    return spm.SentencePieceProcessor(model_file=prefix + ".model")


def encode_chunks(sp, chunks):
    """One id stream: lines joined by the newline byte token, chunks separated by eos."""
    nl, eos = sp.piece_to_id("<0x0A>"), sp.eos_id()
    out = []
    for ch in chunks:
        for ids in sp.encode([ln for ln in ch]):
            out.extend(ids)
            out.append(nl)
        out.append(eos)
    return np.asarray(out, dtype=np.int64)


# ---------------------------------------------------------------- models (ember_ref.py's math)

def rms(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS) * w


def rope_tables(positions, head_dim, device):
    half = head_dim // 2
    inv = ROPE_THETA ** (-torch.arange(half, dtype=torch.float64) * 2.0 / head_dim)
    ang = positions.to(torch.float64).cpu()[..., None] * inv
    return torch.cos(ang).float().to(device), torch.sin(ang).float().to(device)


def rope(x, cos, sin):
    """NEOX rotate-half; x [..., T, D], cos/sin [T, D/2] (broadcast over leading dims)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def new_layer(cfg, gen, n_layers_for_scale):
    d, hd, H, KV, ff = cfg["n_embd"], cfg["head_dim"], cfg["n_head"], cfg["n_head_kv"], cfg["n_ff"]

    def w(o, i, scale=1.0):
        return torch.nn.Parameter(torch.randn(o, i, generator=gen) * 0.02 * scale)
    s = 1.0 / math.sqrt(2 * n_layers_for_scale)
    return torch.nn.ParameterDict({
        "attn_norm": torch.nn.Parameter(torch.ones(d)), "ffn_norm": torch.nn.Parameter(torch.ones(d)),
        "attn_q": w(H * hd, d), "attn_k": w(KV * hd, d), "attn_v": w(KV * hd, d),
        "attn_output": w(d, H * hd, s), "attn_q_norm": torch.nn.Parameter(torch.ones(hd)),
        "attn_k_norm": torch.nn.Parameter(torch.ones(hd)),
        "ffn_gate": w(ff, d), "ffn_up": w(ff, d), "ffn_down": w(d, ff, s)})


def mlp(L, x):
    h = rms(x, L["ffn_norm"])
    return x + (F.silu(h @ L["ffn_gate"].T) * (h @ L["ffn_up"].T)) @ L["ffn_down"].T


def attend(q, k, v, mask):
    """q [B,H,T,D], k/v [B,KV,S,D] (q head h reads kv head h // rep), mask [T,S] or [B,T,S] bool."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    s = s.masked_fill(~(mask if mask.dim() == 2 else mask[:, None]), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


class Target(torch.nn.Module):
    def __init__(self, cfg, seed):
        super().__init__()
        self.cfg = cfg
        g = torch.Generator().manual_seed(seed)
        self.embed = torch.nn.Parameter(torch.randn(cfg["n_vocab"], cfg["n_embd"], generator=g) * 0.02)
        self.layers = torch.nn.ModuleList([new_layer(cfg, g, cfg["n_layer"]) for _ in range(cfg["n_layer"])])
        self.output_norm = torch.nn.Parameter(torch.ones(cfg["n_embd"]))

    def forward(self, tokens, capture=(), cache=None, pos0=0):
        """tokens [B,T] at positions pos0..; returns (final-normed hidden [B,T,d], {layer: residual
        after it}). cache: None or a list filled/extended with per-layer (k, v)."""
        c = self.cfg
        B, T = tokens.shape
        H, KV, D = c["n_head"], c["n_head_kv"], c["head_dim"]
        cos, sin = rope_tables(torch.arange(pos0, pos0 + T), D, tokens.device)
        S = pos0 + T
        mask = torch.arange(S, device=tokens.device)[None, :] <= torch.arange(pos0, S, device=tokens.device)[:, None]
        x = self.embed[tokens]
        caps = {}
        for li, L in enumerate(self.layers):
            h = rms(x, L["attn_norm"])
            q = rope(rms((h @ L["attn_q"].T).view(B, T, H, D), L["attn_q_norm"]).transpose(1, 2), cos, sin)
            k = rope(rms((h @ L["attn_k"].T).view(B, T, KV, D), L["attn_k_norm"]).transpose(1, 2), cos, sin)
            v = (h @ L["attn_v"].T).view(B, T, KV, D).transpose(1, 2)
            if cache is not None:
                if len(cache) > li:
                    k = torch.cat([cache[li][0], k], dim=2)
                    v = torch.cat([cache[li][1], v], dim=2)
                    cache[li] = (k, v)
                else:
                    cache.append((k, v))
            a = attend(q, k, v, mask).transpose(1, 2).reshape(B, T, H * D)
            x = x + a @ L["attn_output"].T
            x = mlp(L, x)
            if li in capture:
                caps[li] = x
        return rms(x, self.output_norm), caps

    def logits(self, hidden):
        return hidden @ self.embed.T


class Draft(torch.nn.Module):
    def __init__(self, cfg, n_layer, target_layers, mask_id, seed):
        super().__init__()
        self.cfg, self.target_layers, self.mask_id = cfg, list(target_layers), mask_id
        g = torch.Generator().manual_seed(seed)
        d = cfg["n_embd"]
        self.fc = torch.nn.Parameter(torch.randn(d, len(target_layers) * d, generator=g) * 0.02)
        self.hidden_norm = torch.nn.Parameter(torch.ones(d))
        self.layers = torch.nn.ModuleList([new_layer(cfg, g, n_layer) for _ in range(n_layer)])
        self.output_norm = torch.nn.Parameter(torch.ones(d))

    def forward(self, embed, caps, tokens, anchors):
        """Block logits [B, N, BLOCK-1, V]: block n = [tokens[a_n], MASK...] at positions a_n..,
        context = the target states at positions < a_n. caps: {layer: [B, L, d]}, anchors [B, N]."""
        c = self.cfg
        B, Lc = tokens.shape
        N = anchors.shape[1]
        H, KV, D = c["n_head"], c["n_head_kv"], c["head_dim"]
        dev = tokens.device
        feats = torch.cat([caps[i] for i in self.target_layers], dim=-1)
        ctx = rms(feats @ self.fc.T, self.hidden_norm)                               # [B, L, d]
        slot = torch.arange(BLOCK, device=dev)
        blk_pos = (anchors[:, :, None] + slot).reshape(B, N * BLOCK)                  # [B, NB]
        first = torch.gather(tokens, 1, anchors)                                      # [B, N]
        blk_tok = torch.full((B, N, BLOCK), self.mask_id, dtype=torch.long, device=dev)
        blk_tok[:, :, 0] = first
        x = embed[blk_tok.reshape(B, N * BLOCK)]
        ccos, csin = rope_tables(torch.arange(Lc), D, dev)
        bcos, bsin = rope_tables(blk_pos, D, dev)                                     # [B, NB, D/2]
        bcos, bsin = bcos[:, None], bsin[:, None]
        # visibility: context key j < anchor; block keys of the same block only
        anc = anchors[:, :, None].expand(B, N, BLOCK).reshape(B, N * BLOCK)
        vis_ctx = torch.arange(Lc, device=dev)[None, None, :] < anc[:, :, None]
        bid = torch.arange(N, device=dev).repeat_interleave(BLOCK)
        vis_blk = (bid[:, None] == bid[None, :])[None].expand(B, -1, -1)
        mask = torch.cat([vis_ctx, vis_blk], dim=-1)
        for L in self.layers:
            h = rms(x, L["attn_norm"])
            q = rope(rms((h @ L["attn_q"].T).view(B, N * BLOCK, H, D), L["attn_q_norm"]).transpose(1, 2), bcos, bsin)
            kb = rope(rms((h @ L["attn_k"].T).view(B, N * BLOCK, KV, D), L["attn_k_norm"]).transpose(1, 2), bcos, bsin)
            vb = (h @ L["attn_v"].T).view(B, N * BLOCK, KV, D).transpose(1, 2)
            kc = rope(rms((ctx @ L["attn_k"].T).view(B, Lc, KV, D), L["attn_k_norm"]).transpose(1, 2), ccos, csin)
            vc = (ctx @ L["attn_v"].T).view(B, Lc, KV, D).transpose(1, 2)
            a = attend(q, torch.cat([kc, kb], 2), torch.cat([vc, vb], 2), mask)
            x = x + a.transpose(1, 2).reshape(B, N * BLOCK, H * D) @ L["attn_output"].T
            x = mlp(L, x)
        x = rms(x.view(B, N, BLOCK, -1)[:, :, 1:], self.output_norm)
        return x @ embed.T


def default_layers(n_tl, n_layer):
    """engine/draft.c ember_draft_default_layers."""
    lo, hi = (1, n_layer - 3) if n_layer >= 8 else (0, n_layer - 1)
    return [lo if n_tl == 1 else lo + int(i * (hi - lo) / (n_tl - 1) + 0.5) for i in range(n_tl)]


def q8_0(a):
    """ggml Q8_0 of a float32 [rows, cols] array (cols % 32 == 0): per 32 elements an F16 scale
    d = max|x| / 127 and int8 q = round(x / d). Returns (scales f16 [rows, cols/32], q int8)."""
    b = a.reshape(a.shape[0], -1, 32).astype(np.float32)
    d = (np.abs(b).max(-1) / 127.0).astype(np.float16)
    inv = np.where(d.astype(np.float32) > 0, 1.0 / np.maximum(d.astype(np.float32), 1e-30), 0.0)
    q = np.clip(np.rint(b * inv[..., None]), -127, 127).astype(np.int8)
    return d, q


def round_q8_(module):
    """Rounds every matrix to what its Q8_0 GGUF tensor dequantizes to (d * q, as ember and
    gguf_reader.py read it); 1-D norms stay F32."""
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() == 2:
                d, q = q8_0(p.detach().cpu().numpy())
                deq = (d.astype(np.float32)[..., None] * q.astype(np.float32)).reshape(p.shape)
                p.copy_(torch.from_numpy(deq))


# ---------------------------------------------------------------- GGUF writer

class GGUFWriter:
    """GGUF v3 as engine/gguf_write.c writes it: header, KVs in insertion order, tensor infos,
    data section at general.alignment (32), every tensor at an aligned offset, zero padding."""
    ALIGN = 32

    def __init__(self):
        self.kv, self.tensors = [], []

    @staticmethod
    def _str(s):
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def u32(self, k, v):
        self.kv.append(self._str(k) + struct.pack("<II", 4, v))

    def i32(self, k, v):
        self.kv.append(self._str(k) + struct.pack("<Ii", 5, v))

    def u64(self, k, v):
        self.kv.append(self._str(k) + struct.pack("<IQ", 10, v))

    def f32(self, k, v):
        self.kv.append(self._str(k) + struct.pack("<If", 6, v))

    def bool(self, k, v):
        self.kv.append(self._str(k) + struct.pack("<IB", 7, 1 if v else 0))

    def str(self, k, v):
        self.kv.append(self._str(k) + struct.pack("<I", 8) + self._str(v))

    def arr(self, k, elem, fmt, values):
        self.kv.append(self._str(k) + struct.pack("<IIQ", 9, elem, len(values)) +
                       b"".join(struct.pack(fmt, x) for x in values))

    def str_arr(self, k, values):
        self.kv.append(self._str(k) + struct.pack("<IIQ", 9, 8, len(values)) + b"".join(self._str(s) for s in values))

    def tensor(self, name, w):
        """w: torch/numpy [out, in] (or [n]); Q8_0 for matrices, F32 for vectors."""
        a = w.detach().cpu().numpy() if hasattr(w, "detach") else np.asarray(w)
        if a.ndim == 2:
            d, q = q8_0(a)
            blocks = np.empty(d.shape, dtype=[("d", "<f2"), ("q", "i1", 32)])
            blocks["d"], blocks["q"] = d, q
            data, code = blocks.tobytes(), 8
        else:
            data, code = a.astype("<f4").tobytes(), 0
        self.tensors.append((name, list(reversed(a.shape)), code, data))

    def write(self, path):
        infos, off = [], 0
        for name, dims, code, data in self.tensors:
            infos.append(self._str(name) + struct.pack("<I", len(dims)) +
                         b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", code, off))
            off += (len(data) + self.ALIGN - 1) // self.ALIGN * self.ALIGN
        head = b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv)) + b"".join(self.kv) + b"".join(infos)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(head + b"\0" * (-len(head) % self.ALIGN))
            for _, _, _, data in self.tensors:
                f.write(data + b"\0" * (-len(data) % self.ALIGN))
        os.replace(tmp, path)


def write_layer_tensors(w, layers):
    for i, L in enumerate(layers):
        for k in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm",
                  "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"):
            w.tensor("blk.%d.%s.weight" % (i, k), L[k])


def write_hparams(w, arch, cfg, n_layer, ctx_len):
    p = arch + "."
    w.u32(p + "block_count", n_layer)
    w.u32(p + "context_length", ctx_len)
    w.u32(p + "embedding_length", cfg["n_embd"])
    w.u32(p + "feed_forward_length", cfg["n_ff"])
    w.u32(p + "attention.head_count", cfg["n_head"])
    w.u32(p + "attention.head_count_kv", cfg["n_head_kv"])
    w.u32(p + "attention.key_length", cfg["head_dim"])
    w.u32(p + "attention.value_length", cfg["head_dim"])
    w.f32(p + "attention.layer_norm_rms_epsilon", RMS_EPS)
    w.f32(p + "rope.freq_base", ROPE_THETA)


def write_target(path, target, sp, meta):
    w = GGUFWriter()
    w.str("general.architecture", "qwen3")
    w.str("general.name", meta["name"])
    w.u32("general.alignment", 32)
    w.u32("general.file_type", 7)
    for k, v in meta["kv"].items():
        (w.u64 if isinstance(v, int) else w.str)(k, v)
    write_hparams(w, "qwen3", target.cfg, target.cfg["n_layer"], meta["ctx_len"])
    w.str("tokenizer.ggml.model", "llama")
    w.str_arr("tokenizer.ggml.tokens", sp["tokens"])
    w.arr("tokenizer.ggml.scores", 6, "<f", sp["scores"])
    w.arr("tokenizer.ggml.token_type", 5, "<i", sp["types"])
    w.u32("tokenizer.ggml.unknown_token_id", sp["unk"])
    w.u32("tokenizer.ggml.bos_token_id", sp["bos"])
    w.u32("tokenizer.ggml.eos_token_id", sp["eos"])
    w.bool("tokenizer.ggml.add_bos_token", False)
    w.tensor("token_embd.weight", target.embed)
    w.tensor("output_norm.weight", target.output_norm)
    write_layer_tensors(w, target.layers)
    w.write(path)


def write_draft(path, draft, meta):
    w = GGUFWriter()
    w.str("general.architecture", "dflash")
    w.str("general.name", meta["name"])
    w.u32("general.alignment", 32)
    w.u32("general.file_type", 7)
    for k, v in meta["kv"].items():
        (w.u64 if isinstance(v, int) else w.str)(k, v)
    write_hparams(w, "dflash", draft.cfg, len(draft.layers), meta["ctx_len"])
    w.u32("dflash.block_size", BLOCK)
    w.arr("dflash.target_layers", 5, "<i", [i + 1 for i in draft.target_layers])   # layer id + 1
    w.u32("tokenizer.ggml.mask_token_id", draft.mask_id)
    w.tensor("fc.weight", draft.fc)
    w.tensor("hidden_norm.weight", draft.hidden_norm)
    w.tensor("output_norm.weight", draft.output_norm)
    write_layer_tensors(w, draft.layers)
    w.write(path)


def load_pair(target_path, draft_path, device):
    """Target and draft from GGUF files (dequantized by gguf_reader.py), as the torch modules."""
    from gguf_reader import GGUFReader
    tr = GGUFReader(target_path)
    g = lambda r, k: r.get_int(k)  # noqa: E731
    cfg = {"n_embd": g(tr, "qwen3.embedding_length"), "n_layer": g(tr, "qwen3.block_count"),
           "n_head": g(tr, "qwen3.attention.head_count"), "n_head_kv": g(tr, "qwen3.attention.head_count_kv"),
           "head_dim": g(tr, "qwen3.attention.key_length"), "n_ff": g(tr, "qwen3.feed_forward_length"),
           "n_vocab": int(tr.tensor_map["token_embd.weight"].dims[1])}
    assert abs(tr.get_float("qwen3.rope.freq_base") - ROPE_THETA) < 1e-3
    t = Target(cfg, 0)

    def fill(module, reader, names):
        with torch.no_grad():
            for attr, name in names:
                obj, key = attr
                obj[key].copy_(torch.from_numpy(reader.dequantize(name).astype(np.float32)))

    with torch.no_grad():
        t.embed.copy_(torch.from_numpy(tr.dequantize("token_embd.weight").astype(np.float32)))
        t.output_norm.copy_(torch.from_numpy(tr.dequantize("output_norm.weight").astype(np.float32)))
    keys = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm",
            "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")
    fill(t, tr, [((t.layers[i], k), "blk.%d.%s.weight" % (i, k)) for i in range(cfg["n_layer"]) for k in keys])
    d = None
    if draft_path:
        dr = GGUFReader(draft_path)
        ids = [int(v) - 1 for v in dr.get("dflash.target_layers")]
        d = Draft(cfg, g(dr, "dflash.block_count"), ids, g(dr, "tokenizer.ggml.mask_token_id"), 0)
        assert g(dr, "dflash.block_size") == BLOCK
        with torch.no_grad():
            for name in ("fc", "hidden_norm", "output_norm"):
                getattr(d, name).copy_(torch.from_numpy(dr.dequantize(name + ".weight").astype(np.float32)))
        fill(d, dr, [((d.layers[i], k), "blk.%d.%s.weight" % (i, k)) for i in range(len(d.layers)) for k in keys])
        d.to(device)
    return t.to(device), d


# ---------------------------------------------------------------- training, generation, evaluation

def lr_at(step, steps, lr, warm=100):
    warm = min(warm, max(1, steps // 10))        # a run shorter than 1000 steps warms up for a tenth of it
    if step < warm:
        return lr * (step + 1) / warm
    return lr * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, steps - warm))) * 0.9 + lr * 0.1 * (1 - step / steps)


@torch.no_grad()
def perplexity(target, ids, seq, device, max_windows=256):
    n = min(max_windows, (len(ids) - 1) // seq)
    tot, cnt = 0.0, 0
    for i0 in range(0, n, 16):
        rows = [ids[j * seq:(j + 1) * seq + 1] for j in range(i0, min(n, i0 + 16))]
        x = torch.tensor(np.stack(rows), device=device)
        h, _ = target(x[:, :-1])
        loss = F.cross_entropy(target.logits(h).flatten(0, 1), x[:, 1:].flatten(), reduction="sum")
        tot += loss.item()
        cnt += x[:, 1:].numel()
    return math.exp(tot / cnt), cnt


def train_target(cfg, ids, seed, device, steps_override=None):
    torch.manual_seed(seed)
    model = Target(cfg, seed).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], betas=(0.9, 0.95), weight_decay=0.1)
    rng = np.random.default_rng(seed)
    steps, seq, bs = steps_override or cfg["steps"], cfg["seq"], cfg["batch"]
    losses, t0 = [], time.time()
    for step in range(steps):
        starts = rng.integers(0, len(ids) - seq - 1, size=bs)
        x = torch.tensor(np.stack([ids[s:s + seq + 1] for s in starts]), device=device)
        for gparam in opt.param_groups:
            gparam["lr"] = lr_at(step, steps, cfg["lr"])
        h, _ = model(x[:, :-1])
        loss = F.cross_entropy(model.logits(h).flatten(0, 1), x[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step % 100 == 0 or step == steps - 1:
            log("target step %d/%d loss %.4f (%.0fs)" % (step, steps, loss.item(), time.time() - t0))
    return model, losses, time.time() - t0


@torch.no_grad()
def greedy(target, prompts, n_gen, batch=1024):
    """prompts [G, P] -> greedy tokens [G, n_gen] (token 0 from the prompt's last row)."""
    out = []
    for b0 in range(0, prompts.shape[0], batch):
        x = prompts[b0:b0 + batch]
        cache = []
        h, _ = target(x, cache=cache)
        tok = target.logits(h[:, -1]).argmax(-1)
        toks = [tok]
        for i in range(n_gen - 1):
            h, _ = target(tok[:, None], cache=cache, pos0=x.shape[1] + i)
            tok = target.logits(h[:, -1]).argmax(-1)
            toks.append(tok)
        out.append(torch.stack(toks, 1))
    return torch.cat(out)


def draft_loss(draft, target, seqs, anchors, weights, soft=0.0):
    """Weighted block loss. soft > 0 mixes in the cross-entropy against the target's own
    distribution at the position before each label (what the greedy label is the argmax of):
    (1 - soft) * CE(hard label) + soft * CE(target softmax)."""
    with torch.no_grad():
        hid, caps = target(seqs, capture=set(draft.target_layers))
    logits = draft(target.embed.detach(), caps, seqs, anchors)                 # [B, N, 15, V]
    lab_idx = anchors[:, :, None] + torch.arange(1, BLOCK, device=seqs.device)
    labels = torch.gather(seqs, 1, lab_idx.flatten(1)).view_as(lab_idx)
    ce = F.cross_entropy(logits.flatten(0, 2), labels.flatten(), reduction="none").view_as(labels)
    if soft > 0:
        with torch.no_grad():
            B, N, K = lab_idx.shape
            prev = torch.gather(hid, 1, (lab_idx - 1).flatten(1)[:, :, None].expand(-1, -1, hid.shape[-1]))
            probs = torch.softmax(target.logits(prev), -1).view(B, N, K, -1)
        ce_soft = -(probs * torch.log_softmax(logits, -1)).sum(-1)
        ce = (1 - soft) * ce + soft * ce_soft
    acc = (logits.argmax(-1) == labels).float().mean().item()
    return (ce * weights).sum() / (weights.sum() * ce.shape[0] * ce.shape[1]), acc


def train_draft(cfg, target, seqs, prompt_len, mask_id, seed, device, steps_override=None, time_s=None):
    """time_s: a wall-clock budget for the loop; after 50 steps the step count is cut to what fits
    (the lr schedule follows the new count), so a shared GPU ends the run with a finished schedule."""
    tl = default_layers(N_TARGET_LAYERS, cfg["n_layer"])
    draft = Draft(cfg, cfg["draft_layers"], tl, mask_id, seed + 1).to(device)
    untrained = Draft(cfg, cfg["draft_layers"], tl, mask_id, seed + 1)
    untrained.load_state_dict(draft.state_dict())
    for p in target.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(draft.parameters(), lr=cfg["draft_lr"], betas=(0.9, 0.95), weight_decay=0.0)
    rng = np.random.default_rng(seed + 2)
    steps, bs, N = steps_override or cfg["draft_steps"], cfg["draft_batch"], cfg["draft_anchors"]
    Lseq = seqs.shape[1]
    weights = torch.exp(-torch.arange(0, BLOCK - 1, dtype=torch.float32) / LOSS_GAMMA).to(device)
    losses, accs, t0 = [], [], time.time()
    soft = cfg.get("draft_soft", 0.0)
    step = 0
    while step < steps:
        if time_s and step == 50:
            fit = int(time_s / ((time.time() - t0) / 50))
            if fit < steps:
                log("draft: %d steps fit in the %.0fs left (preset %d; at least 100)" % (max(fit, 100), max(time_s, 0), steps))
                steps = max(fit, 100)
        rows = rng.integers(0, seqs.shape[0], size=bs)
        # anchors: the last prompt token .. so that the block's labels stay inside the sequence
        anchors = np.stack([np.sort(rng.choice(np.arange(prompt_len - 1, Lseq - BLOCK + 1), N, replace=False))
                            for _ in range(bs)])
        for gparam in opt.param_groups:
            gparam["lr"] = lr_at(step, steps, cfg["draft_lr"])
        loss, acc = draft_loss(draft, target, seqs[rows], torch.tensor(anchors, device=device), weights, soft)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        accs.append(acc)
        if step % 100 == 0 or step == steps - 1:
            log("draft step %d/%d loss %.4f slot-acc %.3f (%.0fs)" % (step, steps, loss.item(), acc, time.time() - t0))
        step += 1
    return draft, untrained.to(device), losses, accs, time.time() - t0


@torch.no_grad()
def spec_eval(target, draft, prompts, n_gen, depths=(3, 5, 7, 15)):
    """engine/spec.c replayed on the plain greedy continuation (spec output equals it): per depth
    tau = (n_gen - 1) / target steps over all prompts, and per-slot acceptance at depth 15."""
    dev = prompts.device
    G, P = prompts.shape
    gen = greedy(target, prompts, n_gen)
    seqs = torch.cat([prompts, gen], 1)
    res = {d: {"steps": 0, "tokens": 0, "per_prompt": []} for d in depths}
    reached = np.zeros(BLOCK - 1)
    accepted = np.zeros(BLOCK - 1)
    for g0 in range(0, G, 32):
        s = seqs[g0:g0 + 32]
        _, caps = target(s, capture=set(draft.target_layers))
        anchors = torch.arange(P, P + n_gen - 1, device=dev)[None].expand(s.shape[0], -1).contiguous()
        prop = draft(target.embed, caps, s, anchors).argmax(-1).cpu().numpy()      # [b, n_gen-1, 15]
        sn = s.cpu().numpy()
        for b in range(s.shape[0]):
            for d in depths:
                produced, pos, steps = 1, P, 0
                while produced < n_gen:
                    k = min(n_gen - produced - 1, d)
                    acc = 0
                    while acc < k and prop[b, pos - P, acc] == sn[b, pos + 1 + acc]:
                        acc += 1
                    if d == depths[-1]:
                        reached[:min(acc + 1, k)] += 1
                        accepted[:acc] += 1
                    produced += acc + 1
                    pos += acc + 1
                    steps += 1
                res[d]["steps"] += steps
                res[d]["tokens"] += n_gen - 1
                res[d]["per_prompt"].append(round((n_gen - 1) / steps, 4))
    out = {"tau": {str(d): round(res[d]["tokens"] / res[d]["steps"], 4) for d in depths},
           "tau_per_prompt_depth15": res[depths[-1]]["per_prompt"],
           "accept_rate_per_slot": [round(a / r, 4) if r else None for a, r in zip(accepted, reached)],
           "slot_reached": reached.astype(int).tolist()}
    # how language-like the greedy text is: share of tokens inside a 1- or 2-token cycle
    gn = gen.cpu().numpy()
    cyc = np.mean([(gn[:, i] == gn[:, i - 1]) | (gn[:, i] == gn[:, i - 2]) for i in range(2, n_gen)])
    out["greedy_short_cycle_fraction"] = round(float(cyc), 4)
    out["greedy_distinct_4gram_fraction"] = round(float(np.mean([
        len({tuple(r[i:i + 4]) for i in range(len(r) - 3)}) / (len(r) - 3) for r in gn])), 4)
    return out, gen


@torch.no_grad()
def write_probe(path, target, draft, prompt):
    """The in-memory models' logits on one held-out prompt, for a comparison with `ember logits`
    (tests/tools/test_train_pair.py): the target's at every position [P, V], and the draft's block
    [BLOCK - 1, V] that opens with the prompt's last token (context: the positions before it)."""
    x = prompt[None]
    h, caps = target(x, capture=set(draft.target_layers))
    block = draft(target.embed, caps, x, torch.tensor([[x.shape[1] - 1]], device=x.device))
    np.savez(path, tokens=prompt.cpu().numpy(), target_logits=target.logits(h)[0].cpu().numpy(),
             draft_logits=block[0, 0].cpu().numpy())


def heldout_prompts(held_ids, n, plen, seed):
    rng = np.random.default_rng(seed)
    starts = rng.choice(np.arange(0, len(held_ids) - plen, plen), n, replace=False)
    return np.stack([held_ids[s:s + plen] for s in starts])


def cmd_prep(a):
    """Corpus -> tokenizer -> ids: DIR/{tokenizer.model, vocab.json, train.u32, heldout.u32,
    prep.json}. Needs sentencepiece; what `train` reads needs only torch and numpy."""
    os.makedirs(a.out, exist_ok=True)
    n_vocab = PRESETS[a.preset]["n_vocab"]
    t = time.time()
    train_chunks, held_chunks, files = split_corpus()
    sp = train_tokenizer(train_chunks, os.path.join(a.out, "tokenizer"), n_vocab)
    train_ids, held_ids = encode_chunks(sp, train_chunks), encode_chunks(sp, held_chunks)
    n = sp.get_piece_size()
    vocab = {"tokens": [sp.id_to_piece(i) for i in range(n)], "scores": [sp.get_score(i) for i in range(n)],
             "types": [2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i) else 1
                       for i in range(n)],
             "unk": sp.unk_id(), "bos": sp.bos_id(), "eos": sp.eos_id(), "mask": sp.piece_to_id("<|mask|>")}
    with open(os.path.join(a.out, "vocab.json"), "w") as f:
        json.dump(vocab, f)
    train_ids.astype("<u4").tofile(os.path.join(a.out, "train.u32"))
    held_ids.astype("<u4").tofile(os.path.join(a.out, "heldout.u32"))
    total = sum(f["bytes"] for f in files)
    prep = {"corpus": {"files": [f["file"] for f in files], "n_files": len(files), "bytes": total,
                       "train_chunks": len(train_chunks), "heldout_chunks": len(held_chunks),
                       "holdout_rule": "64-line chunks with crc32('file:line') % 20 == 0"},
            "tokens": {"train": int(len(train_ids)), "heldout": int(len(held_ids)), "mask_id": vocab["mask"],
                       "bytes_per_token": round(total / (len(train_ids) + len(held_ids)), 3)},
            "tokenizer": "sentencepiece %s BPE, vocab %d, byte fallback, <|mask|> control id %d"
                         % (__import__("sentencepiece").__version__, n_vocab, vocab["mask"]),
            "wall_s": round(time.time() - t, 1)}
    with open(os.path.join(a.out, "prep.json"), "w") as f:
        json.dump(prep, f, indent=1)
    log("corpus %d files %d bytes, %d train / %d held-out tokens, mask id %d" % (
        len(files), total, len(train_ids), len(held_ids), vocab["mask"]))
    return 0


def cmd_all(a):
    cmd_prep(a)
    return cmd_train(a)


def cmd_train(a):
    cfg = dict(PRESETS[a.preset])
    if a.gen_prompts:
        cfg["gen_prompts"] = a.gen_prompts
    device = torch.device("cuda" if torch.cuda.is_available() and not a.cpu else "cpu")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    T0 = time.time()
    prep = json.load(open(os.path.join(a.out, "prep.json")))
    vocab = json.load(open(os.path.join(a.out, "vocab.json")))
    train_ids = np.fromfile(os.path.join(a.out, "train.u32"), dtype="<u4").astype(np.int64)
    held_ids = np.fromfile(os.path.join(a.out, "heldout.u32"), dtype="<u4").astype(np.int64)
    mask_id = vocab["mask"]
    logd = {"preset": a.preset, "seed": a.seed, "device": str(device), "torch": torch.__version__,
            "hyper": cfg, "block": BLOCK, "rope_theta": ROPE_THETA, "rms_eps": RMS_EPS,
            "loss_decay_gamma": LOSS_GAMMA, "n_target_layers": N_TARGET_LAYERS, "wall_s": {"prep": prep["wall_s"]},
            "corpus": prep["corpus"], "tokens": prep["tokens"], "tokenizer": prep["tokenizer"]}
    if device.type == "cuda":       # TF32 while training only; greedy data and evaluation in full fp32
        torch.backends.cuda.matmul.allow_tf32 = True
        logd["gpu"] = torch.cuda.get_device_name(0)
    target, tl, wt = train_target(cfg, train_ids, a.seed, device, a.target_steps)
    torch.backends.cuda.matmul.allow_tf32 = False
    round_q8_(target)
    target.eval()
    logd["wall_s"]["target"] = round(wt, 1)
    logd["target_loss"] = {"first": round(tl[0], 4), "last100_mean": round(float(np.mean(tl[-100:])), 4),
                           "every100": [round(x, 4) for x in tl[::100]]}
    ppl_windows = cfg.get("ppl_windows", 256)
    ppl, n = perplexity(target, held_ids, cfg["seq"], device, ppl_windows)
    ppl_tr, _ = perplexity(target, train_ids[:len(held_ids)], cfg["seq"], device, ppl_windows)
    logd["target_ppl"] = {"heldout": round(ppl, 3), "train_sample": round(ppl_tr, 3), "heldout_tokens": n}
    log("target held-out ppl %.2f (train %.2f)" % (ppl, ppl_tr))
    kv = {"ember.trained.seed": a.seed, "ember.trained.preset": a.preset,
          "ember.trained.corpus": "Debian /usr/share/info/*.info*.gz + /usr/share/common-licenses"}
    ctx_len = 2 * cfg["seq"]
    write_target(os.path.join(a.out, "target-q8_0.gguf"), target, vocab,
                 {"name": "ember-trained qwen3 d%d l%d v%d seed %d" % (cfg["n_embd"], cfg["n_layer"], cfg["n_vocab"], a.seed),
                  "kv": kv, "ctx_len": ctx_len})

    torch.backends.cuda.matmul.allow_tf32 = False
    t = time.time()
    rng = np.random.default_rng(a.seed + 7)
    starts = rng.integers(0, len(train_ids) - cfg["prompt_len"], size=cfg["gen_prompts"])
    prompts = np.stack([train_ids[s:s + cfg["prompt_len"]] for s in starts])
    noise = cfg.get("prompt_noise", 0.0)
    if noise > 0:   # replaced tokens: ids of the vocabulary above the control ids (mask id and below)
        hit = rng.random(prompts.shape) < noise
        prompts = np.where(hit, rng.integers(mask_id + 1, cfg["n_vocab"], size=prompts.shape), prompts)
    prompts = torch.tensor(prompts, device=device)
    gen = greedy(target, prompts, cfg["gen_len"])
    seqs = torch.cat([prompts, gen], 1)
    logd["wall_s"]["greedy_data"] = round(time.time() - t, 1)
    log("greedy data %s in %.0fs" % (tuple(seqs.shape), time.time() - t))
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True

    draft_time = a.draft_time
    if a.time_budget:   # what is left of the whole run's budget, less a reserve for evaluation and files
        left = a.time_budget - (time.time() - T0) - 30
        draft_time = min(draft_time or left, left)
        logd["time_budget_s"] = a.time_budget
    draft, untrained, dl, da, wd = train_draft(cfg, target, seqs, cfg["prompt_len"], mask_id, a.seed, device,
                                               a.draft_steps, draft_time)
    torch.backends.cuda.matmul.allow_tf32 = False
    round_q8_(draft)
    round_q8_(untrained)
    draft.eval()
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    logd["wall_s"]["draft"] = round(wd, 1)
    logd["draft_loss"] = {"first": round(dl[0], 4), "last100_mean": round(float(np.mean(dl[-100:])), 4),
                          "slot_acc_last100": round(float(np.mean(da[-100:])), 4), "steps_run": len(dl),
                          "every100": [round(x, 4) for x in dl[::100]]}

    t = time.time()
    hp = torch.tensor(heldout_prompts(held_ids, a.eval_prompts, a.eval_prompt_len, a.seed + 11), device=device)
    logd["eval"] = {"prompts": a.eval_prompts, "prompt_len": a.eval_prompt_len, "gen": a.eval_gen}
    logd["eval"]["trained"], _ = spec_eval(target, draft, hp, a.eval_gen)
    logd["eval"]["untrained"], _ = spec_eval(target, untrained, hp, a.eval_gen)
    logd["wall_s"]["eval"] = round(time.time() - t, 1)
    log("tau trained %s untrained %s" % (logd["eval"]["trained"]["tau"], logd["eval"]["untrained"]["tau"]))
    write_probe(os.path.join(a.out, "probe.npz"), target, draft, hp[0])

    write_draft(os.path.join(a.out, "draft-q8_0.gguf"), draft,
                {"name": "ember-trained dflash draft l%d b%d seed %d" % (cfg["draft_layers"], BLOCK, a.seed),
                 "kv": kv, "ctx_len": ctx_len})
    write_draft(os.path.join(a.out, "draft-untrained-q8_0.gguf"), untrained,
                {"name": "ember untrained dflash draft l%d b%d seed %d" % (cfg["draft_layers"], BLOCK, a.seed + 1),
                 "kv": kv, "ctx_len": ctx_len})
    logd["files"] = {}
    for f in ("target-q8_0.gguf", "draft-q8_0.gguf", "draft-untrained-q8_0.gguf", "heldout.u32", "tokenizer.model",
              "train.u32", "probe.npz"):
        p = os.path.join(a.out, f)
        logd["files"][f] = {"bytes": os.path.getsize(p), "sha256": hashlib.sha256(open(p, "rb").read()).hexdigest()}
    logd["wall_s"]["total"] = round(time.time() - T0, 1)
    logd["sample_ids"] = seqs[0].tolist()
    with open(os.path.join(a.out, "log.json"), "w") as f:
        json.dump(logd, f, indent=1)
    log("done in %.0fs -> %s" % (time.time() - T0, a.out))
    return 0


def cmd_eval(a):
    device = torch.device("cuda" if torch.cuda.is_available() and not a.cpu else "cpu")
    torch.set_num_threads(a.threads)
    target, draft = load_pair(a.target, a.draft, device)
    ids = np.fromfile(a.prompts, dtype="<u4").astype(np.int64)
    out = {}
    if a.ppl:
        out["heldout_ppl"], out["ppl_tokens"] = perplexity(target, ids, 256, device)
    hp = torch.tensor(heldout_prompts(ids, a.n_prompts, a.prompt_len, a.seed), device=device)
    out["prompts"] = hp.cpu().tolist() if a.dump_prompts else None
    ev, gen = spec_eval(target, draft, hp, a.gen)
    out.update(ev)
    out["greedy"] = gen.cpu().tolist() if a.dump_prompts else None
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


def add_train_args(p):
    p.add_argument("--out", required=True)
    p.add_argument("--preset", choices=sorted(PRESETS), default="cpu")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--target-steps", type=int, default=None)
    p.add_argument("--draft-steps", type=int, default=None)
    p.add_argument("--draft-time", type=float, default=None,
                   help="wall-clock budget (s) for the draft loop: its step count is cut to fit after 50 steps")
    p.add_argument("--time-budget", type=float, default=None,
                   help="wall-clock budget (s) for the whole train command: the draft loop gets what the target "
                        "and the greedy data leave, less 30 s")
    p.add_argument("--gen-prompts", type=int, default=None, help="override the preset's greedy data size")
    p.add_argument("--eval-prompts", type=int, default=64)
    p.add_argument("--eval-prompt-len", type=int, default=64)
    p.add_argument("--eval-gen", type=int, default=64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prep", help="corpus -> tokenizer -> ids (needs sentencepiece)")
    p.add_argument("--out", required=True)
    p.add_argument("--preset", choices=sorted(PRESETS), default="cpu")
    for name in ("all", "train"):
        p = sub.add_parser(name, help="prep + train" if name == "all" else "target, draft, GGUF from prep's DIR")
        add_train_args(p)
    p = sub.add_parser("eval")
    p.add_argument("--target", required=True)
    p.add_argument("--draft", required=True)
    p.add_argument("--prompts", required=True, help="held-out ids, raw little-endian uint32")
    p.add_argument("--n-prompts", type=int, default=16)
    p.add_argument("--prompt-len", type=int, default=64)
    p.add_argument("--gen", type=int, default=64)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ppl", action="store_true")
    p.add_argument("--dump-prompts", action="store_true")
    p.add_argument("--cpu", action="store_true")
    a = ap.parse_args()
    return {"all": cmd_all, "prep": cmd_prep, "train": cmd_train, "eval": cmd_eval}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
