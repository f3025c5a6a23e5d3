"""Sizes a gpu-profile graph so its estimated eager time hits a target inside the runtime window, growing what a
real model would grow: the batch within realistic bounds for the kind of input, then the spatial size or the
sequence length. Never the batch alone past its bound."""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass

import networkx as nx

from opgen.sample.analyze import AnalysisError, analyze_code, estimate_gpu_ms, log_uniform
from opgen.sample.render import op_nodes, render
from opgen.taskcode.dtypes import DEFAULT_DTYPE, ELEMENT_BYTES
from opgen.vocab import Vocabulary
from opgen.vocab.builders import place_op
from opgen.vocab.spec import Sizes

# The eager time the gpu profile aims for: log-uniform, centred (geometrically) inside the 1-100 ms window
# with room for the estimate's spread (measured/estimated has a log-sd of about 1 on an H200).
GPU_TARGET_MS = (3.0, 60.0)
GPU_MAX_TENSOR_BYTES = 3 << 29     # no tensor of a gpu task may exceed 1.5 GiB (validation runs several at once)
MAX_BATCH = 1 << 30
_NICE_BATCHES = sorted({m << k for k in range(31) for m in (1, 3)} - {3 << 30})
CLOSE_ENOUGH = (0.7, 1.4)          # estimate / target band in which sizing stops
MAX_STEPS = 6


@dataclass(frozen=True)
class InputKind:
    """How a task's first input may grow: the batch up to `max_batch`, then the dims `grow` (named in the input's
    layout, scaled together) between `min_size` and `max_size`."""

    name: str
    max_batch: int
    grow: tuple[str, ...] = ()
    min_size: int = 1
    max_size: int = 1


# Bounds from what real models run (opgen/vocab/composition_prior.json): image batches of at most 256 and sides up
# to 512; video clips of at most 32; sequence batches of at most 64 with up to 16k tokens (signals up to 64k
# samples); row-wise tasks (batch x features) of at most 65,536 rows (tokens of a large training micro-batch).
KINDS = {
    "volume": InputKind("volume", 32, ("depth", "height", "width"), 4, 128),
    "image": InputKind("image", 256, ("height", "width"), 7, 512),
    "sequence": InputKind("sequence", 64, ("seq_len",), 16, 16384),
    "signal": InputKind("signal", 64, ("length",), 16, 65536),
    "rows": InputKind("rows", 65536),
    "flat": InputKind("flat", MAX_BATCH),
}


IMAGE_CATEGORIES = ("conv", "pooling")  # a chain with one of these runs on images: their batch bound holds


def input_kind(graph: nx.DiGraph, vocab: Vocabulary | None = None) -> InputKind:
    """The kind of the graph's first input, read from its layout names; with `vocab`, a chain that unflattens
    rows into a convolution's or pooling's input also keeps the image batch bound."""
    layout = graph.nodes["x"]["layout"]
    kind = KINDS["rows"] if len(layout) == 2 else KINDS["flat"]
    for name, dim in (("volume", "depth"), ("image", "height"), ("sequence", "seq_len"), ("signal", "length")):
        if dim in layout:
            kind = KINDS[name]
            break
    if vocab is not None and any(vocab[graph.nodes[n]["op"]].category in IMAGE_CATEGORIES for n in op_nodes(graph)):
        kind = dataclasses.replace(kind, max_batch=min(kind.max_batch, KINDS["image"].max_batch))
    return kind


def nice_batch(value: float) -> int:
    """The closest batch size of the form 2^k or 3 * 2^k (at most 2^30), as a person would pick it."""
    if value <= 1:
        return 1
    value = min(value, MAX_BATCH)
    return min(_NICE_BATCHES, key=lambda c: abs(math.log(c / value)))


def rescale_batch(graph: nx.DiGraph, batch: int) -> nx.DiGraph:
    """The same graph with the batch dimension (dim 0 of every tensor) set to `batch`."""
    old = graph.graph["batch_size"]
    scaled = graph.copy()
    scaled.graph["batch_size"] = batch
    for _, data in scaled.nodes(data=True):
        for key in ("shape", "in_shape", "out_shape"):
            if data.get(key):
                data[key] = [batch, *data[key][1:]] if data[key][0] == old else list(data[key])
        data["extras"] = [dict(e, shape=[batch, *e["shape"][1:]]) if e["shape"] and e["shape"][0] == old else e
                          for e in data.get("extras", [])]
    if scaled.nodes["x"]["shape"] and len(scaled.nodes["x"]["shape"]) == 1:
        scaled.nodes["x"]["shape"] = [batch]
    return scaled


def resize_input(graph: nx.DiGraph, vocab: Vocabulary, sizes: Sizes, dims: dict[str, int]) -> nx.DiGraph | None:
    """The graph with the first input's dims named in `dims` set to new sizes and every operator's shapes and
    extra inputs worked out again from its (unchanged) parameters; None when an operator no longer fits."""
    scaled = graph.copy()
    source = scaled.nodes["x"]
    shape = tuple(dims.get(name, size) for name, size in zip(source["layout"], source["shape"]))
    source["shape"] = list(shape)
    for node in op_nodes(scaled):
        data = scaled.nodes[node]
        try:
            placed = place_op(vocab[data["op"]], shape, data["params"], sizes)
        except Exception:  # noqa: BLE001 - a spec's shape function may reject sizes its draw never produced
            return None
        if placed is None or any(d < 1 for d in placed[0]):
            return None
        data["in_shape"], data["out_shape"], data["extras"] = list(shape), list(placed[0]), placed[1]
        shape = placed[0]
    return scaled


def element_bytes(graph: nx.DiGraph) -> int:
    """Bytes of one element in the graph's precision (4 in fp32, 2 in bf16 and fp16)."""
    return ELEMENT_BYTES[graph.graph.get("dtype", DEFAULT_DTYPE)]


def largest_tensor_bytes(graph: nx.DiGraph) -> int:
    sizes = []
    for _, data in graph.nodes(data=True):
        for key in ("shape", "in_shape", "out_shape"):
            if data.get(key):
                sizes.append(math.prod(data[key]))
        sizes.extend(math.prod(e["shape"]) for e in data.get("extras", []))
    return element_bytes(graph) * max(sizes or [1])


class _Sized:
    """A graph with its code and counted facts; `estimate` is the roofline eager time."""

    def __init__(self, graph: nx.DiGraph, vocab: Vocabulary, cpu_fallback: bool = True):
        self.graph, self.code = graph, render(graph, vocab)
        self.facts = analyze_code(self.code, cpu_fallback)
        self.estimate = estimate_gpu_ms(self.facts["flops"], self.facts["bytes_moved"], self.facts["kernels"],
                                        graph.graph.get("dtype", DEFAULT_DTYPE))

    @property
    def batch(self) -> int:
        return self.graph.graph["batch_size"]


def _batch_for(sized: _Sized, ratio: float, kind: InputKind) -> int:
    """The batch that moves the estimate by `ratio`, within the kind's bound and the tensor size cap."""
    per_batch = max(1, largest_tensor_bytes(sized.graph) // max(1, sized.batch))
    wanted = min(nice_batch(sized.batch * ratio), kind.max_batch, nice_batch(GPU_MAX_TENSOR_BYTES // per_batch))
    while wanted > 1 and wanted * per_batch > GPU_MAX_TENSOR_BYTES:
        wanted = wanted // 2
    return max(1, wanted)


def _grown(sized: _Sized, ratio: float, kind: InputKind, vocab: Vocabulary, sizes: Sizes) -> _Sized | None:
    """The graph with its growable dims scaled by the power of two nearest the `ratio` the work must change by
    (work grows with their product), or by a smaller one when that does not fit; None when no step changes the
    sizes, or an operator or the counter refuses them."""
    layout = sized.graph.nodes["x"]["layout"]
    current = {name: size for name, size in zip(layout, sized.graph.nodes["x"]["shape"]) if name in kind.grow}
    if not current:
        return None
    exponent = round(math.log2(ratio) / len(current)) if ratio > 0 else 0
    exponent = exponent or (1 if ratio > 1 else -1)
    capped = dataclasses.replace(sizes, max_numel=GPU_MAX_TENSOR_BYTES // element_bytes(sized.graph))
    for k in range(exponent, 0, -1) if exponent > 0 else range(exponent, 0):
        dims = {name: int(min(kind.max_size, max(kind.min_size, round(size * 2.0 ** k))))
                for name, size in current.items()}
        if dims == current:
            continue
        resized = resize_input(sized.graph, vocab, capped, dims)
        if resized is None or largest_tensor_bytes(resized) > GPU_MAX_TENSOR_BYTES:
            continue
        try:
            candidate = _Sized(resized, vocab, cpu_fallback=False)  # a task the meta device can't count stays put
        except AnalysisError:
            return None  # the operators' parameters are tied to these sizes: no other step fits either
        expected = tuple(resized.nodes[op_nodes(resized)[-1]]["out_shape"])
        return candidate if tuple(candidate.facts["output_shape"]) == expected else None
    return None


def fit_to_gpu_window(graph: nx.DiGraph, vocab: Vocabulary, sizes: Sizes,
                      rng: random.Random) -> tuple[nx.DiGraph, str, dict]:
    """Scale the graph toward a log-uniform target eager time in GPU_TARGET_MS: the batch first (within its
    kind's bound), then the growable dims, each step checked by counting the rendered task again."""
    target = log_uniform(rng, *GPU_TARGET_MS)
    kind = input_kind(graph, vocab)
    sized = _Sized(graph, vocab)
    for _ in range(MAX_STEPS):
        ratio = target / max(sized.estimate, 1e-6)
        if CLOSE_ENOUGH[0] <= ratio <= CLOSE_ENOUGH[1]:
            break
        batch = _batch_for(sized, ratio, kind)
        if batch != sized.batch:
            sized = _Sized(rescale_batch(sized.graph, batch), vocab)
            continue
        # the batch is at its bound (or at 1): the spatial size or sequence length takes the rest
        grown = _grown(sized, ratio, kind, vocab, sizes)
        if grown is None:
            break
        sized = grown
    facts = dict(sized.facts, estimated_gpu_ms=round(sized.estimate, 4))
    return sized.graph, sized.code, facts
