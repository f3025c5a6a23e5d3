"""Draws operator chains whose shapes fit, as networkx graphs, and turns them into candidate records.

Candidate `index` of a run depends only on `(seed, index)`, so any shard of a run can be sampled alone and
the same seed gives the same bytes in any process.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator, Sequence

import networkx as nx

from opgen.records import task_id
from opgen.sample.analyze import AnalysisError, analyze_code
from opgen.sample.composition import UNIFORM, Composition, draw_order
from opgen.sample.fit import fit_to_gpu_window, rescale_batch
from opgen.sample.render import op_nodes, render
from opgen.taskcode.dtypes import DEFAULT_DTYPE
from opgen.vocab import Vocabulary, cached_vocabulary
from opgen.vocab.builders import default_input, place_op
from opgen.vocab.dtype_support import vocabulary_for
from opgen.vocab.families import families_of
from opgen.vocab.profiles import profile_sizes
from opgen.vocab.spec import OpSpec, Shape, Sizes

__all__ = ["Composition", "FocusSlot", "place_op", "rescale_batch", "sample_graph", "sample_one", "sample_records",
           "record_from_graph"]
DEFAULT_COMPOSITION = Composition()

# The CUDA-Agent-Ops-6K mix of data sources.
DEFAULT_MIX = {"torch#1": 0.0340, "torch#2": 0.8377, "torch#3": 0.0762, "torch#4": 0.0280, "torch#5": 0.0123,
               "transformers": 0.0118}
MAX_ATTEMPTS = 200
MAX_ANALYSIS_RETRIES = 5
# A gpu candidate whose fitted estimate stays outside this band is drawn again (up to MAX_ANALYSIS_RETRIES times):
# the window's floor (below it the estimate, unbiased but off by a factor of about 2, mostly means a rejection) and
# twice its ceiling.
GPU_ESTIMATE_MS = (1.0, 200.0)


class SamplingError(RuntimeError):
    """The vocabulary cannot produce a chain for this draw (e.g. a plugin op that never fits)."""


def _normalise(params: dict) -> dict:
    """Parameters as they look after a JSON round trip, so a graph renders the same before and after saving."""
    return json.loads(json.dumps(params))


def _first_input(spec: OpSpec, rng: random.Random, sizes: Sizes) -> tuple[Shape, tuple[str, ...]]:
    if spec.make_input is not None:
        return spec.make_input(rng, sizes)
    ranks = [r for r in spec.ranks if r > 1] or list(spec.ranks)
    return default_input(rng, sizes, rng.choice(ranks))


def _try_op(spec: OpSpec, rng: random.Random, shape: Shape, sizes: Sizes) -> tuple[dict, Shape, list] | None:
    params = spec.draw(rng, shape, sizes)
    if params is None:
        return None
    params = _normalise(params)
    placed = place_op(spec, shape, params, sizes)
    return None if placed is None else (params, *placed)


class FocusSlot:
    """The focused operator (`--focus`) a chain of `length` must hold: the positions it may take there, and why it
    did not fit when it did not (`misses`: `input` no chain gave it an input it accepts, `draw` its draw refused the
    input, `size` a tensor over the profile's limit, `error` its draw or out_shape raised), for the up-front check."""

    def __init__(self, spec: OpSpec, length: int, position: int | None = None):
        self.spec = spec
        if spec.input_dtype != "float" or spec.first_only:
            positions = [] if spec.last_only and length > 1 else [0]
        elif spec.last_only:
            positions = [length - 1]
        else:
            positions = list(range(length))
        self.positions = tuple(p for p in positions if position is None or p == position)
        self.misses: Counter = Counter()
        self.error: str | None = None

    def place(self, rng: random.Random, shape: Shape, sizes: Sizes) -> tuple[dict, Shape, list] | None:
        try:
            params = self.spec.draw(rng, shape, sizes)
            if params is None:
                self.misses["draw"] += 1
                return None
            params = _normalise(params)
            placed = place_op(self.spec, shape, params, sizes)
        except Exception as error:  # noqa: BLE001 - a plugin's draw or out_shape failing on an input it was offered
            self.misses["error"] += 1
            self.error = self.error or f"{type(error).__name__}: {error}"
            return None
        if placed is None:
            self.misses["size"] += 1
            return None
        return (params, *placed)


def chain_graph(rng: random.Random, length: int, vocab: Vocabulary, sizes: Sizes, standalone: bool,
                composition: Composition = UNIFORM, focus: FocusSlot | None = None,
                attempts: int = MAX_ATTEMPTS) -> nx.DiGraph:
    """A chain of `length` operators whose shapes fit; each next operator is tried in the composition's order
    (transformers blocks stand alone and are always drawn uniformly). With `focus`, each attempt first draws a
    position of the chain for the focused operator, which takes it; the other positions are drawn as usual."""
    pool = vocab.standalone_ops if standalone else vocab.chain_ops
    if standalone:
        composition = UNIFORM
    first_pool = [s for s in pool if not (s.last_only and length > 1)]
    followers = [s for s in pool if not s.first_only]
    for _ in range(attempts):
        slot = rng.choice(focus.positions) if focus is not None else None
        first = focus.spec if slot == 0 else draw_order(rng, first_pool, 1, None, composition)[0]
        shape, layout = _first_input(first, rng, sizes)
        graph = nx.DiGraph(batch_size=shape[0])
        graph.add_node("x", kind="input", shape=list(shape), layout=list(layout), dtype=first.input_dtype)
        spec, previous, ok = first, "x", True
        for position in range(length):
            if position > 0:
                last = position == length - 1
                options = [s for s in followers if len(shape) in s.ranks and s.name != spec.name
                           and not (s.last_only and not last) and s.input_dtype == "float"]
                if position == slot:
                    options = [s for s in options if s.name == focus.spec.name]
                    focus.misses["input"] += not options
                before, spec = spec.family, None
                for candidate in draw_order(rng, options, 12, before, composition):
                    attempt = (focus.place(rng, shape, sizes) if position == slot
                               else _try_op(candidate, rng, shape, sizes))
                    if attempt is not None:
                        spec, (params, out, extras) = candidate, attempt
                        break
                if spec is None:
                    ok = False
                    break
            else:
                attempt = focus.place(rng, shape, sizes) if slot == 0 else _try_op(spec, rng, shape, sizes)
                if attempt is None:
                    ok = False
                    break
                params, out, extras = attempt
                if spec.input_dtype == "long":
                    graph.nodes["x"]["high"] = params.get("num_embeddings", 2)
            node = f"op{position}"
            graph.add_node(node, kind="op", op=spec.name, params=params, in_shape=list(shape), out_shape=list(out),
                           extras=extras)
            graph.add_edge(previous, node)
            previous, shape = node, out
            if len(out) == 0 and position < length - 1:
                ok = False
                break
        if ok:
            return graph
    held = f" holding {focus.spec.name}" if focus is not None else ""
    raise SamplingError(f"no chain of {length} operators{held} found in {attempts} attempts")


def focused_graph(rng: random.Random, index: int, length: int, vocab: Vocabulary, sizes: Sizes, standalone: bool,
                  composition: Composition, focus: Sequence[str]) -> nx.DiGraph:
    """A chain holding one of the `focus` operators: candidate `index` tries them in turn from the
    (index mod k)-th, so a run draws each about equally often, at a position drawn uniformly among those it may
    take (so it is not pushed to the positions where it fits most easily); a position, or an operator, that does
    not fit this chain gives way to the next."""
    specs = [vocab[name] for name in focus if vocab[name].standalone == standalone]
    start = index % max(1, len(specs))
    for spec in specs[start:] + specs[:start]:
        positions = list(FocusSlot(spec, length).positions)
        if not positions:
            continue
        first = rng.choice(positions)
        for position in [first] + [p for p in positions if p != first]:
            try:
                return chain_graph(rng, length, vocab, sizes, standalone, composition,
                                   FocusSlot(spec, length, position))
            except SamplingError:
                continue
    raise SamplingError(f"no focused operator ({', '.join(focus)}) fits a chain of {length} in {MAX_ATTEMPTS} "
                        "attempts")


def draw_class(rng: random.Random, mix: dict[str, float]) -> str:
    classes = sorted(mix)
    return rng.choices(classes, weights=[mix[c] for c in classes])[0]


def graph_json(graph: nx.DiGraph) -> str:
    return json.dumps(nx.node_link_data(graph, edges="edges"), sort_keys=True)


def graph_from_json(text: str) -> nx.DiGraph:
    return nx.node_link_graph(json.loads(text), edges="edges")


def sample_graph(seed: int, index: int, profile: str = "smoke", vocab: Vocabulary | None = None,
                 mix: dict[str, float] | None = None, source: str | None = None, retry: int = 0,
                 composition: Composition = DEFAULT_COMPOSITION, focus: Sequence[str] | None = None,
                 dtype: str = DEFAULT_DTYPE) -> nx.DiGraph:
    """The operator graph of candidate `index` (no rendering, no analysis; gpu sizes not yet fitted).

    `source` forces the data source (`torch#k` or `transformers`) instead of drawing it from `mix`;
    `retry` > 0 draws a replacement for a graph that could not be analysed; `composition` orders each next
    operator (default: the mined prior mixed with category-uniform exploration); `focus` (operator names) puts
    one of them in the chain (`focused_graph`; the mix should hold only sources they can make: `focus.focused_mix`).
    """
    vocab = vocabulary_for(vocab or cached_vocabulary(), dtype)
    rng = random.Random(f"opgen:{seed}:{index}" + (f":{retry}" if retry else ""))
    drawn = draw_class(rng, mix or DEFAULT_MIX)
    source = source or drawn
    standalone = source == "transformers" and bool(vocab.standalone_ops)
    length = 1 if source == "transformers" else int(source.split("#")[1])
    sizes = profile_sizes(profile, composition.prior_path)
    if focus:
        graph = focused_graph(rng, index, length, vocab, sizes, standalone, composition, focus)
    else:
        graph = chain_graph(rng, length, vocab, sizes, standalone, composition)
    graph.graph.update(seed=seed, index=index, profile=profile, source=source, fit_seed=rng.random())
    if focus:
        graph.graph["focus"] = list(focus)
    if dtype != DEFAULT_DTYPE:   # an fp32 graph reads as it did before there were precisions
        graph.graph["dtype"] = dtype
    return graph


def sample_one(seed: int, index: int, profile: str = "smoke", vocab: Vocabulary | None = None,
               mix: dict[str, float] | None = None, source: str | None = None,
               composition: Composition = DEFAULT_COMPOSITION, focus: Sequence[str] | None = None,
               dtype: str = DEFAULT_DTYPE) -> dict:
    """Candidate `index` of the run with this seed: a record with the columns (docs/spec.md) known before execution."""
    vocab = vocab or cached_vocabulary()
    fallback = None
    for retry in range(MAX_ANALYSIS_RETRIES):
        graph = sample_graph(seed, index, profile, vocab, mix, source, retry, composition, focus, dtype)
        try:
            record = record_from_graph(graph, vocab, composition)
        except AnalysisError as error:  # an operator pairing the counter cannot run: draw a replacement
            last_error = error
            continue
        estimate = record.get("estimated_gpu_ms")
        if estimate is None or GPU_ESTIMATE_MS[0] <= estimate <= GPU_ESTIMATE_MS[1]:
            return record
        # realistic sizes cannot bring this chain near the window (a memory-bound op on 65,536 rows, a pool
        # whose output size is fixed): draw a replacement rather than spend validation on it
        fallback = fallback or record
    if fallback is not None:
        return fallback
    raise SamplingError(f"candidate {index}: no analysable graph in {MAX_ANALYSIS_RETRIES} draws: {last_error}")


def record_from_graph(graph: nx.DiGraph, vocab: Vocabulary, composition: Composition = DEFAULT_COMPOSITION) -> dict:
    """Render the graph (fitting gpu sizes first) and count its shapes and work on the meta device."""
    focus = graph.graph.get("focus")
    if graph.graph["profile"] == "gpu":
        sizes = profile_sizes("gpu", composition.prior_path)
        graph, code, facts = fit_to_gpu_window(graph, vocab, sizes, random.Random(graph.graph["fit_seed"]))
    else:
        code = render(graph, vocab)
        facts = analyze_code(code)
    record = {
        "id": task_id(code),
        "code": code,
        "ops": facts["ops"],
        "families": families_of(facts["ops"], vocab),
        "data_source": facts["data_source"],
        "num_ops": facts["num_ops"],
        "seed": graph.graph["seed"],
        **({"focus": list(focus)} if focus else {}),
        "sample_index": graph.graph["index"],
        "profile": graph.graph["profile"],
        "graph": graph_json(graph),
        "graph_ops": [graph.nodes[n]["op"] for n in op_nodes(graph)],
        "input_shapes": facts["input_shapes"],
        "output_shape": facts["output_shape"],
        "flops": facts["flops"],
        "bytes_moved": facts["bytes_moved"],
    }
    if "estimated_gpu_ms" in facts:
        record["estimated_gpu_ms"] = facts["estimated_gpu_ms"]
    return record


def iter_records(seed: int, start: int, count: int, profile: str = "smoke", vocab: Vocabulary | None = None,
                 mix: dict[str, float] | None = None, source: str | None = None,
                 composition: Composition = DEFAULT_COMPOSITION, focus: Sequence[str] | None = None,
                 dtype: str = DEFAULT_DTYPE) -> Iterator[dict]:
    for index in range(start, start + count):
        yield sample_one(seed, index, profile, vocab, mix, source, composition, focus, dtype)


def sample_records(seed: int, start: int, count: int, profile: str = "smoke", vocab: Vocabulary | None = None,
                   mix: dict[str, float] | None = None, source: str | None = None,
                   composition: Composition = DEFAULT_COMPOSITION, focus: Sequence[str] | None = None,
                   dtype: str = DEFAULT_DTYPE) -> list[dict]:
    """Candidates `start .. start+count-1` of the run with this seed (all of `source` when given; each holding one
    of the `focus` operators when given)."""
    return list(iter_records(seed, start, count, profile, vocab, mix, source, composition, focus, dtype))
