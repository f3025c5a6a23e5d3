"""Built-in transformers classes; each is a standalone task built from code-made configs, never from_pretrained.

Configs are written out in the module template (or a `config` helper when a rotary embedding needs the same
one), with every dropout 0.0 and an explicit attention implementation. Tuple outputs are reduced to one
tensor in the `call` template. Classes that compute the same thing share a family (every RMSNorm variant is
`rms_norm`, every gated feed-forward block `gated_mlp`); one of a kind keeps its own (`llama_decoder_layer`).
"""

from __future__ import annotations

import random

from opgen.vocab.builders import sequence_input
from opgen.vocab.spec import Extra, OpSpec, Params, Shape, Sizes, default_family

ATTENTION_IMPLEMENTATIONS = ("eager", "sdpa")
MAX_HEAD_DIM = 256
ROTARY_LAYOUT = ("batch_size", "seq_len", "head_dim")


def _model_module(model_type: str) -> str:
    return f"transformers.models.{model_type}.modeling_{model_type}"


def _imports(model_type: str, *classes: str, config: str | None = None) -> tuple[str, ...]:
    lines = [f"from {_model_module(model_type)} import {', '.join(classes)}"]
    if config:
        lines.insert(0, f"from transformers import {config}")
    return tuple(lines)


def _task(name: str, phrase: str, module: str, imports: tuple[str, ...], draw, **fields) -> OpSpec:
    """A transformers class as a standalone task on a (batch, seq_len, hidden) input unless told otherwise."""
    defaults = {"category": "transformers", "ranks": (3,), "make_input": sequence_input, "standalone": True}
    return OpSpec(name=f"transformers.{name}", phrase=phrase, module=module, imports=imports, draw=draw,
                  **{**defaults, **fields})


# ----------------------------------------------------------------------------------------------- draws

def _heads(rng: random.Random, hidden: int, sizes: Sizes) -> int | None:
    """A head count from the profile that divides the hidden size into even head dims (rotary needs even),
    preferring head dims of at most MAX_HEAD_DIM as real models use."""
    options = [h for h in sizes.heads if hidden % h == 0 and (hidden // h) % 2 == 0]
    usual = [h for h in options if hidden // h <= MAX_HEAD_DIM]
    return rng.choice(usual or options) if options else None


def _draw_norm(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {"hidden_size": shape[-1], "eps": rng.choice((1e-5, 1e-6))}


def _mlp_draw(*activations: str, ratios: tuple[int, ...] = (2, 4)):
    def draw(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
        hidden = shape[-1]
        heads = _heads(rng, hidden, sizes)
        if heads is None:
            return None
        return {"hidden_size": hidden, "intermediate_size": hidden * rng.choice(ratios),
                "act": rng.choice(activations), "num_attention_heads": heads}
    return draw


def _draw_attention(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    hidden = shape[-1]
    heads = _heads(rng, hidden, sizes)
    if heads is None:
        return None
    kv_heads = rng.choice([k for k in range(1, heads + 1) if heads % k == 0])
    return {"hidden_size": hidden, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
            "head_dim": hidden // heads, "intermediate_size": 2 * hidden,
            "attn": rng.choice(ATTENTION_IMPLEMENTATIONS)}


def _position_ids(shape: Shape, params: Params) -> list[Extra]:
    """Token positions (batch, seq_len) for rotary embeddings."""
    return [Extra("position_ids", (shape[0], shape[1]), dtype="long", high=shape[1],
                  dim_names=("batch_size", "seq_len"))]


def _residual(shape: Shape, params: Params) -> list[Extra]:
    """The residual stream an output block adds back (same shape as the input)."""
    return [Extra("input_tensor", shape, dim_names=("batch_size", "seq_len", "embed_dim"))]


def _intermediate_shape(shape: Shape, params: Params) -> Shape:
    return (*shape[:-1], int(params["intermediate_size"]))


def _rotary_input(rng: random.Random, sizes: Sizes) -> tuple[Shape, tuple[str, ...]]:
    """A (batch, seq_len, head_dim) tensor: the rotary embedding reads only its dtype and device."""
    (batch, seq_len, hidden), _ = sequence_input(rng, sizes)
    head_dims = [hidden // h for h in sizes.heads if hidden % h == 0 and (hidden // h) % 2 == 0]
    usual = [d for d in head_dims if d <= MAX_HEAD_DIM]
    return (batch, seq_len, rng.choice(usual or head_dims)), ROTARY_LAYOUT


def _draw_rotary(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    heads = rng.choice(sizes.heads)
    return {"hidden_size": shape[-1] * heads, "num_attention_heads": heads, "head_dim": shape[-1],
            "rope_theta": rng.choice((10000.0, 500000.0, 1000000.0))}


def _rotary_shape(shape: Shape, params: Params) -> Shape:
    return (shape[0], shape[1], 2 * int(params["head_dim"]))


def _conv1d_draw(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {"in_features": shape[-1], "out_features": shape[-1] * rng.choice((1, 3, 4))}


# ----------------------------------------------------------------------------------------- activations

def _activation(name: str, phrase: str, arguments: str = "", draw=None, family: str = "") -> OpSpec:
    """An activation class; its family is its name without `Activation` unless it computes a torch one."""
    extra = {"draw": draw} if draw else {}
    family = family or default_family(name.removesuffix("Activation"))
    return OpSpec(name=f"transformers.{name}", category="transformers", phrase=phrase, ranks=(2, 3, 4),
                  module=f"{name}({arguments})", standalone=True, family=family,
                  imports=(f"from transformers.activations import {name}",), **extra)


def _flag(key: str):
    return lambda rng, shape, sizes: {key: rng.random() < 0.5}


def _clip_range(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    low, high = rng.choice(((-10.0, 10.0), (-1.0, 1.0), (-0.1, 2.0), (-0.05, 0.5)))
    return {"low": low, "high": high}


ACTIVATIONS = [
    _activation("GELUActivation", "applies the GELU activation (erf form)",
                "use_gelu_python={use_gelu_python}", _flag("use_gelu_python"), family="gelu"),
    _activation("GELUTanh", "applies the tanh approximation of GELU",
                "use_gelu_tanh_python={use_gelu_tanh_python}", _flag("use_gelu_tanh_python"), family="gelu"),
    _activation("NewGELUActivation", "applies the GPT-2 'new' GELU activation", family="gelu"),
    _activation("FastGELUActivation", "applies the fast tanh-approximated GELU activation", family="gelu"),
    _activation("QuickGELUActivation", "applies the sigmoid-approximated quick GELU activation"),
    _activation("ClippedGELUActivation", "applies GELU clipped to a fixed range",
                "min={low}, max={high}", _clip_range),
    _activation("AccurateGELUActivation", "applies the accurate tanh-approximated GELU activation", family="gelu"),
    _activation("MishActivation", "applies the Mish activation"),
    _activation("SiLUActivation", "applies the SiLU activation"),
    _activation("LaplaceActivation", "applies the Laplace activation of MEGA"),
    _activation("ReLUSquaredActivation", "applies the squared ReLU activation"),
    _activation("SqrtSoftplusActivation", "applies the square root of softplus"),
    _activation("XIELUActivation", "applies the learnable xIELU activation", "dtype=torch.float32"),
]


# -------------------------------------------------------------------------------------- normalisations

def _norm(name: str, model_type: str, phrase: str, arguments: str = "{hidden_size}, eps={eps}",
          family: str = "rms_norm") -> OpSpec:
    return _task(name, phrase, f"{name}({arguments})", _imports(model_type, name), _draw_norm,
                 args=("hidden_size",), attr="norm", family=family)


NORMS = [
    _norm("LlamaRMSNorm", "llama", "applies Llama's RMS normalization"),
    _norm("MistralRMSNorm", "mistral", "applies Mistral's RMS normalization"),
    _norm("MixtralRMSNorm", "mixtral", "applies Mixtral's RMS normalization"),
    _norm("Qwen2RMSNorm", "qwen2", "applies Qwen2's RMS normalization"),
    _norm("Qwen3RMSNorm", "qwen3", "applies Qwen3's RMS normalization"),
    _norm("GemmaRMSNorm", "gemma", "applies Gemma's RMS normalization with a (1 + weight) scale"),
    _norm("Phi3RMSNorm", "phi3", "applies Phi-3's RMS normalization"),
    _norm("DeepseekV3RMSNorm", "deepseek_v3", "applies DeepSeek-V3's RMS normalization"),
    _norm("T5LayerNorm", "t5", "applies T5's scale-only layer normalization"),
    _norm("CohereLayerNorm", "cohere", "applies Cohere's bias-free layer normalization", family="layer_norm"),
    _norm("OlmoLayerNorm", "olmo", "applies OLMo's parameter-free layer normalization", "{hidden_size}",
          family="layer_norm"),
]


# ------------------------------------------------------------------------------------------ MLP blocks

def _config_mlp(name: str, model_type: str, config: str, phrase: str, activations: tuple[str, ...],
                family: str = "gated_mlp", act_key: str = "hidden_act") -> OpSpec:
    """A feed-forward block built from its model's config (gated unless `family` says otherwise)."""
    module = (f"{name}({config}(hidden_size={{hidden_size}}, intermediate_size={{intermediate_size}}, "
              f"num_attention_heads={{num_attention_heads}}, {act_key}={{act}}))")
    return _task(name, phrase, module, _imports(model_type, name, config=config), _mlp_draw(*activations),
                 args=("hidden_size", "intermediate_size"), attr="mlp", family=family)


MLPS = [
    _config_mlp("LlamaMLP", "llama", "LlamaConfig", "applies Llama's gated SiLU feed-forward block", ("silu",)),
    _config_mlp("MistralMLP", "mistral", "MistralConfig", "applies Mistral's gated feed-forward block", ("silu",)),
    _config_mlp("Qwen2MLP", "qwen2", "Qwen2Config", "applies Qwen2's gated feed-forward block", ("silu",)),
    _config_mlp("Qwen3MLP", "qwen3", "Qwen3Config", "applies Qwen3's gated feed-forward block", ("silu",)),
    _config_mlp("GemmaMLP", "gemma", "GemmaConfig", "applies Gemma's gated GELU feed-forward block",
                ("gelu_pytorch_tanh",)),
    _config_mlp("Phi3MLP", "phi3", "Phi3Config", "applies Phi-3's fused gate-up feed-forward block", ("silu",)),
    _config_mlp("GPTNeoXMLP", "gpt_neox", "GPTNeoXConfig", "applies GPT-NeoX's feed-forward block",
                ("gelu", "gelu_new"), family="mlp"),
    _config_mlp("CLIPMLP", "clip", "CLIPVisionConfig", "applies CLIP's feed-forward block",
                ("quick_gelu", "gelu"), family="mlp"),
    _config_mlp("SiglipMLP", "siglip", "SiglipVisionConfig", "applies SigLIP's feed-forward block",
                ("gelu_pytorch_tanh",), family="mlp"),
    _task("GPT2MLP", "applies GPT-2's Conv1D feed-forward block",
          "GPT2MLP({intermediate_size}, GPT2Config(n_embd={hidden_size}, n_head={num_attention_heads}, "
          "activation_function={act}, resid_pdrop=0.0))",
          _imports("gpt2", "GPT2MLP", config="GPT2Config"), _mlp_draw("gelu_new", "gelu"),
          args=("hidden_size", "intermediate_size"), attr="mlp", family="mlp"),
    _task("FalconMLP", "applies Falcon's feed-forward block",
          "FalconMLP(FalconConfig(hidden_size={hidden_size}, ffn_hidden_size={intermediate_size}, "
          "num_attention_heads={num_attention_heads}, activation={act}, hidden_dropout=0.0))",
          _imports("falcon", "FalconMLP", config="FalconConfig"), _mlp_draw("gelu"),
          args=("hidden_size", "intermediate_size"), attr="mlp", family="mlp"),
    _task("T5DenseActDense", "applies T5's dense-activation-dense feed-forward block",
          "T5DenseActDense(T5Config(d_model={hidden_size}, d_ff={intermediate_size}, "
          "num_heads={num_attention_heads}, feed_forward_proj={act}, dropout_rate=0.0))",
          _imports("t5", "T5DenseActDense", config="T5Config"), _mlp_draw("relu", "gelu"),
          args=("hidden_size", "intermediate_size"), attr="ffn", family="mlp"),
    _task("T5DenseGatedActDense", "applies T5's gated feed-forward block",
          "T5DenseGatedActDense(T5Config(d_model={hidden_size}, d_ff={intermediate_size}, "
          "num_heads={num_attention_heads}, feed_forward_proj={act}, dropout_rate=0.0))",
          _imports("t5", "T5DenseGatedActDense", config="T5Config"), _mlp_draw("gated-gelu", "gated-silu"),
          args=("hidden_size", "intermediate_size"), attr="ffn", family="gated_mlp"),
    _task("T5LayerFF", "applies T5's pre-norm residual feed-forward layer",
          "T5LayerFF(T5Config(d_model={hidden_size}, d_ff={intermediate_size}, "
          "num_heads={num_attention_heads}, feed_forward_proj={act}, dropout_rate=0.0))",
          _imports("t5", "T5LayerFF", config="T5Config"), _mlp_draw("relu", "gated-gelu"),
          args=("hidden_size", "intermediate_size"), attr="ffn"),
    _task("BertIntermediate", "applies BERT's intermediate dense projection and activation",
          "BertIntermediate(BertConfig(hidden_size={hidden_size}, intermediate_size={intermediate_size}, "
          "num_attention_heads={num_attention_heads}, hidden_act={act}))",
          _imports("bert", "BertIntermediate", config="BertConfig"), _mlp_draw("gelu", "relu"),
          out_shape=_intermediate_shape, args=("hidden_size", "intermediate_size"), attr="intermediate"),
    _task("BertSelfOutput", "applies BERT's output projection, residual add and layer normalization",
          "BertSelfOutput(BertConfig(hidden_size={hidden_size}, num_attention_heads={num_attention_heads}, "
          "hidden_dropout_prob=0.0))",
          _imports("bert", "BertSelfOutput", config="BertConfig"), _mlp_draw("gelu"),
          call="{self}({x}, {input_tensor})", extras=_residual, args=("hidden_size",), attr="self_output"),
    _task("Conv1D", "applies GPT-2's Conv1D (a linear layer with transposed weights)",
          "Conv1D({out_features}, {in_features})", ("from transformers.pytorch_utils import Conv1D",),
          _conv1d_draw, out_shape=lambda shape, params: (*shape[:-1], int(params["out_features"])),
          args=("in_features", "out_features"), attr="conv1d", family="matmul"),
]


# --------------------------------------------------------------------------- rotary and attention blocks

def _rotary_config(config: str, extra: str = "") -> str:
    return (f"{config}(hidden_size={{hidden_size}}, intermediate_size={{intermediate_size}}, "
            f"num_attention_heads={{num_attention_heads}}, num_key_value_heads={{num_key_value_heads}}, "
            f"attention_dropout=0.0, attn_implementation={{attn}}{extra})")


def _rotary_attention(name: str, model_type: str, config: str, rotary: str, phrase: str, head_dim: bool = True,
                      layer: bool = False) -> OpSpec:
    """A decoder attention block (or layer) with its rotary embedding; positions are a long model input."""
    config_template = _rotary_config(config, ", head_dim={hidden_size} // {num_attention_heads}" if head_dim else "")
    call = "{self}({x}, position_embeddings={rotary}({x}, {position_ids}), attention_mask=None)"
    return _task(name, phrase, f"{name}({{config}}, layer_idx=0)",
                 _imports(model_type, name, rotary, config=config), _draw_attention,
                 helpers=(("config", config_template), ("rotary", f"{rotary}({{config}})")),
                 call=call if layer else call + "[0]", extras=_position_ids,
                 args=("hidden_size", "num_attention_heads"), attr="layer" if layer else "attn",
                 family="llama_decoder_layer" if layer else "rotary_attention")


def _encoder_attention(name: str, model_type: str, config: str, phrase: str, config_args: str,
                       construct: str = "{name}({config_template})", output_index: bool = True,
                       family: str = "multihead_attention") -> OpSpec:
    config_template = f"{config}({config_args})"
    module = construct.format(name=name, config_template=config_template)
    return _task(name, phrase, module, _imports(model_type, name, config=config), _draw_attention,
                 call="{self}({x})[0]" if output_index else "{self}({x})",
                 args=("hidden_size", "num_attention_heads"), attr="attn", family=family)


_BERT_CONFIG = ("hidden_size={hidden_size}, num_attention_heads={num_attention_heads}, "
                "intermediate_size={intermediate_size}, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, "
                "attn_implementation={attn}")
_VISION_CONFIG = ("hidden_size={hidden_size}, num_attention_heads={num_attention_heads}, "
                  "intermediate_size={intermediate_size}, attention_dropout=0.0, attn_implementation={attn}")

ROTARY = [
    _task("LlamaRotaryEmbedding", "computes Llama's rotary position embedding (cos and sin, concatenated)",
          "LlamaRotaryEmbedding(LlamaConfig(hidden_size={hidden_size}, num_attention_heads={num_attention_heads}, "
          "rope_parameters={{'rope_type': 'default', 'rope_theta': {rope_theta}}}))",
          _imports("llama", "LlamaRotaryEmbedding", config="LlamaConfig"), _draw_rotary,
          call="torch.cat({self}({x}, {position_ids}), dim=-1)", extras=_position_ids, out_shape=_rotary_shape,
          make_input=_rotary_input, args=("hidden_size", "num_attention_heads"), attr="rotary",
          family="rotary_embedding"),
]

ATTENTION = [
    _rotary_attention("LlamaAttention", "llama", "LlamaConfig", "LlamaRotaryEmbedding",
                      "applies Llama's grouped-query self-attention with rotary embeddings"),
    _rotary_attention("MistralAttention", "mistral", "MistralConfig", "MistralRotaryEmbedding",
                      "applies Mistral's grouped-query self-attention with rotary embeddings"),
    _rotary_attention("Qwen2Attention", "qwen2", "Qwen2Config", "Qwen2RotaryEmbedding",
                      "applies Qwen2's grouped-query self-attention with rotary embeddings", head_dim=False),
    _rotary_attention("Qwen3Attention", "qwen3", "Qwen3Config", "Qwen3RotaryEmbedding",
                      "applies Qwen3's self-attention with query/key RMS norms and rotary embeddings"),
    _rotary_attention("GemmaAttention", "gemma", "GemmaConfig", "GemmaRotaryEmbedding",
                      "applies Gemma's self-attention with rotary embeddings"),
    _rotary_attention("LlamaDecoderLayer", "llama", "LlamaConfig", "LlamaRotaryEmbedding",
                      "applies a full Llama decoder layer (RMS norms, attention, gated MLP, residuals)", layer=True),
    _encoder_attention("GPT2Attention", "gpt2", "GPT2Config", "applies GPT-2's causal self-attention",
                       "n_embd={hidden_size}, n_head={num_attention_heads}, attn_pdrop=0.0, resid_pdrop=0.0, "
                       "attn_implementation={attn}", construct="{name}({config_template}, layer_idx=0)",
                       family="causal_self_attention"),
    _encoder_attention("BertSelfAttention", "bert", "BertConfig", "applies BERT's multi-head self-attention",
                       _BERT_CONFIG),
    _encoder_attention("BertAttention", "bert", "BertConfig",
                       "applies BERT's self-attention with output projection, residual and layer norm", _BERT_CONFIG,
                       family="bert_attention"),
    _encoder_attention("BertLayer", "bert", "BertConfig", "applies a full BERT encoder layer", _BERT_CONFIG,
                       output_index=False, family="transformer_encoder_layer"),
    _encoder_attention("ViTAttention", "vit", "ViTConfig", "applies ViT's multi-head self-attention",
                       "hidden_size={hidden_size}, num_attention_heads={num_attention_heads}, "
                       "intermediate_size={intermediate_size}, attention_probs_dropout_prob=0.0, "
                       "attn_implementation={attn}"),
    _encoder_attention("ViTLayer", "vit", "ViTConfig", "applies a full ViT encoder layer",
                       "hidden_size={hidden_size}, num_attention_heads={num_attention_heads}, "
                       "intermediate_size={intermediate_size}, hidden_dropout_prob=0.0, "
                       "attention_probs_dropout_prob=0.0, attn_implementation={attn}", output_index=False,
                       family="transformer_encoder_layer"),
    _encoder_attention("CLIPAttention", "clip", "CLIPVisionConfig", "applies CLIP's multi-head self-attention",
                       _VISION_CONFIG),
    _encoder_attention("SiglipAttention", "siglip", "SiglipVisionConfig",
                       "applies SigLIP's multi-head self-attention", _VISION_CONFIG),
    _encoder_attention("T5Attention", "t5", "T5Config",
                       "applies T5's self-attention with a learned relative position bias",
                       "d_model={hidden_size}, d_kv={hidden_size} // {num_attention_heads}, num_heads={num_attention_heads}, dropout_rate=0.0, "
                       "attn_implementation={attn}",
                       construct="{name}({config_template}, has_relative_attention_bias=True)",
                       family="t5_attention"),
]

SPECS: list[OpSpec] = [*ACTIVATIONS, *NORMS, *MLPS, *ROTARY, *ATTENTION]
