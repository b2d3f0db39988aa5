"""gguf_testlib.py - test-only helpers for the tools/ self-tests: a small GGUF writer, quantizers
for every supported type (written from the block layouts, vectorised), literal per-element scalar
dequantizers (the formulas of engine-anchors.md 1.2 transcribed one value at a time, to check the
vectorised reader against), and a seeded synthetic Qwen3 model builder.
"""

import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.normpath(os.path.join(HERE, "..", "..", "tools"))
sys.path.insert(0, TOOLS)

import gguf_reader as G  # noqa: E402

PYTHON = sys.executable


# ---- writer ------------------------------------------------------------------------------------
def _pack_string(s):
    raw = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(raw)) + raw


def pack_value(vtype, value):
    """Encodes one KV value. Arrays are (elem_type, [values]); nested arrays nest that form."""
    if vtype == G.T_STRING:
        return _pack_string(value)
    if vtype == G.T_ARRAY:
        etype, items = value
        out = struct.pack("<IQ", etype, len(items))
        return out + b"".join(pack_value(etype, v) for v in items)
    if vtype not in G._SCALAR:
        return struct.pack("<I", value)       # an invalid type code, for broken-file tests
    return struct.pack(G._SCALAR[vtype][0], value)


class Writer:
    """Builds a GGUF file in memory: add_kv, add_tensor, then to_bytes()/write(path)."""

    def __init__(self, alignment=None, version=3):
        self.version = version
        self.alignment = alignment
        self.kvs = []
        self.tensors = []              # (name, dims, type, raw bytes)
        if alignment is not None:
            self.add_kv("general.alignment", G.T_UINT32, alignment)

    def add_kv(self, key, vtype, value):
        self.kvs.append((key, vtype, value))

    def add_tensor(self, name, dims, type_code, raw):
        self.tensors.append((name, list(dims), type_code, bytes(raw)))

    def add_array(self, name, array, type_code):
        """Adds a numpy float array (numpy shape) quantized to type_code."""
        array = np.asarray(array, dtype=np.float32)
        self.add_tensor(name, list(reversed(array.shape)), type_code,
                        quantize(type_code, array.reshape(-1)))

    def to_bytes(self):
        align = self.alignment or G.DEFAULT_ALIGNMENT
        head = b"GGUF" + struct.pack("<IQQ", self.version, len(self.tensors), len(self.kvs))
        head += b"".join(_pack_string(k) + struct.pack("<I", t) + pack_value(t, v)
                         for k, t, v in self.kvs)
        offset = 0
        data = b""
        for name, dims, type_code, raw in self.tensors:
            pad = (-offset) % align
            data += b"\0" * pad
            offset += pad
            head += _pack_string(name) + struct.pack("<I", len(dims))
            head += b"".join(struct.pack("<Q", d) for d in dims)
            head += struct.pack("<IQ", type_code, offset)
            data += raw
            offset += len(raw)
        head += b"\0" * ((-len(head)) % align)
        return head + data

    def write(self, path):
        with open(path, "wb") as f:
            f.write(self.to_bytes())
        return path


# ---- quantizers ----------------------------------------------------------------------------------
def f32_to_bf16_bits(x):
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def quantize(type_code, x):
    x = np.asarray(x, dtype=np.float32).reshape(-1)
    if type_code == G.F32:
        return x.astype("<f4").tobytes()
    if type_code == G.F16:
        return x.astype("<f2").tobytes()
    if type_code == G.BF16:
        return f32_to_bf16_bits(x).astype("<u2").tobytes()
    if type_code == G.Q8_0:
        return quantize_q8_0(x)
    if type_code == G.Q4_K:
        return quantize_q4_k(x)
    if type_code == G.Q6_K:
        return quantize_q6_k(x)
    raise ValueError("no quantizer for type %d" % type_code)


def _safe_inv(a):
    out = np.zeros_like(a)
    np.divide(1.0, a, out=out, where=a != 0)
    return out


def quantize_q8_0(x):
    blk = x.reshape(-1, 32)
    d = np.abs(blk).max(axis=1) / 127.0
    q = np.clip(np.rint(blk * _safe_inv(d)[:, None]), -127, 127).astype(np.int8)
    out = np.empty((blk.shape[0], 34), np.uint8)
    out[:, 0:2] = d.astype("<f2").reshape(-1, 1).view(np.uint8)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def quantize_q4_k(x):
    blk = x.reshape(-1, 8, 32).astype(np.float64)
    nb = blk.shape[0]
    mn = np.minimum(blk.min(axis=2), 0.0)                  # value = d*sc*q - dmin*m, m >= 0
    scale = (blk.max(axis=2) - mn) / 15.0
    d = (scale.max(axis=1) / 63.0).astype(np.float16).astype(np.float64)
    dmin = ((-mn).max(axis=1) / 63.0).astype(np.float16).astype(np.float64)
    sc = np.clip(np.rint(scale * _safe_inv(d)[:, None]), 0, 63).astype(np.uint8)
    m = np.clip(np.rint(-mn * _safe_inv(dmin)[:, None]), 0, 63).astype(np.uint8)
    step = d[:, None] * sc
    q = np.clip(np.rint((blk + (dmin[:, None] * m)[:, :, None]) * _safe_inv(step)[:, :, None]),
                0, 15).astype(np.uint8).reshape(nb, 256)
    s = np.empty((nb, 12), np.uint8)
    s[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    s[:, 4:8] = m[:, 0:4] | ((m[:, 4:8] >> 4) << 6)
    s[:, 8:12] = (sc[:, 4:8] & 0xF) | ((m[:, 4:8] & 0xF) << 4)
    q4 = q.reshape(nb, 4, 2, 32)
    qs = q4[:, :, 0, :] | (q4[:, :, 1, :] << 4)
    out = np.empty((nb, 144), np.uint8)
    out[:, 0:2] = d.astype("<f2").reshape(-1, 1).view(np.uint8)
    out[:, 2:4] = dmin.astype("<f2").reshape(-1, 1).view(np.uint8)
    out[:, 4:16] = s
    out[:, 16:144] = qs.reshape(nb, 128)
    return out.tobytes()


def quantize_q6_k(x):
    blk = x.reshape(-1, 16, 16).astype(np.float64)
    nb = blk.shape[0]
    scale = np.abs(blk).max(axis=2) / 31.0
    d = (scale.max(axis=1) / 127.0).astype(np.float16).astype(np.float64)
    sc = np.clip(np.rint(scale * _safe_inv(d)[:, None]), -128, 127).astype(np.int8)
    step = d[:, None] * sc
    q = (np.clip(np.rint(blk * _safe_inv(step)[:, :, None]), -32, 31) + 32).astype(np.uint8)
    q = q.reshape(nb, 2, 4, 32)                            # half, quarter, l
    ql = np.empty((nb, 2, 64), np.uint8)
    ql[:, :, :32] = (q[:, :, 0] & 0xF) | ((q[:, :, 2] & 0xF) << 4)
    ql[:, :, 32:] = (q[:, :, 1] & 0xF) | ((q[:, :, 3] & 0xF) << 4)
    qh = (q[:, :, 0] >> 4) | ((q[:, :, 1] >> 4) << 2) | ((q[:, :, 2] >> 4) << 4) \
        | ((q[:, :, 3] >> 4) << 6)
    out = np.empty((nb, 210), np.uint8)
    out[:, 0:128] = ql.reshape(nb, 128)
    out[:, 128:192] = qh.reshape(nb, 64)
    out[:, 192:208] = sc.view(np.uint8)
    out[:, 208:210] = d.astype("<f2").reshape(-1, 1).view(np.uint8)
    return out.tobytes()


# ---- literal scalar dequantizers (one element at a time, straight from the formulas) ------------
def _half(raw, off):
    return float(np.frombuffer(raw[off:off + 2], "<f2")[0])


def scalar_dequantize(type_code, raw):
    """Returns a list of Python floats (double precision, exact for these formats)."""
    raw = bytes(raw)
    out = []
    if type_code == G.F32:
        return list(struct.unpack("<%df" % (len(raw) // 4), raw))
    if type_code == G.F16:
        return [_half(raw, i) for i in range(0, len(raw), 2)]
    if type_code == G.BF16:
        return [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
    if type_code == G.Q8_0:
        for b in range(0, len(raw), 34):
            d = _half(raw, b)
            for i in range(32):
                q = struct.unpack_from("<b", raw, b + 2 + i)[0]
                out.append(d * q)
        return out
    if type_code == G.Q4_K:
        for b in range(0, len(raw), 144):
            d, dmin = _half(raw, b), _half(raw, b + 2)
            s = raw[b + 4:b + 16]
            qs = raw[b + 16:b + 144]

            def scale_min(j):
                if j < 4:
                    return s[j] & 63, s[j + 4] & 63
                return ((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4),
                        (s[j + 4] >> 4) | ((s[j] >> 6) << 4))
            block = [0.0] * 256
            for c in range(4):
                sc_lo, m_lo = scale_min(2 * c)
                sc_hi, m_hi = scale_min(2 * c + 1)
                for l in range(32):
                    byte = qs[32 * c + l]
                    block[64 * c + l] = d * sc_lo * (byte & 0xF) - dmin * m_lo
                    block[64 * c + 32 + l] = d * sc_hi * (byte >> 4) - dmin * m_hi
            out.extend(block)
        return out
    if type_code == G.Q6_K:
        for b in range(0, len(raw), 210):
            ql_all = raw[b:b + 128]
            qh_all = raw[b + 128:b + 192]
            sc_all = struct.unpack("<16b", raw[b + 192:b + 208])
            d = _half(raw, b + 208)
            block = [0.0] * 256
            for h in range(2):
                ql, qh, sc = ql_all[64 * h:], qh_all[32 * h:], sc_all[8 * h:]
                for l in range(32):
                    q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32
                    q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32
                    q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32
                    q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32
                    base = 128 * h
                    block[base + l] = d * sc[l // 16 + 0] * q1
                    block[base + l + 32] = d * sc[l // 16 + 2] * q2
                    block[base + l + 64] = d * sc[l // 16 + 4] * q3
                    block[base + l + 96] = d * sc[l // 16 + 6] * q4
            out.extend(block)
        return out
    raise ValueError("no scalar dequantizer for type %d" % type_code)


def random_blocks(type_code, n_blocks, rng):
    """Random raw blocks exercising every bit pattern, with finite fp16 scales."""
    _, _, bb = G.GGML_TYPES[type_code]
    raw = rng.integers(0, 256, size=(n_blocks, bb), dtype=np.uint8)

    def halves(n, lo=-4.0, hi=4.0):
        return rng.uniform(lo, hi, n).astype("<f2").reshape(-1, 1).view(np.uint8)
    if type_code == G.Q8_0:
        raw[:, 0:2] = halves(n_blocks)
    elif type_code == G.Q4_K:
        raw[:, 0:2] = halves(n_blocks)
        raw[:, 2:4] = halves(n_blocks, 0.0, 1.0)
    elif type_code == G.Q6_K:
        raw[:, 208:210] = halves(n_blocks)
    elif type_code == G.F16:
        raw = rng.normal(0, 100, n_blocks).astype("<f2").view(np.uint8).reshape(n_blocks, 2)
    elif type_code == G.BF16:
        raw = f32_to_bf16_bits(rng.normal(0, 100, n_blocks)).view(np.uint8).reshape(n_blocks, 2)
    elif type_code == G.F32:
        raw = rng.normal(0, 1, n_blocks).astype("<f4").view(np.uint8).reshape(n_blocks, 4)
    return raw.reshape(-1)


# ---- synthetic Qwen3 ---------------------------------------------------------------------------
TINY_SHAPE = dict(n_vocab=320, n_embd=64, n_layer=2, n_head=4, n_head_kv=2, head_dim=32,
                  n_ff=96, n_ctx=256)
QUANT_SHAPE = dict(n_vocab=300, n_embd=256, n_layer=2, n_head=4, n_head_kv=2, head_dim=64,
                   n_ff=512, n_ctx=256)


def make_qwen3(path, weight_type=G.F32, seed=1, tied=True, rope_theta=10000.0, eps=1e-6,
               alignment=None, shape=None, mix=None):
    """Writes a seeded synthetic Qwen3 GGUF. weight_type quantizes the matrices (norms stay F32);
    mix maps a tensor-name suffix to another type (e.g. {"ffn_down": Q6_K}). Weights are scaled so
    the next-token distributions are peaked (the embedding is large, the head tied or scaled)."""
    s = dict(TINY_SHAPE if shape is None else shape)
    rng = np.random.default_rng(seed)
    w = Writer(alignment=alignment)
    w.add_kv("general.architecture", G.T_STRING, "qwen3")
    w.add_kv("general.name", G.T_STRING, "test-qwen3-%d" % seed)
    w.add_kv("qwen3.block_count", G.T_UINT32, s["n_layer"])
    w.add_kv("qwen3.context_length", G.T_UINT32, s["n_ctx"])
    w.add_kv("qwen3.embedding_length", G.T_UINT32, s["n_embd"])
    w.add_kv("qwen3.feed_forward_length", G.T_UINT32, s["n_ff"])
    w.add_kv("qwen3.attention.head_count", G.T_UINT32, s["n_head"])
    w.add_kv("qwen3.attention.head_count_kv", G.T_UINT32, s["n_head_kv"])
    w.add_kv("qwen3.attention.key_length", G.T_UINT32, s["head_dim"])
    w.add_kv("qwen3.attention.value_length", G.T_UINT32, s["head_dim"])
    w.add_kv("qwen3.attention.layer_norm_rms_epsilon", G.T_FLOAT32, eps)
    w.add_kv("qwen3.rope.freq_base", G.T_FLOAT32, rope_theta)
    w.add_kv("general.file_type", G.T_UINT32, 0)
    w.add_kv("tokenizer.ggml.model", G.T_STRING, "gpt2")
    w.add_kv("tokenizer.ggml.tokens", G.T_ARRAY,
             (G.T_STRING, ["t%d" % i for i in range(s["n_vocab"])]))
    e, f, d, V = s["n_embd"], s["n_ff"], s["head_dim"], s["n_vocab"]
    qd, kvd = s["n_head"] * d, s["n_head_kv"] * d

    def typ(name):
        for suffix, t in (mix or {}).items():
            if suffix in name:
                return t
        return weight_type

    def mat(name, rows, cols, std):
        w.add_array(name, rng.normal(0, std, (rows, cols)), typ(name))

    def norm(name, n):
        w.add_array(name, 1.0 + 0.2 * rng.normal(0, 1, n), G.F32)

    # a small embedding, so the layers' updates (not the input token) dominate the residual
    emb_std, out_std = 0.25, 0.5
    mat("token_embd.weight", V, e, emb_std)
    for i in range(s["n_layer"]):
        b = "blk.%d." % i
        norm(b + "attn_norm.weight", e)
        mat(b + "attn_q.weight", qd, e, 1.0 / np.sqrt(e))
        mat(b + "attn_k.weight", kvd, e, 1.0 / np.sqrt(e))
        mat(b + "attn_v.weight", kvd, e, 1.0 / np.sqrt(e))
        mat(b + "attn_output.weight", e, qd, 1.0 / np.sqrt(qd))
        norm(b + "attn_q_norm.weight", d)
        norm(b + "attn_k_norm.weight", d)
        norm(b + "ffn_norm.weight", e)
        mat(b + "ffn_gate.weight", f, e, 1.0 / np.sqrt(e))
        mat(b + "ffn_up.weight", f, e, 1.0 / np.sqrt(e))
        mat(b + "ffn_down.weight", e, f, 1.0 / np.sqrt(f))
    # logits = output_norm(x) . row: scale the final norm so logits have a std of about 3
    # (peaked, but not one-hot: a top-1 and KL comparison then means something)
    row_std = emb_std if tied else out_std
    w.add_array("output_norm.weight", 3.0 / (np.sqrt(e) * row_std)
                * (1.0 + 0.2 * rng.normal(0, 1, e)), G.F32)
    if not tied:
        mat("output.weight", V, e, out_std)
    return w.write(path)
