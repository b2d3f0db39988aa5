#!/usr/bin/env python3
"""gguf_reader.py - an independent GGUF v2/v3 reader and dequantizer in numpy.

Written from the GGUF specification (header, KV pairs, tensor infos, aligned data section) and
ggml's block layouts (F32, F16, BF16, Q8_0, Q4_K, Q6_K), not from ember's C reader: it is the
reference the C engine is checked against. The file is memory-mapped; every count, length, offset
and dimension is checked against the file before use, and problems raise GGUFError with a message
naming what is wrong. Dequantization is vectorised (whole blocks at a time, in bounded chunks).

Run `gguf_reader.py FILE` to print the metadata and the tensor table.
"""

import struct
import sys

import numpy as np

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
MAX_ARRAY_DEPTH = 8          # nested arrays deeper than this are refused (hostile files)
MAX_DIMS = 4

# KV value types (GGUF spec).
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, \
    T_UINT64, T_INT64, T_FLOAT64 = range(13)
KV_TYPE_NAMES = ["u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array",
                 "u64", "i64", "f64"]
# Fixed-size scalar KV types: struct code and numpy dtype (little-endian).
_SCALAR = {
    T_UINT8: ("<B", "<u1"), T_INT8: ("<b", "<i1"), T_UINT16: ("<H", "<u2"),
    T_INT16: ("<h", "<i2"), T_UINT32: ("<I", "<u4"), T_INT32: ("<i", "<i4"),
    T_FLOAT32: ("<f", "<f4"), T_BOOL: ("<B", "<u1"), T_UINT64: ("<Q", "<u8"),
    T_INT64: ("<q", "<i8"), T_FLOAT64: ("<d", "<f8"),
}
INT_KV_TYPES = (T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_UINT64, T_INT64)

# ggml tensor types: code -> (name, elements per block, bytes per block). The sizes of types this
# reader does not dequantize are still listed so files containing them can be inspected.
GGML_TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4), 27: ("I64", 1, 8),
    28: ("F64", 1, 8), 30: ("BF16", 1, 2),
}
TYPE_CODES = {name: code for code, (name, _, _) in GGML_TYPES.items()}
F32, F16, Q8_0, Q4_K, Q6_K, BF16 = 0, 1, 8, 12, 14, 30
DEQUANT_TYPES = (F32, F16, BF16, Q8_0, Q4_K, Q6_K)

_CHUNK_BLOCKS = 1 << 16      # blocks dequantized per numpy pass (bounds temporary memory)


class GGUFError(Exception):
    """A GGUF file that cannot be read: truncated, corrupt, hostile or unsupported."""


class TensorInfo:
    """One tensor of the file. dims are GGUF order (innermost first); shape is numpy order."""

    def __init__(self, name, dims, type_code, offset):
        self.name = name
        self.dims = tuple(dims)
        self.type = type_code
        self.type_name, self.block_elems, self.block_bytes = GGML_TYPES[type_code]
        self.offset = offset                      # relative to the data section
        self.n_elements = 1
        for d in dims:
            self.n_elements *= d
        self.nbytes = self.n_elements // self.block_elems * self.block_bytes
        self.data_offset = None                   # absolute file offset, set by the reader

    @property
    def shape(self):
        """numpy shape: a GGUF matrix {n_in, n_out} is (n_out, n_in), n_out rows of n_in."""
        return tuple(reversed(self.dims))

    def __repr__(self):
        return "TensorInfo(%s, dims=%s, %s, offset=%d)" % (
            self.name, list(self.dims), self.type_name, self.offset)


class _Cursor:
    """Bounds-checked little-endian reads from the mapped bytes."""

    def __init__(self, buf, size):
        self.buf = buf
        self.size = size
        self.pos = 0

    def need(self, n, what):
        if n < 0 or self.pos + n > self.size:
            raise GGUFError("truncated file: %s needs %d bytes at offset %d, file has %d"
                            % (what, n, self.pos, self.size))

    def scalar(self, code, what):
        fmt = _SCALAR[code][0]
        n = struct.calcsize(fmt)
        self.need(n, what)
        value = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += n
        return value

    def u32(self, what):
        return self.scalar(T_UINT32, what)

    def u64(self, what):
        return self.scalar(T_UINT64, what)

    def string(self, what, max_len=None, strict=False):
        n = self.u64(what + " length")
        if max_len is not None and n > max_len:
            raise GGUFError("%s length %d exceeds the limit of %d" % (what, n, max_len))
        self.need(n, what)
        raw = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            if strict:
                raise GGUFError("%s at offset %d is not valid UTF-8" % (what, self.pos - n))
            return raw.decode("utf-8", errors="replace")


def _min_value_size(vtype):
    """Smallest encoding of one value of vtype (used to reject absurd array counts early)."""
    if vtype == T_STRING:
        return 8
    if vtype == T_ARRAY:
        return 12
    return struct.calcsize(_SCALAR[vtype][0])


class GGUFReader:
    """A parsed GGUF file. Attributes:
    path, version, alignment, data_start (absolute offset of the data section),
    kv (dict key -> value; numeric arrays are numpy arrays, string/nested arrays are lists,
        bools are Python bool), kv_types (key -> (type, element type or None)),
    tensors (list of TensorInfo, file order), tensor_map (name -> TensorInfo)."""

    def __init__(self, path):
        self.path = path
        try:
            self.mm = np.memmap(path, dtype=np.uint8, mode="r")
        except ValueError as exc:             # numpy refuses to map an empty file
            raise GGUFError("%s: cannot map file (%s)" % (path, exc)) from None
        except OSError as exc:
            raise GGUFError("%s: %s" % (path, exc)) from None
        self.size = int(self.mm.shape[0])
        self.kv = {}
        self.kv_types = {}
        self.tensors = []
        self.tensor_map = {}
        try:
            self._parse()
        except GGUFError as exc:
            raise GGUFError("%s: %s" % (path, exc)) from None

    # ---- parsing ------------------------------------------------------------------------------
    def _parse(self):
        cur = _Cursor(self.mm, self.size)
        cur.need(4, "magic")
        magic = bytes(self.mm[0:4])
        if magic != GGUF_MAGIC:
            raise GGUFError("bad magic %r (expected b'GGUF')" % magic)
        cur.pos = 4
        version = cur.u32("version")
        if version not in (2, 3):
            if version & 0xFFFF == 0 and (version >> 24) in (2, 3):
                raise GGUFError("big-endian GGUF (version %d) is not supported" % (version >> 24))
            raise GGUFError("unsupported GGUF version %d (2 and 3 are supported)" % version)
        self.version = version
        n_tensors = cur.u64("tensor_count")
        n_kv = cur.u64("metadata_kv_count")
        remaining = self.size - cur.pos
        # A KV needs at least 8 (key length) + 4 (type) + 1 bytes; a tensor info 8+4+8+4+8.
        if n_kv * 13 > remaining:
            raise GGUFError("metadata_kv_count %d is absurd for a %d-byte file" % (n_kv, self.size))
        if n_tensors * 32 > remaining:
            raise GGUFError("tensor_count %d is absurd for a %d-byte file" % (n_tensors, self.size))

        for i in range(n_kv):
            key = cur.string("key of KV %d" % i, max_len=65535, strict=True)
            if key in self.kv:
                raise GGUFError("duplicate metadata key %r" % key)
            vtype = cur.u32("type of KV %r" % key)
            value, elem_type = self._read_value(cur, vtype, key, 0)
            self.kv[key] = value
            self.kv_types[key] = (vtype, elem_type)

        self.alignment = DEFAULT_ALIGNMENT
        if "general.alignment" in self.kv:
            vtype = self.kv_types["general.alignment"][0]
            align = self.kv["general.alignment"]
            if vtype not in INT_KV_TYPES:
                raise GGUFError("general.alignment has type %s, expected an integer"
                                % KV_TYPE_NAMES[vtype])
            if align <= 0 or align & (align - 1) or align > (1 << 30):
                raise GGUFError("general.alignment %d is not a power of two" % align)
            self.alignment = int(align)

        for i in range(n_tensors):
            name = cur.string("name of tensor %d" % i, max_len=1024, strict=True)
            if name in self.tensor_map:
                raise GGUFError("duplicate tensor name %r" % name)
            n_dims = cur.u32("n_dims of tensor %r" % name)
            if not 1 <= n_dims <= MAX_DIMS:
                raise GGUFError("tensor %r has n_dims %d (1..%d allowed)" % (name, n_dims, MAX_DIMS))
            dims = [cur.u64("dim %d of tensor %r" % (d, name)) for d in range(n_dims)]
            type_code = cur.u32("type of tensor %r" % name)
            offset = cur.u64("offset of tensor %r" % name)
            if type_code not in GGML_TYPES:
                raise GGUFError("tensor %r has unknown ggml type %d" % (name, type_code))
            n_elem = 1
            for d in dims:
                if d >= 1 << 62:
                    raise GGUFError("tensor %r has absurd dimension %d" % (name, d))
                n_elem *= d
            if n_elem >= 1 << 62:
                raise GGUFError("tensor %r: element count %d overflows" % (name, n_elem))
            _, block_elems, _ = GGML_TYPES[type_code]
            if dims[0] % block_elems:
                raise GGUFError("tensor %r: row length %d is not a multiple of the %s block (%d)"
                                % (name, dims[0], GGML_TYPES[type_code][0], block_elems))
            if offset % self.alignment:
                raise GGUFError("tensor %r: offset %d is not a multiple of the alignment %d"
                                % (name, offset, self.alignment))
            info = TensorInfo(name, dims, type_code, offset)
            self.tensors.append(info)
            self.tensor_map[name] = info

        self.data_start = (cur.pos + self.alignment - 1) // self.alignment * self.alignment
        if self.tensors and self.data_start > self.size:
            raise GGUFError("data section at %d starts past the end of the file (%d bytes)"
                            % (self.data_start, self.size))
        for info in self.tensors:
            info.data_offset = self.data_start + info.offset
            end = info.data_offset + info.nbytes
            if end > self.size:
                raise GGUFError("tensor %r (%d bytes at offset %d) extends past the end of the "
                                "file (%d bytes)" % (info.name, info.nbytes, info.data_offset,
                                                     self.size))
        spans = sorted((t.offset, t.offset + t.nbytes, t.name) for t in self.tensors if t.nbytes)
        for (a0, a1, an), (b0, _, bn) in zip(spans, spans[1:]):
            if b0 < a1:
                raise GGUFError("tensors %r and %r overlap" % (an, bn))

    def _read_value(self, cur, vtype, key, depth):
        """Returns (value, element type for arrays or None)."""
        if vtype in _SCALAR:
            value = cur.scalar(vtype, "value of %r" % key)
            if vtype == T_BOOL:
                if value > 1:
                    raise GGUFError("bool value of %r is %d (0 or 1 expected)" % (key, value))
                value = bool(value)
            return value, None
        if vtype == T_STRING:
            return cur.string("string value of %r" % key), None
        if vtype != T_ARRAY:
            raise GGUFError("KV %r has unknown value type %d" % (key, vtype))
        if depth >= MAX_ARRAY_DEPTH:
            raise GGUFError("KV %r: arrays nested deeper than %d" % (key, MAX_ARRAY_DEPTH))
        elem_type = cur.u32("array element type of %r" % key)
        count = cur.u64("array length of %r" % key)
        if elem_type not in _SCALAR and elem_type not in (T_STRING, T_ARRAY):
            raise GGUFError("KV %r: array of unknown type %d" % (key, elem_type))
        if count * _min_value_size(elem_type) > cur.size - cur.pos:
            raise GGUFError("KV %r: array length %d is absurd for the bytes left (%d)"
                            % (key, count, cur.size - cur.pos))
        if elem_type in _SCALAR:
            dtype = np.dtype(_SCALAR[elem_type][1])
            nbytes = count * dtype.itemsize
            cur.need(nbytes, "array of %r" % key)
            arr = np.frombuffer(self.mm, dtype=dtype, count=count, offset=cur.pos).copy()
            cur.pos += nbytes
            if elem_type == T_BOOL:
                if arr.size and arr.max() > 1:
                    raise GGUFError("bool array %r holds values other than 0 and 1" % key)
                arr = arr.astype(bool)
            return arr, elem_type
        if elem_type == T_STRING:
            return [cur.string("element %d of %r" % (i, key)) for i in range(count)], elem_type
        return [self._read_value(cur, T_ARRAY, key, depth + 1)[0] for _ in range(count)], elem_type

    # ---- access -------------------------------------------------------------------------------
    def get(self, key, default=None):
        return self.kv.get(key, default)

    def get_int(self, key, default=None):
        """An integer KV (any integer type), or default when absent; GGUFError if mistyped."""
        if key not in self.kv:
            if default is None:
                raise GGUFError("%s: missing metadata key %r" % (self.path, key))
            return default
        if self.kv_types[key][0] not in INT_KV_TYPES:
            raise GGUFError("%s: metadata %r has type %s, expected an integer"
                            % (self.path, key, KV_TYPE_NAMES[self.kv_types[key][0]]))
        return int(self.kv[key])

    def get_float(self, key, default=None):
        """A float KV (f32/f64, integers accepted), or default when absent."""
        if key not in self.kv:
            if default is None:
                raise GGUFError("%s: missing metadata key %r" % (self.path, key))
            return default
        vtype = self.kv_types[key][0]
        if vtype not in (T_FLOAT32, T_FLOAT64) + INT_KV_TYPES:
            raise GGUFError("%s: metadata %r has type %s, expected a number"
                            % (self.path, key, KV_TYPE_NAMES[vtype]))
        return float(self.kv[key])

    def tensor(self, name):
        info = self.tensor_map.get(name)
        if info is None:
            raise GGUFError("%s: no tensor named %r" % (self.path, name))
        return info

    def raw(self, name):
        """The tensor's stored bytes (read-only uint8 view of the mapping)."""
        info = self.tensor(name)
        return self.mm[info.data_offset:info.data_offset + info.nbytes]

    def dequantize(self, name, dtype=np.float32):
        """The whole tensor as float32 in numpy shape (dims reversed)."""
        info = self.tensor(name)
        out = dequantize(info.type, self.raw(name), info.n_elements)
        return out.reshape(info.shape).astype(dtype, copy=False)

    def dequantize_rows(self, name, rows):
        """Selected rows (outermost index) of a 2-D tensor as float32 [len(rows), dims[0]]."""
        info = self.tensor(name)
        if len(info.dims) != 2:
            raise GGUFError("%s: tensor %r is not 2-D" % (self.path, name))
        n_in, n_rows = info.dims
        row_bytes = n_in // info.block_elems * info.block_bytes
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if rows.size and (rows.min() < 0 or rows.max() >= n_rows):
            raise GGUFError("%s: row index out of range for %r (%d rows)" % (self.path, name, n_rows))
        raw = self.raw(name).reshape(n_rows, row_bytes)[rows]
        return dequantize(info.type, raw.reshape(-1), rows.size * n_in).reshape(rows.size, n_in)


# ---- dequantization (block layouts of ggml-common.h) -------------------------------------------
def _f16(cols):
    """An (n, 2) uint8 array of little-endian halves -> float32 (n,)."""
    return np.ascontiguousarray(cols).view("<f2").reshape(-1).astype(np.float32)


def _deq_q8_0(b):
    d = _f16(b[:, 0:2])
    q = b[:, 2:34].view(np.int8).astype(np.float32)
    return (d[:, None] * q).reshape(-1)


def _deq_q4_k(b):
    n = b.shape[0]
    d = _f16(b[:, 0:2])
    dmin = _f16(b[:, 2:4])
    s = b[:, 4:16]
    sc = np.empty((n, 8), np.uint8)
    mn = np.empty((n, 8), np.uint8)
    sc[:, :4] = s[:, 0:4] & 63
    mn[:, :4] = s[:, 4:8] & 63
    sc[:, 4:] = (s[:, 8:12] & 0xF) | ((s[:, 0:4] >> 6) << 4)
    mn[:, 4:] = (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)
    qs = b[:, 16:144].reshape(n, 4, 32)
    q = np.empty((n, 4, 2, 32), np.uint8)
    q[:, :, 0, :] = qs & 0xF          # elements 64c+0..31, sub-block 2c
    q[:, :, 1, :] = qs >> 4           # elements 64c+32..63, sub-block 2c+1
    d1 = d[:, None] * sc.astype(np.float32)
    m1 = dmin[:, None] * mn.astype(np.float32)
    y = d1[:, :, None] * q.reshape(n, 8, 32).astype(np.float32) - m1[:, :, None]
    return y.reshape(-1)


def _deq_q6_k(b):
    n = b.shape[0]
    ql = b[:, 0:128].reshape(n, 2, 64)
    qh = b[:, 128:192].reshape(n, 2, 32)
    sc = np.ascontiguousarray(b[:, 192:208]).view(np.int8).astype(np.float32)
    d = _f16(b[:, 208:210])
    lo, hi = ql[:, :, :32], ql[:, :, 32:]
    q = np.empty((n, 2, 4, 32), np.uint8)   # half, quarter, l: element 128*half + 32*quarter + l
    q[:, :, 0] = (lo & 0xF) | ((qh & 3) << 4)
    q[:, :, 1] = (hi & 0xF) | (((qh >> 2) & 3) << 4)
    q[:, :, 2] = (lo >> 4) | (((qh >> 4) & 3) << 4)
    q[:, :, 3] = (hi >> 4) | (((qh >> 6) & 3) << 4)
    qf = q.reshape(n, 16, 16).astype(np.float32) - 32.0      # 16 groups of 16, one scale each
    y = (d[:, None] * sc)[:, :, None] * qf
    return y.reshape(-1)


_BLOCK_DEQUANT = {Q8_0: _deq_q8_0, Q4_K: _deq_q4_k, Q6_K: _deq_q6_k}


def dequantize(type_code, raw, n_elements):
    """Dequantizes n_elements of ggml type `type_code` from the uint8 array `raw` (exactly the
    tensor's bytes) into a new float32 1-D array."""
    if type_code not in GGML_TYPES:
        raise GGUFError("unknown ggml type %d" % type_code)
    name, block_elems, block_bytes = GGML_TYPES[type_code]
    if type_code not in DEQUANT_TYPES:
        raise GGUFError("dequantization of %s is not implemented" % name)
    if n_elements % block_elems:
        raise GGUFError("%d elements is not a whole number of %s blocks" % (n_elements, name))
    n_blocks = n_elements // block_elems
    raw = np.asarray(raw, dtype=np.uint8).reshape(-1)
    if raw.size != n_blocks * block_bytes:
        raise GGUFError("%s data of %d bytes does not hold %d elements (%d bytes expected)"
                        % (name, raw.size, n_elements, n_blocks * block_bytes))
    if type_code == F32:
        return raw.view("<f4").astype(np.float32)
    if type_code == F16:
        return raw.view("<f2").astype(np.float32)
    if type_code == BF16:
        return (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
    blocks = raw.reshape(n_blocks, block_bytes)
    out = np.empty(n_elements, np.float32)
    fn = _BLOCK_DEQUANT[type_code]
    with np.errstate(invalid="ignore", over="ignore"):   # inf/NaN scales decode as IEEE says
        for b0 in range(0, n_blocks, _CHUNK_BLOCKS):
            b1 = min(n_blocks, b0 + _CHUNK_BLOCKS)
            out[b0 * block_elems:b1 * block_elems] = fn(blocks[b0:b1])
    return out


# ---- CLI --------------------------------------------------------------------------------------
def _short(value):
    if isinstance(value, np.ndarray):
        head = ", ".join(str(v) for v in value[:8].tolist())
        return "[%s%s] (%d %s)" % (head, ", ..." if value.size > 8 else "", value.size, value.dtype)
    if isinstance(value, list):
        head = ", ".join(repr(v) for v in value[:5])
        return "[%s%s] (%d)" % (head, ", ..." if len(value) > 5 else "", len(value))
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description="Print a GGUF file's metadata and tensor table.")
    ap.add_argument("file")
    ap.add_argument("--check", action="store_true",
                    help="also dequantize every supported tensor and check it is finite")
    args = ap.parse_args(argv)
    try:
        r = GGUFReader(args.file)
    except GGUFError as exc:
        print("error: %s" % exc, file=sys.stderr)
        return 1
    print("GGUF v%d, %d KVs, %d tensors, alignment %d, data at %d, %d bytes"
          % (r.version, len(r.kv), len(r.tensors), r.alignment, r.data_start, r.size))
    for key, value in r.kv.items():
        vtype, etype = r.kv_types[key]
        tname = KV_TYPE_NAMES[vtype] + ("[%s]" % KV_TYPE_NAMES[etype] if etype is not None else "")
        print("  %-45s %-12s %s" % (key, tname, _short(value)))
    bad = 0
    for t in r.tensors:
        line = "  %-32s %-6s %-24s %12d bytes @ %d" % (t.name, t.type_name, list(t.dims),
                                                      t.nbytes, t.data_offset)
        if args.check and t.type in DEQUANT_TYPES:
            x = r.dequantize(t.name)
            finite = bool(np.isfinite(x).all())
            bad += not finite
            line += "  rms %.4g%s" % (float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))),
                                      "" if finite else "  NON-FINITE")
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
