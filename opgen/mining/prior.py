"""Mines the composition prior: operator families, data-flow pairs and size tables of the zoo's models, averaged
with every model weighing the same, as the JSON the sampler ships (`opgen/sample/composition_prior.json`)."""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable

from opgen.mining.trace import OpUse, trace_forward
from opgen.mining.zoo import ZooModel, library_versions
from opgen.vocab import Vocabulary
from opgen.vocab.families import FamilyTable

FORMAT = 1
SIZE_KINDS = ("channels", "features", "heads", "length", "spatial", "volume")
MAX_SIZES = 24          # values kept per size table (the most used)
MIN_SIZE_SHARE = 0.002  # and only values with at least this share
log = logging.getLogger("opgen.prior")


def model_summary(uses: list[OpUse]) -> dict:
    """One model's family counts, data-flow pair counts and size counts."""
    families = Counter(use.family for use in uses)
    pairs = Counter(f"{producer} -> {use.family}" for use in uses for producer in use.producers)
    sizes = {kind: Counter() for kind in SIZE_KINDS}
    for use in uses:
        for kind, values in use.sizes.items():
            sizes[kind].update(str(v) for v in values if v > 1)
    return {"ops": len(uses), "families": dict(families.most_common()), "pairs": dict(pairs.most_common()),
            "sizes": {kind: dict(counts.most_common()) for kind, counts in sizes.items() if counts}}


def _average(tables: Iterable[dict[str, int]]) -> dict[str, float]:
    """The mean over tables of each table's shares (a table's counts divided by its total)."""
    tables = [t for t in tables if t]
    total: defaultdict[str, float] = defaultdict(float)
    for table in tables:
        count = sum(table.values())
        for key, value in table.items():
            total[key] += value / count / len(tables)
    return dict(sorted(total.items(), key=lambda kv: (-kv[1], kv[0])))


def _rounded(table: dict[str, float], digits: int = 6) -> dict[str, float]:
    return {key: round(value, digits) for key, value in table.items() if round(value, digits) > 0}


def _size_shares(summaries: dict[str, dict], kind: str) -> dict[str, float]:
    """How often each value of a size kind is seen, per operator use of its model, averaged over models: a size a
    model shows once (a CNN's classifier width) weighs little against one every layer shows."""
    total: defaultdict[str, float] = defaultdict(float)
    for summary in summaries.values():
        for value, count in summary["sizes"].get(kind, {}).items():
            total[value] += count / summary["ops"] / len(summaries)
    norm = sum(total.values()) or 1.0
    return {k: v / norm for k, v in sorted(total.items(), key=lambda kv: (-kv[1], int(kv[0])))}


def aggregate(summaries: dict[str, dict]) -> dict:
    """The prior from per-model summaries: family shares, pair shares, next-family probabilities, size tables."""
    families = _average(s["families"] for s in summaries.values())
    pairs = _average(s["pairs"] for s in summaries.values())
    transitions: dict[str, dict[str, float]] = defaultdict(dict)
    for pair, share in pairs.items():
        first, second = pair.split(" -> ")
        transitions[first][second] = share
    transitions = {first: _rounded({k: v / sum(nxt.values()) for k, v in nxt.items()})
                   for first, nxt in sorted(transitions.items())}
    sizes = {}
    for kind in SIZE_KINDS:
        table = _size_shares(summaries, kind)
        kept = dict(list((k, v) for k, v in table.items() if v >= MIN_SIZE_SHARE)[:MAX_SIZES])
        if kept:
            norm = sum(kept.values())
            sizes[kind] = {k: round(v / norm, 6) for k, v in sorted(kept.items(), key=lambda kv: int(kv[0]))}
    return {"families": _rounded(families), "pairs": _rounded(pairs), "transitions": transitions, "sizes": sizes}


def mine(models: list[ZooModel], vocab: Vocabulary,
         on_model: Callable[[str, dict | None, str | None], None] | None = None) -> dict:
    """Trace every model and aggregate. A model that fails to build or run is reported through `on_model` and
    left out (its library may lack it in this version); the prior names the models it holds."""
    table = FamilyTable(vocab)
    summaries: dict[str, dict] = {}
    failed: dict[str, str] = {}
    for model in models:
        try:
            module, inputs = model.build()
            summary = {"library": model.library, "domain": model.domain,
                       **model_summary(trace_forward(module, inputs, vocab, table))}
        except Exception as error:  # noqa: BLE001 - one architecture that does not build must not stop the rest
            failed[model.name] = f"{type(error).__name__}: {error}"[:300]
            if on_model:
                on_model(model.name, None, failed[model.name])
            continue
        summaries[model.name] = summary
        if on_model:
            on_model(model.name, summary, None)
    prior = {"format": FORMAT, "libraries": library_versions(), "models": summaries, "failed": failed}
    prior.update(aggregate(summaries) if summaries else {"families": {}, "pairs": {}, "transitions": {}, "sizes": {}})
    return prior
