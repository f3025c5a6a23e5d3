"""Focused sampling (`--focus`): which operators a focus names, the data sources they can make, an up-front check
that each of them fits some chain, and which of them a task holds."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from opgen.errors import UsageError
from opgen.sample.analyze import AnalysisError
from opgen.sample.composition import Composition
from opgen.sample.sampler import FocusSlot, SamplingError, chain_graph, record_from_graph
from opgen.vocab import BUILTIN_MODULES, Vocabulary
from opgen.vocab.profiles import profile_sizes

PLUGINS = "plugins"   # `--focus plugins`: every operator that the --vocab-plugin files add
# The up-front check gives each focused operator this many draws per data source, each of up to PROBE_ATTEMPTS
# chains (the sampler's own limit per candidate), before it calls the operator one that never fits.
PROBE_DRAWS = 4
PROBE_ATTEMPTS = 200


def plugin_operators(vocab: Vocabulary, plugins: Sequence[str | Path]) -> list[str]:
    """The operators that the plugin files `plugins` add to the vocabulary, in vocabulary order."""
    files = {Path(p).resolve() for p in plugins}
    return [spec.name for spec in vocab
            if spec.defined_in not in BUILTIN_MODULES and Path(spec.defined_in).resolve() in files]


def resolve_focus(names: Iterable[str], vocab: Vocabulary, plugins: Sequence[str | Path] = ()) -> tuple[str, ...]:
    """The operator names a focus names, in vocabulary order: each name is an operator (`torch.nansum`), a family
    (`relu`: all its spellings) or `plugins`; anything else is a UsageError naming it."""
    wanted: set[str] = set()
    for name in names:
        if name == PLUGINS:
            added = plugin_operators(vocab, plugins)
            if not added:
                raise UsageError("--focus plugins: no --vocab-plugin file adds an operator")
            wanted.update(added)
        elif name in vocab:
            wanted.add(name)
        else:
            family = [spec.name for spec in vocab if spec.family == name]
            if not family:
                raise UsageError(f"--focus: {name!r} is neither an operator nor a family of the vocabulary "
                                 "(`opgen vocab` lists both; `plugins` names every plugin operator)")
            wanted.update(family)
    if not wanted:
        raise UsageError("--focus needs at least one operator or family name")
    return tuple(spec.name for spec in vocab if spec.name in wanted)


def focused_mix(mix: dict[str, float], vocab: Vocabulary, focus: Sequence[str]) -> dict[str, float]:
    """The data sources of `mix` that the focused operators can make (a torch operator never appears in a
    standalone transformers task, nor a transformers block in a torch chain), with their weights."""
    standalone = {vocab[name].standalone for name in focus}
    kept = {source: weight for source, weight in mix.items() if (source == "transformers") in standalone}
    if not kept:
        raise UsageError(f"--focus: none of the data sources {', '.join(sorted(mix))} can hold {', '.join(focus)}")
    return kept


def _length(source: str) -> int:
    return 1 if source == "transformers" else int(source.split("#")[1])


def _never_fits(spec, profile: str, sizes, misses: Counter, error: str | None, draws: int) -> str:
    """One line naming the operator and why none of its placements fitted."""
    where = f"focused operator {spec.name!r} ({spec.defined_in}) never fits a chain at the {profile} profile " \
            f"({draws} draws of up to {PROBE_ATTEMPTS} chains each)"
    if misses["error"]:
        return f"{where}: its draw or out_shape raised {error}"
    if misses["size"] >= misses["draw"] and misses["size"]:
        return (f"{where}: its output or an extra input is over the profile's limit of {sizes.max_numel:,} elements "
                f"in all {misses['size']:,} placements tried")
    if misses["draw"]:
        return f"{where}: its draw refused all {misses['draw']:,} inputs it was offered (ranks {spec.ranks})"
    return f"{where}: no chain gave it an input it accepts (ranks {spec.ranks}, dtype {spec.input_dtype})"


def check_focus(focus: Sequence[str], vocab: Vocabulary, profile: str, composition: Composition,
                mix: dict[str, float]) -> None:
    """Raise a UsageError (one line naming it and the reason) for the first focused operator that fits no chain of
    the mix's sources at `profile`, or that the counter cannot run in any chain that holds it, instead of a
    sampler that gives up on it one candidate at a time."""
    sizes = profile_sizes(profile, composition.prior_path)
    for name in focus:
        spec = vocab[name]
        misses: Counter = Counter()
        error, graphs, draws = None, [], 0
        for source in sorted(mix):
            standalone = source == "transformers" and bool(vocab.standalone_ops)
            slot = FocusSlot(spec, _length(source))
            if spec.standalone != standalone or not slot.positions:
                continue
            for draw in range(PROBE_DRAWS):
                draws += 1
                rng = random.Random(f"opgen:focus-check:{name}:{source}:{draw}")
                try:
                    graph = chain_graph(rng, _length(source), vocab, sizes, standalone, composition, slot,
                                        attempts=PROBE_ATTEMPTS)
                except SamplingError:
                    continue
                graph.graph.update(seed=0, index=0, profile=profile, source=source, fit_seed=rng.random())
                graphs.append(graph)
                break
            misses.update(slot.misses)
            error = error or slot.error
        if not graphs:
            raise UsageError(_never_fits(spec, profile, sizes, misses, error, draws))
        failures = []
        for graph in graphs:
            try:
                record_from_graph(graph, vocab, composition)
                break
            except AnalysisError as failure:
                failures.append(str(failure).splitlines()[0] if str(failure) else type(failure).__name__)
        else:
            raise UsageError(f"focused operator {name!r} ({spec.defined_in}): no task that holds it can be counted "
                             f"on the meta device ({failures[0]})")


def graph_operators(record: dict) -> list[str]:
    """The sampled operators of a record: `graph_ops` of a candidate, else the nodes of its `graph` column."""
    if record.get("graph_ops") is not None:
        return list(record["graph_ops"])
    graph = record.get("graph")
    if not graph:
        return list(record.get("ops") or [])
    data = json.loads(graph) if isinstance(graph, str) else graph
    return [node["op"] for node in data.get("nodes", []) if node.get("kind") == "op"]


def focus_hits(record: dict, focus: Iterable[str]) -> list[str]:
    """The focused operators that the record holds (by its sampled graph, and by its code's `ops`)."""
    held = set(graph_operators(record)) | set(record.get("ops") or [])
    return [name for name in focus if name in held]


def focus_counts(records: Iterable[dict], focus: Sequence[str]) -> dict[str, int]:
    """How many of `records` hold each focused operator."""
    counts: Counter = Counter()
    for record in records:
        counts.update(focus_hits(record, focus))
    return {name: counts[name] for name in focus}
