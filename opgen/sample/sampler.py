"""Draws operator chains whose shapes fit, as networkx graphs, and turns them into candidate records.

Candidate `index` of a run depends only on `(seed, index)`, so any shard of a run can be sampled alone and
the same seed gives the same bytes in any process.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator

import networkx as nx

from opgen.records import task_id
from opgen.sample.analyze import AnalysisError, analyze_code, estimate_gpu_ms, log_uniform
from opgen.sample.render import op_nodes, render
from opgen.vocab import Vocabulary, cached_vocabulary
from opgen.vocab.builders import default_input, fits_numel
from opgen.vocab.families import families_of
from opgen.vocab.profiles import PROFILES
from opgen.vocab.spec import OpSpec, Shape, Sizes

# The CUDA-Agent-Ops-6K mix of data sources.
DEFAULT_MIX = {"torch#1": 0.0340, "torch#2": 0.8377, "torch#3": 0.0762, "torch#4": 0.0280, "torch#5": 0.0123,
               "transformers": 0.0118}
# The eager time the gpu profile aims for: log-uniform, centred (geometrically) inside the 1-100 ms window
# with room for the estimate's spread (measured/estimated has a log-sd of about 1 on an H200).
GPU_TARGET_MS = (3.0, 60.0)
GPU_MAX_TENSOR_BYTES = 3 << 29     # no tensor of a gpu task may exceed 1.5 GiB (validation runs several at once)
MAX_ATTEMPTS = 200
MAX_ANALYSIS_RETRIES = 5


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


def place_op(spec: OpSpec, shape: Shape, params: dict, sizes: Sizes) -> tuple[Shape, list[dict]] | None:
    """The output shape and extra inputs (as graph-node dicts) of `spec` with these parameters on an input of
    `shape`, or None when a tensor would exceed the profile's size limit."""
    out = tuple(spec.out_shape(shape, params))
    if not fits_numel(out, sizes):
        return None
    extras = [vars(e).copy() for e in spec.extras(shape, params)] if spec.extras else []
    for extra in extras:
        if not fits_numel(tuple(extra["shape"]), sizes):
            return None
        extra["shape"] = list(extra["shape"])
        extra["dim_names"] = list(extra["dim_names"])
    return out, extras


def _try_op(spec: OpSpec, rng: random.Random, shape: Shape, sizes: Sizes) -> tuple[dict, Shape, list] | None:
    params = spec.draw(rng, shape, sizes)
    if params is None:
        return None
    params = _normalise(params)
    placed = place_op(spec, shape, params, sizes)
    return None if placed is None else (params, *placed)


def _balanced_order(rng: random.Random, options: list[OpSpec], limit: int) -> list[OpSpec]:
    """Up to `limit` operators in random order, each drawn by first picking a category uniformly.

    Uniform over operators would make activations (the largest category) a quarter of all picks.
    """
    by_category: dict[str, list[OpSpec]] = {}
    for spec in options:
        by_category.setdefault(spec.category, []).append(spec)
    order: list[OpSpec] = []
    while by_category and len(order) < limit:
        category = rng.choice(sorted(by_category))
        group = by_category[category]
        order.append(group.pop(rng.randrange(len(group))))
        if not group:
            del by_category[category]
    return order


def chain_graph(rng: random.Random, length: int, vocab: Vocabulary, sizes: Sizes, standalone: bool) -> nx.DiGraph:
    pool = vocab.standalone_ops if standalone else vocab.chain_ops
    first_pool = [s for s in pool if not (s.last_only and length > 1)]
    followers = [s for s in pool if not s.first_only]
    for _ in range(MAX_ATTEMPTS):
        first = _balanced_order(rng, first_pool, 1)[0]
        shape, layout = _first_input(first, rng, sizes)
        graph = nx.DiGraph(batch_size=shape[0])
        graph.add_node("x", kind="input", shape=list(shape), layout=list(layout), dtype=first.input_dtype)
        spec, previous, ok = first, "x", True
        for position in range(length):
            if position > 0:
                last = position == length - 1
                options = [s for s in followers if len(shape) in s.ranks and s.name != spec.name
                           and not (s.last_only and not last) and s.input_dtype == "float"]
                spec = None
                for candidate in _balanced_order(rng, options, 12):
                    attempt = _try_op(candidate, rng, shape, sizes)
                    if attempt is not None:
                        spec, (params, out, extras) = candidate, attempt
                        break
                if spec is None:
                    ok = False
                    break
            else:
                attempt = _try_op(spec, rng, shape, sizes)
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
    raise SamplingError(f"no chain of {length} operators found in {MAX_ATTEMPTS} attempts")


def draw_class(rng: random.Random, mix: dict[str, float]) -> str:
    classes = sorted(mix)
    return rng.choices(classes, weights=[mix[c] for c in classes])[0]


def rescale_batch(graph: nx.DiGraph, batch: int) -> nx.DiGraph:
    """The same graph with the batch dimension (dim 0 of every tensor) set to `batch`."""
    old = graph.graph["batch_size"]
    scaled = graph.copy()
    scaled.graph["batch_size"] = batch
    for _, data in scaled.nodes(data=True):
        for key in ("shape", "in_shape", "out_shape"):
            if data.get(key):
                data[key] = [batch, *data[key][1:]] if data[key][0] == old else list(data[key])
        for extra in data.get("extras", []):
            if extra["shape"] and extra["shape"][0] == old:
                extra["shape"] = [batch, *extra["shape"][1:]]
    if scaled.nodes["x"]["shape"] and len(scaled.nodes["x"]["shape"]) == 1:
        scaled.nodes["x"]["shape"] = [batch]
    return scaled


def _fit_to_gpu_window(graph: nx.DiGraph, vocab: Vocabulary, rng: random.Random) -> tuple[nx.DiGraph, str, dict]:
    """Scale the batch so the estimated eager GPU time hits a log-uniform target inside the window."""
    target = log_uniform(rng, *GPU_TARGET_MS)
    code = render(graph, vocab)
    facts = analyze_code(code)
    for _ in range(3):
        estimate = estimate_gpu_ms(facts["flops"], facts["bytes_moved"], facts["kernels"])
        batch = graph.graph["batch_size"]
        per_batch_bytes = max(1, _largest_tensor_bytes(graph) // max(1, batch))
        wanted = nice_batch(batch * target / max(estimate, 1e-6))
        while wanted > 1 and wanted * per_batch_bytes > GPU_MAX_TENSOR_BYTES:
            smaller = nice_batch(wanted * 0.75)
            wanted = smaller if smaller < wanted else wanted // 2
        if wanted == batch:
            break
        graph = rescale_batch(graph, wanted)
        code = render(graph, vocab)
        facts = analyze_code(code)
    facts["estimated_gpu_ms"] = round(estimate_gpu_ms(facts["flops"], facts["bytes_moved"], facts["kernels"]), 4)
    return graph, code, facts


MAX_BATCH = 1 << 30
_NICE_BATCHES = sorted({m << k for k in range(31) for m in (1, 3)} - {3 << 30})


def nice_batch(value: float) -> int:
    """The closest batch size of the form 2^k or 3 * 2^k (at most 2^30), as a person would pick it."""
    if value <= 1:
        return 1
    value = min(value, MAX_BATCH)
    candidates = _NICE_BATCHES
    return min(candidates, key=lambda c: abs(math.log(c / value)))


def _largest_tensor_bytes(graph: nx.DiGraph) -> int:
    sizes = []
    for _, data in graph.nodes(data=True):
        for key in ("shape", "in_shape", "out_shape"):
            if data.get(key):
                sizes.append(_numel(data[key]))
        sizes.extend(_numel(e["shape"]) for e in data.get("extras", []))
    return 4 * max(sizes or [1])


def _numel(shape: list[int]) -> int:
    total = 1
    for dim in shape:
        total *= dim
    return total


def graph_json(graph: nx.DiGraph) -> str:
    return json.dumps(nx.node_link_data(graph, edges="edges"), sort_keys=True)


def graph_from_json(text: str) -> nx.DiGraph:
    return nx.node_link_graph(json.loads(text), edges="edges")


def sample_graph(seed: int, index: int, profile: str = "smoke", vocab: Vocabulary | None = None,
                 mix: dict[str, float] | None = None, source: str | None = None, retry: int = 0) -> nx.DiGraph:
    """The operator graph of candidate `index` (no rendering, no analysis; gpu sizes not yet fitted).

    `source` forces the data source (`torch#k` or `transformers`) instead of drawing it from `mix`;
    `retry` > 0 draws a replacement for a graph that could not be analysed.
    """
    vocab = vocab or cached_vocabulary()
    rng = random.Random(f"opgen:{seed}:{index}" + (f":{retry}" if retry else ""))
    drawn = draw_class(rng, mix or DEFAULT_MIX)
    source = source or drawn
    standalone = source == "transformers" and bool(vocab.standalone_ops)
    length = 1 if source == "transformers" else int(source.split("#")[1])
    graph = chain_graph(rng, length, vocab, PROFILES[profile], standalone)
    graph.graph.update(seed=seed, index=index, profile=profile, source=source, fit_seed=rng.random())
    return graph


def sample_one(seed: int, index: int, profile: str = "smoke", vocab: Vocabulary | None = None,
               mix: dict[str, float] | None = None, source: str | None = None) -> dict:
    """Candidate `index` of the run with this seed: a record with the SPEC.md columns known before execution."""
    vocab = vocab or cached_vocabulary()
    for retry in range(MAX_ANALYSIS_RETRIES):
        graph = sample_graph(seed, index, profile, vocab, mix, source, retry)
        try:
            return record_from_graph(graph, vocab)
        except AnalysisError as error:  # an operator pairing the counter cannot run: draw a replacement
            last_error = error
    raise SamplingError(f"candidate {index}: no analysable graph in {MAX_ANALYSIS_RETRIES} draws: {last_error}")


def record_from_graph(graph: nx.DiGraph, vocab: Vocabulary) -> dict:
    """Render the graph (fitting gpu sizes first) and count its shapes and work on the meta device."""
    if graph.graph["profile"] == "gpu":
        graph, code, facts = _fit_to_gpu_window(graph, vocab, random.Random(graph.graph["fit_seed"]))
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
                 mix: dict[str, float] | None = None, source: str | None = None) -> Iterator[dict]:
    for index in range(start, start + count):
        yield sample_one(seed, index, profile, vocab, mix, source)


def sample_records(seed: int, start: int, count: int, profile: str = "smoke", vocab: Vocabulary | None = None,
                   mix: dict[str, float] | None = None, source: str | None = None) -> list[dict]:
    """Candidates `start .. start+count-1` of the run with this seed (all of `source` when given)."""
    return list(iter_records(seed, start, count, profile, vocab, mix, source))
