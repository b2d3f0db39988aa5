#!/usr/bin/env python3
"""hf_sut.py - a Contract-1 SUT backed by HF transformers' Qwen3ForCausalLM (the project's external
accuracy anchor on the GPU machine). The GGUF is dequantized and mapped by gguf_to_hf.py; torch
and transformers are imported only when a model is loaded, so --help works without them.

  hf_sut.py serve --stdio --model MODEL.gguf [--dtype float32|bfloat16] [--device cuda|cpu]
  hf_sut.py logits MODEL.gguf --tokens 1,2,3 --out FILE.npy     float32 [n_tokens, n_vocab]

`score` runs one forward over the prompt and takes log_softmax in float32; `generate` is greedy
with the HF KV cache (no EOS stop). float32 runs with TF32 disabled so it is a true fp32 reference.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sut_protocol  # noqa: E402
from ember_ref import ModelError, load_hparams, parse_tokens  # noqa: E402
from gguf_reader import GGUFError, GGUFReader  # noqa: E402

ENGINE_NAME = "hf-transformers-qwen3"


def _torch_setup(device, dtype):
    import torch
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("error: --device %s but torch sees no CUDA device" % device)
    if dtype == "float32":
        # float32 matmuls in float32, not TF32 (the model has no convolutions for cudnn's switch)
        torch.set_float32_matmul_precision("highest")
    torch.set_grad_enabled(False)
    return torch, device


def _device_name(torch, device):
    if device.startswith("cuda"):
        idx = torch.device(device).index or 0
        return "%s %s (torch %s)" % (device, torch.cuda.get_device_name(idx), torch.__version__)
    return "cpu torch %s" % torch.__version__


class HFBackend:
    """Contract-1 backend (see sut_protocol.py) over a loaded Qwen3ForCausalLM."""

    def __init__(self, torch, model, device, vocab_size, max_context):
        self.torch = torch
        self.model = model
        self.device = device
        self.vocab_size = vocab_size
        self.max_context = max_context

    def _ids(self, tokens):
        return self.torch.tensor([tokens], dtype=self.torch.long, device=self.device)

    def logits(self, tokens):
        """float32 logits [n_tokens, vocab] of one forward without cache."""
        out = self.model(input_ids=self._ids(tokens), use_cache=False)
        return out.logits[0].float()

    def generate(self, prompt, max_tokens, on_first):
        torch = self.torch
        t0 = time.monotonic()
        out = self.model(input_ids=self._ids(prompt), use_cache=True)
        tok = int(torch.argmax(out.logits[0, -1].float()))       # int() synchronises
        t1 = time.monotonic()
        on_first()
        tokens = [tok]
        past = out.past_key_values
        while len(tokens) < max_tokens:
            out = self.model(input_ids=self._ids([tok]), past_key_values=past, use_cache=True)
            past = out.past_key_values
            tok = int(torch.argmax(out.logits[0, -1].float()))
            tokens.append(tok)
        t2 = time.monotonic()
        return tokens, {"prefill_ms": round((t1 - t0) * 1000.0, 3),
                        "decode_ms": round((t2 - t1) * 1000.0, 3),
                        "prompt_tokens": len(prompt), "gen_tokens": len(tokens)}

    def score(self, prompt, first, top_k, ids):
        torch = self.torch
        # one forward over the prompt; the LM head and log_softmax (float32) in position chunks
        # so a long prompt never holds [positions, vocab] logits at once
        hidden = self.model.model(input_ids=self._ids(prompt), use_cache=False)
        hidden = hidden.last_hidden_state[0, first:]
        chunk = max(1, (1 << 30) // (4 * self.vocab_size))
        positions = []
        for c0 in range(0, hidden.shape[0], chunk):
            lp = torch.log_softmax(self.model.lm_head(hidden[c0:c0 + chunk]).float(), dim=-1)
            positions += self._select(lp, top_k, ids[c0:c0 + chunk])
        return positions

    def _select(self, lp, top_k, ids):
        torch = self.torch
        n_pos, vocab = lp.shape
        k = min(top_k, vocab)
        if k:
            vals, idx = torch.topk(lp, k, dim=-1, largest=True, sorted=True)
            vals, idx = vals.cpu().tolist(), idx.cpu().tolist()
        flat_pos = [p for p in range(n_pos) for _ in ids[p]]
        flat_ids = [t for p in range(n_pos) for t in ids[p]]
        picked = []
        if flat_ids:
            picked = lp[torch.tensor(flat_pos, device=lp.device),
                        torch.tensor(flat_ids, device=lp.device)].cpu().tolist()
        positions = []
        cursor = 0
        for p in range(n_pos):
            top = [[int(i), float(v)] for i, v in zip(idx[p], vals[p])] if k else []
            n = len(ids[p])
            positions.append({"top": top, "ids": [float(v) for v in picked[cursor:cursor + n]]})
            cursor += n
        return positions


def load(args):
    torch, device = _torch_setup(args.device, args.dtype)
    import transformers
    import gguf_to_hf
    reader = GGUFReader(args.model)
    hp = load_hparams(reader)
    t0 = time.monotonic()
    model = gguf_to_hf.load_model(reader, device=device, dtype=args.dtype,
                                  attn_implementation=args.attn, log=sys.stderr)
    print("hf_sut: loaded in %.1fs, transformers %s, attention %s"
          % (time.monotonic() - t0, transformers.__version__,
             getattr(model.config, "_attn_implementation", "?")), file=sys.stderr, flush=True)
    max_context = args.max_context or hp["n_ctx_train"]
    backend = HFBackend(torch, model, device, hp["n_vocab"], max_context)
    extra = {"dtype": args.dtype, "max_context": max_context,
             "transformers": transformers.__version__, "torch": torch.__version__,
             "attn": getattr(model.config, "_attn_implementation", None)}
    ready = {"ready": True, "protocol": sut_protocol.PROTOCOL_VERSION, "engine": ENGINE_NAME,
             "model": sut_protocol.model_info(reader, hp, extra),
             "device": _device_name(torch, device)}
    return backend, ready


def cmd_serve(args):
    if not args.stdio:
        raise SystemExit("error: only --stdio serving is implemented")
    backend, ready = load(args)
    return sut_protocol.Server(backend, ready).run()


def cmd_logits(args):
    backend, _ = load(args)
    tokens = parse_tokens(args.tokens)
    if not tokens or min(tokens) < 0 or max(tokens) >= backend.vocab_size:
        raise SystemExit("error: tokens must be non-empty and inside [0, %d)" % backend.vocab_size)
    import numpy as np
    logits = backend.logits(tokens).cpu().numpy().astype(np.float32)
    np.save(args.out, logits)
    print("hf_sut: %d tokens -> %s %s" % (len(tokens), args.out, logits.shape), file=sys.stderr)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p):
        p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32",
                       help="parameter dtype (float32 is the reference; log-softmax is float32)")
        p.add_argument("--device", default="auto", help="auto (cuda when available), cuda, cuda:N, cpu")
        p.add_argument("--attn", default="sdpa", help="attn_implementation: sdpa or eager")
        p.add_argument("--max-context", type=int, default=0,
                       help="longest prompt + generation accepted (default: qwen3.context_length)")

    p = sub.add_parser("serve", help="Contract-1 SUT (generate, score, quit)")
    p.add_argument("--stdio", action="store_true")
    p.add_argument("--model", required=True)
    common(p)
    p = sub.add_parser("logits", help="logits at every position for fixed tokens, saved as .npy")
    p.add_argument("model")
    p.add_argument("--tokens", required=True)
    p.add_argument("--out", required=True)
    common(p)
    args = ap.parse_args(argv)
    try:
        return {"serve": cmd_serve, "logits": cmd_logits}[args.cmd](args)
    except (GGUFError, ModelError) as exc:
        print("error: %s" % exc, file=sys.stderr)
        return 1
    except ImportError as exc:
        print("error: hf_sut.py needs torch and transformers (%s)" % exc, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
