"""sut_protocol.py - the serving side of Contract 1 (DESIGN.md) shared by the Python SUTs.

A backend object answers `generate` and `score`; this module owns everything else: reading one
JSON request per line with a size cap, validating it, the ready line, error events for malformed
lines and unknown ops (the server keeps serving), and the per-position top-k / requested-id
selection from a row of log-probabilities. One JSON object per output line, flushed.

Backend interface (duck-typed):
  backend.vocab_size, backend.max_context          ints
  backend.generate(prompt, max_tokens, on_first)   -> (tokens, stats dict); calls on_first() once
                                                      as soon as the first new token is known
  backend.score(prompt, first, top_k, ids)         -> list of {"top": [[id, lp], ...], "ids": [lp]}
"""

import json
import math
import os
import sys
import time

import numpy as np

PROTOCOL_VERSION = 1
MAX_LINE_BYTES = 64 << 20        # a request line longer than this is answered with an error
MAX_TOP_K = 4096                 # per position; bounds the size of a score answer
MAX_IDS_PER_POSITION = 4096


class RequestError(Exception):
    """A request that cannot be served; its message goes back in an error event."""


def model_info(reader, hp, extra=None):
    """The ready line's "model" object from a GGUFReader and the hyper-parameter dict."""
    info = {
        "name": str(reader.get("general.name") or os.path.basename(reader.path)),
        "arch": hp["arch"],
        "vocab_size": hp["n_vocab"],
        "n_layer": hp["n_layer"],
        "n_embd": hp["n_embd"],
        "n_head": hp["n_head"],
        "n_head_kv": hp["n_head_kv"],
        "head_dim": hp["head_dim"],
        "n_ff": hp["n_ff"],
        "n_ctx_train": hp["n_ctx_train"],
        "tied_output": hp["tied_output"],
        "file": os.path.abspath(reader.path),
    }
    if extra:
        info.update(extra)
    return info


def _int_list(value, what, vocab, max_len):
    if not isinstance(value, list):
        raise RequestError("%s must be a list of token ids" % what)
    if len(value) > max_len:
        raise RequestError("%s has %d entries, more than the limit %d" % (what, len(value), max_len))
    for t in value:
        if isinstance(t, bool) or not isinstance(t, int):
            raise RequestError("%s must hold integers, found %r" % (what, t))
        if t < 0 or t >= vocab:
            raise RequestError("%s: token id %d outside the vocabulary [0, %d)" % (what, t, vocab))
    return value


def _get_int(req, key, default, lo, hi):
    value = req.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError("%s must be an integer" % key)
    if value < lo or value > hi:
        raise RequestError("%s=%d outside [%d, %d]" % (key, value, lo, hi))
    return value


def _json_logprob(lp):
    """lp for JSON, which has no infinities: -inf (a probability of exactly zero) becomes -1e30;
    NaN or +inf means the model is broken (RequestError)."""
    if math.isnan(lp) or lp == math.inf:
        raise RequestError("the model produced non-finite log-probabilities")
    return max(lp, -1e30)


def topk_positions(logprobs, top_k, ids):
    """logprobs: float array [n_positions, vocab] of log-probabilities. Returns the Contract-1
    position list: the top_k ids by log-prob (ties by lower id), and the requested ids' log-probs."""
    out = []
    vocab = logprobs.shape[1]
    k = min(top_k, vocab)
    for p in range(logprobs.shape[0]):
        row = logprobs[p]
        if k:
            part = np.argpartition(-row, k - 1)[:k] if k < vocab else np.arange(vocab)
            order = np.lexsort((part, -row[part]))
            top_ids = part[order]
            top = [[int(i), float(row[i])] for i in top_ids]
        else:
            top = []
        out.append({"top": top, "ids": [float(row[i]) for i in ids[p]]})
    return out


def log_softmax(logits):
    """Row-wise log-softmax in float64 (exact enough for a reference)."""
    x = np.asarray(logits, dtype=np.float64)
    m = x.max(axis=-1, keepdims=True)
    z = x - m
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


class Server:
    """Serves Contract 1 on binary streams `inp` / text stream `out` for one backend."""

    def __init__(self, backend, ready, inp=None, out=None, log=None):
        self.backend = backend
        self.ready = ready
        self.inp = inp if inp is not None else sys.stdin.buffer
        self.out = out if out is not None else sys.stdout
        self.log = log if log is not None else sys.stderr

    def send(self, obj):
        self.out.write(json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n")
        self.out.flush()

    def _read_line(self):
        """One request line as bytes; None at EOF; RequestError for an oversized line (skipped)."""
        line = self.inp.readline(MAX_LINE_BYTES + 1)
        if not line:
            return None
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while True:                               # discard the rest of the oversized line
                rest = self.inp.readline(1 << 20)
                if not rest or rest.endswith(b"\n"):
                    break
            raise RequestError("request line longer than %d bytes" % MAX_LINE_BYTES)
        return line

    def run(self):
        self.send(self.ready)
        while True:
            req_id = None
            try:
                line = self._read_line()
                if line is None:
                    return 0
                if not line.strip():
                    continue
                try:
                    req = json.loads(line)
                except (ValueError, UnicodeDecodeError) as exc:
                    raise RequestError("malformed JSON: %s" % exc) from None
                if not isinstance(req, dict):
                    raise RequestError("a request must be a JSON object")
                req_id = req.get("id")
                if isinstance(req_id, (dict, list)):
                    req_id = None
                    raise RequestError("id must be a number or a string")
                op = req.get("op")
                if op == "quit":
                    return 0
                if op == "generate":
                    self._generate(req_id, req)
                elif op == "score":
                    self._score(req_id, req)
                else:
                    raise RequestError("unknown op %r" % (op,))
            except RequestError as exc:
                self.send({"id": req_id, "event": "error", "message": str(exc)})
            except MemoryError:
                self.send({"id": req_id, "event": "error", "message": "out of memory"})
            except Exception as exc:      # a backend failure must not kill the server
                print("%s: internal error: %r" % (self.ready.get("engine", "sut"), exc),
                      file=self.log, flush=True)
                self.send({"id": req_id, "event": "error",
                           "message": "internal error: %s: %s" % (type(exc).__name__, exc)})

    def _generate(self, req_id, req):
        b = self.backend
        prompt = _int_list(req.get("prompt"), "prompt", b.vocab_size, b.max_context)
        if not prompt:
            raise RequestError("prompt is empty")
        max_tokens = _get_int(req, "max_tokens", 128, 1, b.max_context)
        if len(prompt) + max_tokens > b.max_context:
            raise RequestError("prompt (%d) + max_tokens (%d) exceeds the context limit %d"
                               % (len(prompt), max_tokens, b.max_context))
        spec = req.get("spec", False)
        if not isinstance(spec, bool):
            raise RequestError("spec must be a boolean")
        sent = []

        def on_first():
            if not sent:
                sent.append(True)
                self.send({"id": req_id, "event": "first"})

        tokens, stats = b.generate(prompt, max_tokens, on_first)
        on_first()
        if spec:
            stats["spec"] = "not supported: plain greedy decode"
        self.send({"id": req_id, "event": "done", "tokens": [int(t) for t in tokens],
                   "stats": stats})

    def _score(self, req_id, req):
        b = self.backend
        prompt = _int_list(req.get("prompt"), "prompt", b.vocab_size, b.max_context)
        if not prompt:
            raise RequestError("prompt is empty")
        first = _get_int(req, "first", 0, 0, len(prompt) - 1)
        top_k = _get_int(req, "top_k", 64, 0, MAX_TOP_K)
        n_pos = len(prompt) - first
        ids = req.get("ids")
        if ids is None:
            ids = [[] for _ in range(n_pos)]
        else:
            if not isinstance(ids, list) or len(ids) != n_pos:
                raise RequestError("ids must be a list with one list per scored position (%d)"
                                   % n_pos)
            ids = [_int_list(lst, "ids[%d]" % i, b.vocab_size, MAX_IDS_PER_POSITION)
                   for i, lst in enumerate(ids)]
        t0 = time.monotonic()
        positions = b.score(prompt, first, top_k, ids)
        for pos in positions:
            pos["top"] = [[i, _json_logprob(lp)] for i, lp in pos["top"]]
            pos["ids"] = [_json_logprob(lp) for lp in pos["ids"]]
        self.send({"id": req_id, "event": "done", "positions": positions,
                   "stats": {"score_ms": round((time.monotonic() - t0) * 1000.0, 3),
                             "positions": n_pos}})
