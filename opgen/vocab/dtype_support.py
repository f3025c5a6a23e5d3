"""Which operators have kernels in each reduced precision, as a probe on a GPU found them (dtype_support.json).

The file is written by `opgen vocab --probe-dtypes` and shipped; a precision's vocabulary is the full one less the
operators the probe found without a kernel in it. Operators the probe never saw (a plugin's) stay in."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from opgen.taskcode.dtypes import DEFAULT_DTYPE
from opgen.vocab import Vocabulary

SUPPORT_PATH = Path(__file__).with_name("dtype_support.json")


def load_support(path: str | Path | None = None) -> dict:
    """The probe's findings: {"probe": {...where and how}, dtype: {"unsupported": {operator: error}}}; {} when
    no probe was shipped."""
    path = Path(path) if path else SUPPORT_PATH
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def unsupported_ops(dtype: str, support: dict | None = None) -> dict[str, str]:
    """Operator -> the error its kernels gave in `dtype`; empty for fp32 or an unprobed precision."""
    if dtype == DEFAULT_DTYPE:
        return {}
    support = load_support() if support is None else support
    return dict(support.get(dtype, {}).get("unsupported", {}))


@lru_cache(maxsize=16)
def vocabulary_for(vocab: Vocabulary, dtype: str) -> Vocabulary:
    """`vocab` less the operators without a kernel in `dtype` (the same object for fp32)."""
    dropped = unsupported_ops(dtype)
    return vocab.without(dropped) if dropped else vocab
