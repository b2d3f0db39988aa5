#!/usr/bin/env python3
"""Self-tests of tools/gguf_reader.py: KV round trip of every value type (nested arrays too),
alignment, tensor data offsets, dequantization of every supported type against the literal scalar
formulas (bit-exact), quantizer round trips, dequantization speed, and a corpus of broken files."""

import os
import struct
import sys
import tempfile
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_testlib as L  # noqa: E402
from gguf_testlib import G  # noqa: E402


class ReaderTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def write_bytes(self, name, data):
        p = self.path(name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def test_kv_all_types_roundtrip(self):
        w = L.Writer()
        scalars = [("a.u8", G.T_UINT8, 200), ("a.i8", G.T_INT8, -100), ("a.u16", G.T_UINT16, 65000),
                   ("a.i16", G.T_INT16, -30000), ("a.u32", G.T_UINT32, 4000000000),
                   ("a.i32", G.T_INT32, -2000000000), ("a.f32", G.T_FLOAT32, 1.5),
                   ("a.bool", G.T_BOOL, 1), ("a.u64", G.T_UINT64, 1 << 60),
                   ("a.i64", G.T_INT64, -(1 << 60)), ("a.f64", G.T_FLOAT64, 0.1)]
        for k, t, v in scalars:
            w.add_kv(k, t, v)
        w.add_kv("a.str", G.T_STRING, "héllo")
        w.add_kv("a.arr_i32", G.T_ARRAY, (G.T_INT32, [1, -2, 3]))
        w.add_kv("a.arr_f32", G.T_ARRAY, (G.T_FLOAT32, [0.5, 2.0]))
        w.add_kv("a.arr_bool", G.T_ARRAY, (G.T_BOOL, [1, 0, 1]))
        w.add_kv("a.arr_str", G.T_ARRAY, (G.T_STRING, ["x", "", "zz"]))
        w.add_kv("a.arr_empty", G.T_ARRAY, (G.T_UINT64, []))
        w.add_kv("a.nested", G.T_ARRAY, (G.T_ARRAY, [(G.T_INT8, [1, 2]),
                                                     (G.T_STRING, ["p", "q"]),
                                                     (G.T_ARRAY, [(G.T_UINT16, [7])])]))
        r = G.GGUFReader(w.write(self.path("kv.gguf")))
        self.assertEqual(r.version, 3)
        for k, t, v in scalars:
            self.assertEqual(r.kv[k], v if t != G.T_BOOL else True, k)
            self.assertEqual(r.kv_types[k], (t, None))
        self.assertEqual(r.kv["a.str"], "héllo")
        self.assertEqual(r.kv["a.arr_i32"].tolist(), [1, -2, 3])
        self.assertEqual(r.kv["a.arr_i32"].dtype, np.dtype("<i4"))
        self.assertEqual(r.kv["a.arr_f32"].tolist(), [0.5, 2.0])
        self.assertEqual(r.kv["a.arr_bool"].tolist(), [True, False, True])
        self.assertEqual(r.kv["a.arr_str"], ["x", "", "zz"])
        self.assertEqual(r.kv["a.arr_empty"].size, 0)
        nested = r.kv["a.nested"]
        self.assertEqual(nested[0].tolist(), [1, 2])
        self.assertEqual(nested[1], ["p", "q"])
        self.assertEqual(nested[2][0].tolist(), [7])
        self.assertEqual(r.kv_types["a.nested"], (G.T_ARRAY, G.T_ARRAY))
        self.assertEqual(r.get_int("a.u32"), 4000000000)
        self.assertAlmostEqual(r.get_float("a.f64"), 0.1)
        with self.assertRaisesRegex(G.GGUFError, "expected an integer"):
            r.get_int("a.str")
        with self.assertRaisesRegex(G.GGUFError, "missing metadata key"):
            r.get_int("a.absent")
        self.assertEqual(r.alignment, 32)
        self.assertEqual(r.tensors, [])

    def test_tensors_alignment_and_offsets(self):
        for align in (None, 64, 8):
            w = L.Writer(alignment=align)
            w.add_kv("general.architecture", G.T_STRING, "test")
            a = np.arange(7 * 3, dtype=np.float32).reshape(3, 7)
            b = np.linspace(-1, 1, 32 * 2).reshape(2, 32)
            w.add_array("a", a, G.F32)
            w.add_array("b", b, G.F16)
            w.add_array("c", np.ones(5), G.F32)
            r = G.GGUFReader(w.write(self.path("t%s.gguf" % align)))
            expect = align or 32
            self.assertEqual(r.alignment, expect)
            self.assertEqual(r.data_start % expect, 0)
            for t in r.tensors:
                self.assertEqual(t.offset % expect, 0)
            self.assertEqual(r.tensor("a").dims, (7, 3))
            self.assertEqual(r.tensor("a").shape, (3, 7))
            np.testing.assert_array_equal(r.dequantize("a"), a)
            np.testing.assert_array_equal(r.dequantize("b"), b.astype(np.float16).astype(np.float32))
            np.testing.assert_array_equal(r.dequantize_rows("a", [2, 0]), a[[2, 0]])
            np.testing.assert_array_equal(r.dequantize("c"), np.ones(5, np.float32))
            with self.assertRaisesRegex(G.GGUFError, "out of range"):
                r.dequantize_rows("a", [3])
            with self.assertRaisesRegex(G.GGUFError, "no tensor named"):
                r.tensor("zz")

    def test_dequant_matches_scalar_formulas(self):
        rng = np.random.default_rng(7)
        for t in G.DEQUANT_TYPES:
            _, be, bb = G.GGML_TYPES[t]
            n_blocks = 6 if be == 256 else (40 if be == 32 else 512)
            raw = L.random_blocks(t, n_blocks, rng)
            fast = G.dequantize(t, raw, n_blocks * be)
            slow = np.array(L.scalar_dequantize(t, raw), dtype=np.float64)
            self.assertEqual(fast.dtype, np.float32)
            self.assertEqual(fast.shape, (n_blocks * be,))
            # the formulas are exact in float32 for these formats: demand bit equality
            np.testing.assert_array_equal(fast, slow.astype(np.float32),
                                          err_msg=G.GGML_TYPES[t][0])

    def test_dequant_chunk_boundary(self):
        rng = np.random.default_rng(3)
        n_blocks = G._CHUNK_BLOCKS + 3
        raw = L.random_blocks(G.Q8_0, n_blocks, rng)
        fast = G.dequantize(G.Q8_0, raw, n_blocks * 32)
        tail = raw[-5 * 34:]
        np.testing.assert_array_equal(fast[-5 * 32:],
                                      np.array(L.scalar_dequantize(G.Q8_0, tail), np.float32))

    def test_quantizers_roundtrip(self):
        rng = np.random.default_rng(11)
        x = rng.normal(0, 1, 256 * 16).astype(np.float32)
        rel = {G.F32: 0, G.F16: 1e-3, G.BF16: 8e-3, G.Q8_0: 0.01, G.Q6_K: 0.05, G.Q4_K: 0.15}
        for t, tol in rel.items():
            y = G.dequantize(t, np.frombuffer(L.quantize(t, x), np.uint8), x.size)
            err = np.sqrt(np.mean((y - x) ** 2)) / np.sqrt(np.mean(x ** 2))
            self.assertLessEqual(err, tol, G.GGML_TYPES[t][0])

    def test_dequant_speed(self):
        # a 12288 x 4096 Q4_K matrix must dequantize in seconds; here a quarter of it, timed
        n = 3072 * 4096
        raw = np.random.default_rng(1).integers(0, 256, n // 256 * 144, dtype=np.uint8)
        t0 = time.monotonic()
        y = G.dequantize(G.Q4_K, raw, n)
        dt = time.monotonic() - t0
        print("Q4_K dequant: %.1f M elements/s" % (n / dt / 1e6), file=sys.stderr)
        self.assertEqual(y.size, n)

    def test_dequant_bad_sizes(self):
        with self.assertRaisesRegex(G.GGUFError, "whole number"):
            G.dequantize(G.Q8_0, np.zeros(34, np.uint8), 31)
        with self.assertRaisesRegex(G.GGUFError, "does not hold"):
            G.dequantize(G.Q8_0, np.zeros(33, np.uint8), 32)
        with self.assertRaisesRegex(G.GGUFError, "not implemented"):
            G.dequantize(13, np.zeros(176, np.uint8), 256)

    # ---- broken files -------------------------------------------------------------------------
    def good_bytes(self):
        w = L.Writer()
        w.add_kv("general.architecture", G.T_STRING, "test")
        w.add_kv("x.arr", G.T_ARRAY, (G.T_INT32, [1, 2, 3]))
        w.add_array("w", np.ones((2, 32)), G.Q8_0)
        w.add_array("v", np.ones(8), G.F32)
        return w.to_bytes()

    def expect_error(self, data, pattern, name="bad.gguf"):
        with self.assertRaisesRegex(G.GGUFError, pattern):
            G.GGUFReader(self.write_bytes(name, data))

    def test_truncated_everywhere(self):
        data = self.good_bytes()
        G.GGUFReader(self.write_bytes("good.gguf", data))
        for cut in range(0, len(data) - 1):
            with self.assertRaises(G.GGUFError, msg="cut at %d" % cut):
                G.GGUFReader(self.write_bytes("cut.gguf", data[:cut]))

    def test_bad_headers(self):
        data = self.good_bytes()
        self.expect_error(b"GGUX" + data[4:], "bad magic")
        self.expect_error(data[:4] + struct.pack("<I", 1) + data[8:], "unsupported GGUF version")
        self.expect_error(data[:4] + struct.pack(">I", 3) + data[8:], "big-endian")
        self.expect_error(data[:8] + struct.pack("<Q", 1 << 40) + data[16:], "tensor_count")
        self.expect_error(data[:16] + struct.pack("<Q", 1 << 40) + data[24:], "metadata_kv_count")
        # first key's length absurd
        self.expect_error(data[:24] + struct.pack("<Q", 1 << 50) + data[32:], "length")

    def build(self, mutate_kv=None, tensors=None, alignment=None, raw_kv=None):
        w = L.Writer(alignment=alignment)
        if raw_kv:
            w.kvs.extend(raw_kv)
        for name, dims, t, raw in tensors or []:
            w.add_tensor(name, dims, t, raw)
        return w

    def test_bad_kvs(self):
        w = self.build(raw_kv=[("k", 99, 0)])
        self.expect_error(w.to_bytes(), "unknown value type 99")
        w = self.build(raw_kv=[("k", G.T_STRING, "a"), ("k", G.T_STRING, "b")])
        self.expect_error(w.to_bytes(), "duplicate metadata key")
        w = self.build(raw_kv=[("k", G.T_BOOL, 2)])
        self.expect_error(w.to_bytes(), "bool value")
        deep = (G.T_INT8, [1])
        for _ in range(G.MAX_ARRAY_DEPTH + 1):
            deep = (G.T_ARRAY, [deep])
        w = self.build(raw_kv=[("k", G.T_ARRAY, deep)])
        self.expect_error(w.to_bytes(), "nested deeper")
        # an array claiming 2^40 elements
        data = L.Writer().to_bytes()[:16] + struct.pack("<Q", 1)
        data += L._pack_string("k") + struct.pack("<IIQ", G.T_ARRAY, G.T_UINT32, 1 << 40)
        self.expect_error(data, "array length")
        w = self.build(raw_kv=[("general.alignment", G.T_UINT32, 24)])
        self.expect_error(w.to_bytes(), "not a power of two")
        w = self.build(raw_kv=[("general.alignment", G.T_STRING, "32")])
        self.expect_error(w.to_bytes(), "expected an integer")
        w = self.build(raw_kv=[("k\xff", G.T_UINT8, 1)])
        data = w.to_bytes().replace("k\xff".encode("utf-8"), b"k\xff")
        self.expect_error(data[:24] + struct.pack("<Q", 2) + data[32:], "UTF-8")

    def test_bad_tensors(self):
        q = bytes(34)
        self.expect_error(self.build(tensors=[("w", [31, 1], G.Q8_0, q)]).to_bytes(),
                          "not a multiple of the Q8_0 block")
        self.expect_error(self.build(tensors=[("w", [32, 1], 77, q)]).to_bytes(),
                          "unknown ggml type 77")
        self.expect_error(self.build(tensors=[("w", [32, 1, 1, 1, 1], G.Q8_0, q)]).to_bytes(),
                          "n_dims")
        self.expect_error(self.build(tensors=[("w", [32, 1], G.Q8_0, q),
                                              ("w", [32, 1], G.Q8_0, q)]).to_bytes(),
                          "duplicate tensor name")
        self.expect_error(self.build(tensors=[("w", [32, 1 << 61], G.Q8_0, q)]).to_bytes(),
                          "overflows|past the end")
        self.expect_error(self.build(tensors=[("w", [1 << 62, 1], G.F32, q)]).to_bytes(),
                          "absurd dimension")
        # the data is missing: tensor past the end
        self.expect_error(self.build(tensors=[("w", [32, 4], G.Q8_0, q)]).to_bytes(),
                          "past the end")
        # misaligned and overlapping offsets: patch the stored offsets
        data = self.build(tensors=[("a", [8], G.F32, bytes(32)),
                                   ("b", [8], G.F32, bytes(32))]).to_bytes()
        off_b = data.rfind(struct.pack("<IQ", G.F32, 32))
        self.expect_error(data[:off_b] + struct.pack("<IQ", G.F32, 16) + data[off_b + 12:],
                          "not a multiple of the alignment")
        self.expect_error(data[:off_b] + struct.pack("<IQ", G.F32, 0) + data[off_b + 12:],
                          "overlap")

    def test_empty_and_missing_file(self):
        self.expect_error(b"", "cannot map|truncated")
        with self.assertRaises(G.GGUFError):
            G.GGUFReader(self.path("does-not-exist.gguf"))

    def test_cli(self):
        import subprocess
        p = L.make_qwen3(self.path("m.gguf"))
        out = subprocess.run([L.PYTHON, os.path.join(L.TOOLS, "gguf_reader.py"), p, "--check"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("qwen3.block_count", out.stdout)
        self.assertIn("blk.1.ffn_down.weight", out.stdout)
        bad = self.write_bytes("bad.gguf", b"nope")
        out = subprocess.run([L.PYTHON, os.path.join(L.TOOLS, "gguf_reader.py"), bad],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 1)
        self.assertIn("bad magic", out.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
