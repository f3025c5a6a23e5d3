"""Record types and the one column registry: every column a record can carry, its type, its stage and its meaning."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TypedDict

import pyarrow as pa


def task_id(code: str) -> str:
    """Stable content id of a task: `ops-` + first 16 hex digits of sha256(code)."""
    return "ops-" + hashlib.sha256(code.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Column:
    """One column: its arrow type, the stage that fills it, whether it is published, and what it means."""

    name: str
    type: pa.DataType
    stage: str           # sample | dedup | execute | timing | heldout
    doc: str
    published: bool = True


_F, _S, _I = pa.float64(), pa.string(), pa.int64()

COLUMN_REGISTRY: tuple[Column, ...] = (
    Column("code", _S, "sample", "the task source (KernelBench format: Model, get_inputs, get_init_inputs)"),
    Column("ops", pa.list_(_S), "sample", "canonical operator names from the code's AST, in call order"),
    Column("families", pa.list_(_S), "sample", "canonical operator family of each entry of `ops` (synonyms share "
                                               "one: `torch.mm`, `torch.matmul`, `F.linear` -> `matmul`)"),
    Column("data_source", _S, "sample", "`torch#k` (k composed torch operators) or `transformers`"),
    Column("id", _S, "sample", "`ops-` + first 16 hex digits of sha256(code)"),
    Column("num_ops", _I, "sample", "len(ops)"),
    Column("seed", _I, "sample", "the sampler seed"),
    Column("graph", _S, "sample", "the sampled operator graph with its parameters (JSON, networkx node-link)"),
    Column("focus", pa.list_(_S), "sample", "the operators the build was focused on (`--focus`): the task holds at "
                                            "least one of them; null for a build without a focus"),
    Column("input_shapes", pa.list_(pa.list_(_I)), "sample", "shapes of get_inputs() tensors"),
    Column("output_shape", pa.list_(_I), "sample", "shape of the forward output"),
    Column("flops", _I, "sample", "floating-point operations per forward call (counted with torch.utils.flop_counter)"),
    Column("bytes_moved", _I, "sample", "bytes read and written per forward call"),
    Column("kb_nearest", _S, "dedup", "closest KernelBench problem"),
    Column("kb_similarity", _F, "dedup", "its normalised-token shingle similarity (candidates at or above "
                                         "the card's contamination threshold, or with an equal operator sequence, are rejected)"),
    *(Column(f"accept_{answer}_share", _F, "execute", f"share of output values, over every input draw, at which "
                                                        f"the consumer's check (atol = rtol = 1e-2) accepts {what}")
      for answer, what in (("zero", "all zeros"), ("constant", "one constant (another draw's median)"),
                           ("stale", "another input draw's output"))),
    Column("eager_ms_cuda", _F, "execute", "", published=False),   # the runtime check's rough eager median
    Column("gpu_peak_mb", _I, "execute", "", published=False),   # the checks' GPU memory peak: a timing retry's need
    Column("dtype", _S, "execute", "the precision the task runs in (`fp32`)"),
    Column("atol", _F, "execute", "absolute tolerance of the checks (compile against eager, the visibility and "
                                  "every-operator rules): the consumer's"),
    Column("rtol", _F, "execute", "relative tolerance of the same checks"),
    Column("eager_ms", _F, "timing", "median CUDA-event time of one eager forward call (ms)"),
    Column("compile_ms", _F, "timing", "the same under torch.compile (default mode)"),
    Column("eager_ms_iqr", _F, "timing", "interquartile range of the eager samples"),
    Column("compile_ms_iqr", _F, "timing", "interquartile range of the compiled samples"),
    Column("eager_device_us", _F, "timing", "profiler device time per call (5 warm-ups, 10 iterations), eager (µs)"),
    Column("compile_device_us", _F, "timing", "the same, compiled"),
    Column("compile_speedup", _F, "timing", "eager_ms / compile_ms"),
    Column("hardware", _S, "timing", "GPU the timings were taken on"),
    Column("torch_version", _S, "timing", "torch version of the timings"),
    Column("cuda_version", _S, "timing", "CUDA version torch was built with"),
    # timing provenance: enough to take the same timings again the same way
    *(Column(f"{kind}_ms_{stat}", _F, "timing", f"{what} of the {kind} samples (ms)")
      for kind in ("eager", "compile") for stat, what in (("mean", "mean"), ("std", "sample standard deviation"),
                                                          ("min", "minimum"), ("max", "maximum"))),
    Column("eager_ms_count", _I, "timing", "timed trials used for eager_ms (adaptive: until the median's 95% CI "
                                           "is within ±1%, or the cap)"),
    Column("compile_ms_count", _I, "timing", "the same for compile_ms"),
    Column("timing_warmups", _I, "timing", "warm-up calls before the trials"),
    Column("trial_mode", _S, "timing", "`adaptive` or `fixed` (exactly the cap, KernelBench's protocol)"),
    Column("timing_method", _S, "timing", "the timing method in words: CUDA events with an L2 flush, and the "
                                          "profiler's device time"),
    Column("precision", _S, "timing", "fp32 precision mode of the timings: `default` (PyTorch's defaults), "
                                      "`ieee` or `tf32`"),
    Column("matmul_precision", _S, "timing", "cuBLAS fp32 matmul precision during the timings: ieee or tf32"),
    Column("cudnn_conv_precision", _S, "timing", "cuDNN fp32 convolution precision: ieee or tf32"),
    Column("cudnn_rnn_precision", _S, "timing", "cuDNN fp32 RNN precision: ieee or tf32"),
    Column("driver_version", _S, "timing", "NVIDIA driver version"),
    Column("triton_version", _S, "timing", "triton version (torch.compile's GPU code generator)"),
    Column("compile_mode", _S, "timing", "torch.compile mode of compile_ms"),
    Column("held_out_sizes", _S, "heldout", "held-out input configurations (JSON list of {size constant: value}) "
                                            "besides the timed sizes, each validated as the task was; a grader "
                                            "checks a kernel at each: `opgen.taskcode.sizes.held_out_inputs(code, "
                                            "held_out_sizes, i)`, or exec the code, update its globals with "
                                            "configuration i and call get_inputs()"),
    Column("held_out_count", _I, "heldout", "how many held-out configurations the task holds"),
    Column("held_out_note", _S, "heldout", "why the task holds fewer held-out configurations than asked for "
                                           "(null when it holds them all)"),
    Column("timing_rechecked", _S, "timing", "why the task was timed a second time (its own evidence said the first "
                                             "timing was slowed: opgen/timing/guard.py), null when timed once; "
                                             "eager and compile each keep the faster of the two medians"),
    Column("timed_alone", pa.bool_(), "timing", "whether the task was timed again with nothing else running on the "
                                                "machine (the build's quiet pass for launch-bound tasks, whose time "
                                                "follows the host's load: opgen/pipeline/quiet_pass.py); eager and "
                                                "compile each keep the faster median"),
    Column("eager_ms_first", _F, "timing", "", published=False),   # the first eager median of a rechecked row
    Column("quiet_paused", _I, "timing", "", published=False),   # workers a recheck's quiet hold paused
    Column("memory_wait_s", _F, "timing", "", published=False),   # a retry's wait for free GPU memory
    # timing columns kept in the run folder (timed.jsonl) but not published
    Column("compile_s", _F, "timing", "", published=False),
    Column("tf32", pa.bool_(), "timing", "", published=False),
    Column("compile_cache_hit", pa.bool_(), "timing", "", published=False),
    Column("compute_dtype", _S, "timing", "", published=False),   # the floating dtype the peaks are read for
    *(Column(name, _I, "timing", "", published=False) for name in ("eager_retimes", "compile_retimes")),
    *(Column(name, _F, "timing", "", published=False) for name in (
        "eager_tflops", "eager_gbps", "compile_tflops", "compile_gbps", "peak_tflops", "peak_gbps")),
    *(Column(name, _S, "timing", "", published=False) for name in (
        "compute_capability", "timing_device", "timing_status", "timing_error")),
    *(Column(name, _F, "timing", "", published=False) for name in (
        "timing_wall_s", "setup_s", "warmup_s", "warmup_lock_wait_s", "lock_wait_s", "timed_s", "profile_read_s",
        "gpu_free_gb", "timing_cpu_s", "compile_lock_wait_s", "lock_gate_wait_s")),
)

DATASET_SCHEMA = pa.schema([(c.name, c.type) for c in COLUMN_REGISTRY if c.published])
COLUMNS = tuple(DATASET_SCHEMA.names)
TIMING_COLUMNS = tuple(c.name for c in COLUMN_REGISTRY if c.stage == "timing")   # what a timing worker returns
EXECUTE_COLUMNS = tuple(c.name for c in COLUMN_REGISTRY if c.stage == "execute")   # from the execute verdicts
PUBLISHED_TIMING_COLUMNS = tuple(name for name in TIMING_COLUMNS if name in COLUMNS)
COLUMN_DOCS = {c.name: c.doc for c in COLUMN_REGISTRY if c.published}
INTEGER_COLUMNS = tuple(c.name for c in COLUMN_REGISTRY if c.published and c.type == _I)


class Candidate(TypedDict, total=False):
    """A sampled candidate, as the sampler writes it and every stage reads it (plus the dataset columns)."""

    id: str
    code: str
    ops: list[str]
    families: list[str]
    data_source: str
    num_ops: int
    seed: int
    focus: list[str]    # only in a focused build's candidates
    sample_index: int   # the key stages join on: unique within a build, unlike `id`
    profile: str
    graph: str
    graph_ops: list[str]
    input_shapes: list[list[int]]
    output_shape: list[int] | list[list[int]]
    flops: int | None
    bytes_moved: int | None
    kb_nearest: str | None
    kb_similarity: float | None


class VerdictLine(TypedDict, total=False):
    """One verdict line (docs/spec.md): which record, kept or the reason, the stage that judged it, metrics, detail."""

    source: str
    id: str
    sample_index: int
    stage: str
    keep: bool
    reason: str | None
    detail: str


def dataset_row(record: dict) -> dict:
    """The published columns of a record (missing ones null; `graph` as a JSON string; ints as ints)."""
    row = {name: record.get(name) for name in COLUMNS}
    if row["graph"] is not None and not isinstance(row["graph"], str):
        row["graph"] = json.dumps(row["graph"], sort_keys=True)
    for name in INTEGER_COLUMNS:
        if row[name] is not None:
            row[name] = int(row[name])
    if row["output_shape"] is not None and not isinstance(row["output_shape"], list):
        row["output_shape"] = None
    return row


def dataset_table(records: list[dict]) -> pa.Table:
    """An arrow table of the dataset rows with DATASET_SCHEMA."""
    return pa.Table.from_pylist([dataset_row(r) for r in records], schema=DATASET_SCHEMA)
