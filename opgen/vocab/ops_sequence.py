"""Sequence operators: attention (MHA, SDPA, transformer layers) and recurrent layers and cells."""

from __future__ import annotations

import random

from opgen.vocab.builders import sequence_input
from opgen.vocab.spec import OpSpec, Params, Shape, Sizes


def _draw_heads(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    heads = [h for h in sizes.heads if shape[-1] % h == 0]
    if not heads:
        return None
    return {"embed_dim": shape[-1], "num_heads": rng.choice(heads)}


def _draw_transformer(rng: random.Random, shape: Shape, sizes: Sizes) -> Params | None:
    params = _draw_heads(rng, shape, sizes)
    if params is None:
        return None
    return {"d_model": params["embed_dim"], "nhead": params["num_heads"],
            "dim_feedforward": shape[-1] * rng.choice((2, 4)), "activation": rng.choice(("relu", "gelu")),
            "norm_first": rng.random() < 0.5}


def _draw_sdpa(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {"is_causal": rng.random() < 0.4}


def _draw_rnn(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {"input_size": shape[2], "hidden_size": sizes.pick(rng, "features"), "num_layers": rng.choice((1, 1, 2)),
            "bidirectional": rng.random() < 0.3}


def _rnn_out(shape: Shape, p: Params) -> Shape:
    return (shape[0], shape[1], p["hidden_size"] * (2 if p["bidirectional"] else 1))


def _rnn(name: str, phrase: str, attr: str, extra: str = "") -> OpSpec:
    return OpSpec(name=f"nn.{name}", category="recurrent", phrase=phrase, ranks=(3,), draw=_draw_rnn,
                  out_shape=_rnn_out, make_input=sequence_input, attr=attr,
                  module=f"nn.{name}({{input_size}}, {{hidden_size}}, num_layers={{num_layers}}, batch_first=True, "
                         f"bidirectional={{bidirectional}}{extra})",
                  call="{self}({x})[0]", args=("input_size", "hidden_size"))


def _draw_cell(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {"input_size": shape[1], "hidden_size": sizes.pick(rng, "features")}


def _cell(name: str, phrase: str, attr: str, call: str = "{self}({x})") -> OpSpec:
    return OpSpec(name=f"nn.{name}", category="recurrent", phrase=phrase, ranks=(2,), draw=_draw_cell,
                  out_shape=lambda s, p: (s[0], p["hidden_size"]), attr=attr,
                  module=f"nn.{name}({{input_size}}, {{hidden_size}})", call=call, args=("input_size", "hidden_size"))


ATTENTION: list[OpSpec] = [
    OpSpec(name="nn.MultiheadAttention", category="attention", phrase="applies multi-head self-attention",
           ranks=(3,), draw=_draw_heads, make_input=sequence_input, attr="attn",
           module="nn.MultiheadAttention({embed_dim}, {num_heads}, dropout=0.0, batch_first=True)",
           call="{self}({x}, {x}, {x}, need_weights=False)[0]", args=("embed_dim", "num_heads")),
    OpSpec(name="F.scaled_dot_product_attention", category="attention",
           phrase="applies scaled dot-product attention", ranks=(3, 4),
           draw=_draw_sdpa, make_input=sequence_input,
           call="F.scaled_dot_product_attention({x}, {x}, {x}, is_causal={is_causal})"),
    OpSpec(name="nn.TransformerEncoderLayer", category="attention", phrase="applies a transformer encoder layer",
           ranks=(3,), draw=_draw_transformer, make_input=sequence_input, attr="encoder_layer",
           module="nn.TransformerEncoderLayer({d_model}, {nhead}, dim_feedforward={dim_feedforward}, dropout=0.0, "
                  "activation={activation}, batch_first=True, norm_first={norm_first})",
           args=("d_model", "nhead")),
    OpSpec(name="nn.TransformerDecoderLayer", category="attention",
           phrase="applies a transformer decoder layer attending to its own input", ranks=(3,),
           draw=_draw_transformer, make_input=sequence_input, attr="decoder_layer",
           module="nn.TransformerDecoderLayer({d_model}, {nhead}, dim_feedforward={dim_feedforward}, dropout=0.0, "
                  "activation={activation}, batch_first=True, norm_first={norm_first})",
           call="{self}({x}, {x})", args=("d_model", "nhead")),
]

RECURRENT: list[OpSpec] = [
    _rnn("RNN", "runs an Elman RNN over the sequence", "rnn", ", nonlinearity='tanh'"),
    _rnn("LSTM", "runs an LSTM over the sequence", "lstm"),
    _rnn("GRU", "runs a GRU over the sequence", "gru"),
    _cell("RNNCell", "applies one RNN cell step", "rnn_cell"),
    _cell("LSTMCell", "applies one LSTM cell step and keeps the hidden state", "lstm_cell", "{self}({x})[0]"),
    _cell("GRUCell", "applies one GRU cell step", "gru_cell"),
]

SPECS: list[OpSpec] = [*ATTENTION, *RECURRENT]
