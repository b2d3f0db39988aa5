"""gguf_to_hf.py - maps a Qwen3 GGUF onto HF transformers' Qwen3ForCausalLM.

The config comes from the `qwen3.*` metadata; the weights are dequantized to float32 by
gguf_reader.py and renamed to HF's parameter names. GGUF Qwen3 Q/K weights are stored in HF order
(llama.cpp's converter permutes only for interleaved-RoPE models; Qwen3 uses NEOX rotate-half), so
no un-permute is applied. GGUF matrices {n_in, n_out} read as numpy (n_out, n_in), which is exactly
torch.nn.Linear's weight layout. Everything except make_config()/load_model() works without torch.
"""

import collections
import concurrent.futures
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ember_ref import ModelError, check_tensors, expected_shapes, load_hparams  # noqa: E402

_GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_LAYER_RE = re.compile(r"^blk\.(\d+)\.([a-z_]+)\.weight$")


def hf_name(gguf_name):
    """The HF Qwen3ForCausalLM parameter name for a GGUF tensor name, or None if unmapped."""
    if gguf_name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[gguf_name]
    m = _LAYER_RE.match(gguf_name)
    if m and m.group(2) in _LAYER_NAMES:
        return "model.layers.%d.%s.weight" % (int(m.group(1)), _LAYER_NAMES[m.group(2)])
    return None


def hf_config_kwargs(reader, hp=None):
    """Qwen3Config keyword arguments (a plain dict; rope_theta included as its own key)."""
    hp = hp or load_hparams(reader)
    kw = {
        "vocab_size": hp["n_vocab"],
        "hidden_size": hp["n_embd"],
        "intermediate_size": hp["n_ff"],
        "num_hidden_layers": hp["n_layer"],
        "num_attention_heads": hp["n_head"],
        "num_key_value_heads": hp["n_head_kv"],
        "head_dim": hp["head_dim"],
        "rms_norm_eps": hp["rms_eps"],
        "rope_theta": hp["rope_theta"],
        "max_position_embeddings": hp["n_ctx_train"],
        "tie_word_embeddings": bool(hp["tied_output"]),
        "attention_bias": False,
        "attention_dropout": 0.0,
        "hidden_act": "silu",
        "use_sliding_window": False,
        "use_cache": True,
    }
    for key, hf_key in (("tokenizer.ggml.bos_token_id", "bos_token_id"),
                        ("tokenizer.ggml.eos_token_id", "eos_token_id"),
                        ("tokenizer.ggml.padding_token_id", "pad_token_id")):
        value = reader.kv.get(key)
        # an id outside the vocabulary (a synthetic model with Qwen's ids) would make
        # nn.Embedding(padding_idx=...) fail; the ids do not affect the forward otherwise
        if value is not None and 0 <= int(value) < hp["n_vocab"]:
            kw[hf_key] = int(value)
    return kw


def hf_expected_shapes(hp):
    """HF parameter name -> torch shape that Qwen3ForCausalLM has for these hyper-parameters
    (lm_head only when untied: a tied head shares model.embed_tokens.weight). A GGUF tensor's
    numpy shape is its torch shape, so this is ember_ref's table under HF names."""
    return {hf_name(name): shape for name, shape in expected_shapes(hp).items()}


def iter_hf_tensors(reader, workers=None):
    """Yields (hf_name, float32 numpy array in HF shape, gguf_name) for every GGUF tensor, in file
    order, dequantizing up to `workers` tensors at once on threads (numpy releases the GIL).
    Raises ModelError for a tensor with no HF counterpart or a file that is not Qwen3."""
    hp = load_hparams(reader)
    check_tensors(reader, hp)
    names = []
    for info in reader.tensors:
        target = hf_name(info.name)
        if target is None:
            raise ModelError("GGUF tensor %r has no Qwen3ForCausalLM counterpart" % info.name)
        names.append((info.name, target))
    workers = workers or min(8, os.cpu_count() or 1)
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        pending = collections.deque()
        for gname, target in names:
            pending.append((gname, target, pool.submit(reader.dequantize, gname)))
            if len(pending) >= 2 * workers:
                g, t, fut = pending.popleft()
                yield t, fut.result(), g
        while pending:
            g, t, fut = pending.popleft()
            yield t, fut.result(), g


def hf_state_dict(reader):
    """The whole mapped state dict as numpy float32 arrays (small models and tests)."""
    return {name: arr for name, arr, _ in iter_hf_tensors(reader)}


# ---- torch / transformers side (imported lazily) -----------------------------------------------
def effective_rope_theta(config):
    """The RoPE base a (transformers 4.x or 5.x) Qwen3Config will actually use."""
    params = getattr(config, "rope_parameters", None)
    if isinstance(params, dict) and "rope_theta" in params:
        return float(params["rope_theta"])
    return float(getattr(config, "rope_theta"))


def make_config(reader, attn_implementation=None):
    """A transformers Qwen3Config for the GGUF. transformers 5 takes RoPE through
    rope_parameters={"rope_type": "default", "rope_theta": ...}; 4.x through rope_theta."""
    import transformers
    from transformers import Qwen3Config
    kw = hf_config_kwargs(reader)
    theta = kw.pop("rope_theta")
    major = int(transformers.__version__.split(".")[0])
    if major >= 5:
        config = Qwen3Config(rope_parameters={"rope_type": "default", "rope_theta": theta}, **kw)
    else:
        config = Qwen3Config(rope_theta=theta, rope_scaling=None, **kw)
    got = effective_rope_theta(config)
    if abs(got - theta) > 1e-6 * theta:
        raise ModelError("transformers %s ignored the RoPE base: config has %g, GGUF says %g"
                         % (transformers.__version__, got, theta))
    if attn_implementation:
        config._attn_implementation = attn_implementation   # a plain setter in 4.x and 5.x
    return config


def load_model(reader, device="cpu", dtype="float32", attn_implementation=None, log=None):
    """Builds Qwen3ForCausalLM on `device`, copies the dequantized GGUF weights in (float32,
    then cast to dtype), checks that every parameter was set and that the rotary frequencies are
    the GGUF's. Returns the model in eval mode."""
    import torch
    from transformers import Qwen3ForCausalLM
    hp = load_hparams(reader)
    config = make_config(reader, attn_implementation)
    with torch.device(device):
        model = Qwen3ForCausalLM(config)
    model.eval()
    state = model.state_dict()
    expected = hf_expected_shapes(hp)
    missing_in_model = [n for n in expected if n not in state]
    if missing_in_model:
        raise ModelError("Qwen3ForCausalLM has no parameter(s) %s" % missing_in_model[:4])
    loaded = set()
    with torch.no_grad():
        for name, arr, gname in iter_hf_tensors(reader):
            target = state[name]
            if tuple(target.shape) != arr.shape:
                raise ModelError("%s -> %s: shape %s, model has %s" % (gname, name, arr.shape,
                                                                       tuple(target.shape)))
            target.copy_(torch.from_numpy(arr))
            loaded.add(name)
        if hp["tied_output"]:
            head, embed = model.lm_head.weight, model.model.embed_tokens.weight
            if head.data_ptr() != embed.data_ptr():
                head.copy_(embed)                      # transformers did not tie: copy instead
            loaded.add("lm_head.weight")
    unset = sorted(set(state) - loaded)
    if unset:
        raise ModelError("parameters not set from the GGUF: %s" % unset[:6])
    if dtype != "float32":
        # cast parameters only: Module.to(dtype) would also round the float32 rotary inv_freq
        # buffer to the low-precision type and corrupt RoPE
        target_dtype = getattr(torch, dtype)
        for param in model.parameters():
            param.data = param.data.to(target_dtype)
    rotary = getattr(model.model, "rotary_emb", None)
    if rotary is not None and hasattr(rotary, "inv_freq"):
        want = hp["rope_theta"] ** (-np.arange(hp["head_dim"] // 2, dtype=np.float64) * 2.0
                                    / hp["head_dim"])
        got = rotary.inv_freq.detach().double().cpu().numpy()
        scaling = float(getattr(rotary, "attention_scaling", 1.0))
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=0) \
                or scaling != 1.0:
            raise ModelError("rotary embedding of the HF model does not match the GGUF "
                             "(theta %g, scaling %g)" % (hp["rope_theta"], scaling))
    if log:
        print("gguf_to_hf: %d tensors loaded into Qwen3ForCausalLM (%s, %s)"
              % (len(loaded), device, dtype), file=log, flush=True)
    return model
