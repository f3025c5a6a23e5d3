"""Embedding lookups; they take integer token ids and so only start a chain."""

from __future__ import annotations

import random

from opgen.vocab.spec import OpSpec, Params, Shape, Sizes

TOKEN_LAYOUT = ("batch_size", "seq_len")


def token_input(rng: random.Random, sizes: Sizes) -> tuple[Shape, tuple[str, ...]]:
    """A (batch, seq_len) tensor of token ids."""
    return (sizes.pick(rng, "batch"), sizes.pick(rng, "length")), TOKEN_LAYOUT


def _draw_embedding(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {"num_embeddings": rng.choice((100, 1000, 5000)), "embedding_dim": sizes.pick(rng, "features")}


def _draw_bag(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {**_draw_embedding(rng, shape, sizes), "mode": rng.choice(("mean", "sum", "max"))}


def _embedding(name: str, phrase: str, **fields) -> OpSpec:
    return OpSpec(name=name, category="embedding", phrase=phrase, ranks=(2,), make_input=token_input,
                  input_dtype="long", first_only=True, args=("num_embeddings", "embedding_dim"), **fields)


SPECS: list[OpSpec] = [
    _embedding("nn.Embedding", "looks up token embeddings", draw=_draw_embedding,
               out_shape=lambda s, p: (*s, p["embedding_dim"]), attr="embedding",
               module="nn.Embedding({num_embeddings}, {embedding_dim})"),
    _embedding("nn.EmbeddingBag", "averages (or sums, or maxes) the embeddings of each row of tokens",
               draw=_draw_bag, out_shape=lambda s, p: (s[0], p["embedding_dim"]), attr="embedding_bag",
               module="nn.EmbeddingBag({num_embeddings}, {embedding_dim}, mode={mode})"),
    _embedding("F.embedding", "looks up token embeddings in a learned table", draw=_draw_embedding,
               out_shape=lambda s, p: (*s, p["embedding_dim"]), attr="table",
               module="nn.Parameter(torch.randn({num_embeddings}, {embedding_dim}))", call="F.embedding({x}, {self})"),
]
