"""Canonical operator families: the one mapping from an `ops` entry (the code's spelling) to its family."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from functools import lru_cache

from opgen.vocab import Vocabulary, cached_vocabulary
from opgen.vocab.spec import default_family

# Spellings the AST reader can meet (KernelBench code, hand-written tasks) that no spec is named after, keyed by
# their default family: the family they belong to.
ALIASES: dict[str, str] = {
    "lazy_linear": "matmul", "addbmm": "bmm",
    "clip": "clamp", "clamp_max": "clamp",
    "multiply": "mul", "subtract": "sub", "divide": "div", "true_divide": "div",
    "absolute": "abs", "negative": "neg", "arctan": "atan", "arctan2": "atan2",
    "concat": "cat", "concatenate": "cat", "swapaxes": "permute", "swapdims": "permute",
    "upsample_bilinear": "interpolate", "upsample_nearest": "interpolate",
    "frobenius_norm": "norm",
    # the rotary embedding an attention task builds beside its attention block
    **{f"{model}_rotary_embedding": "rotary_embedding" for model in ("mistral", "qwen2", "qwen3", "gemma")},
    "dropout1d": "dropout", "dropout2d": "dropout", "dropout3d": "dropout", "alpha_dropout": "dropout",
    "feature_alpha_dropout": "dropout",
}
# Families that are the identity at eval time: left out of a family signature.
NO_OP_FAMILIES = frozenset({"dropout", "identity"})


class FamilyTable:
    """Family lookup for one vocabulary: spec names first, then default-family keys, aliases, known families."""

    def __init__(self, vocab: Vocabulary):
        self.by_name = {spec.name: spec.family for spec in vocab}
        self.known = set(self.by_name.values())
        # Another spelling of a spec's operator (`torch.amax_`, `torch.nn.Softmax2d`) maps to that spec's family.
        self.by_key = {default_family(spec.name): spec.family for spec in vocab}

    def family(self, op_name: str) -> str:
        if op_name in self.by_name:
            return self.by_name[op_name]
        key = default_family(op_name)
        if key in self.known:
            return key
        return self.by_key.get(key) or ALIASES.get(key, key)


@lru_cache(maxsize=8)
def _table(vocab: Vocabulary) -> FamilyTable:
    return FamilyTable(vocab)


def family_of(op_name: str, vocab: Vocabulary | None = None) -> str:
    """The family of one `ops` entry (`F.relu`, `torch.mm`, `nn.Conv2d`, ...); an unknown name falls back to its
    default family (snake case of the last dotted part), so nothing is ever unmapped."""
    return _table(vocab or cached_vocabulary()).family(op_name)


def families_of(ops: Iterable[str], vocab: Vocabulary | None = None) -> list[str]:
    """The `families` column: the family of each entry of `ops`, in order."""
    table = _table(vocab or cached_vocabulary())
    return [table.family(op) for op in ops]


def family_signature(families: Iterable[str]) -> tuple[str, ...]:
    """The family chain two tasks are compared by: the families in order, eval-time no-ops left out."""
    return tuple(family for family in families if family not in NO_OP_FAMILIES)


def family_table_digest(vocab: Vocabulary | None = None) -> str:
    """sha256 of the name -> family table and the aliases (keys caches of family signatures)."""
    table = _table(vocab or cached_vocabulary())
    payload = json.dumps([sorted(table.by_name.items()), sorted(ALIASES.items()), sorted(NO_OP_FAMILIES)])
    return hashlib.sha256(payload.encode()).hexdigest()
