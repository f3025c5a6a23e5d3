"""Samples each transformers class as a one-op task and runs it in eager, reporting one JSON line per class.

Run it as a subprocess (`python -m scripts.devtools.hf_probe [NAME ...]`): it executes the rendered tasks, so it
must never run inside a process that should stay clean of task code (tests, the pipeline driver).
"""

from __future__ import annotations

import argparse
import json
import sys

import networkx as nx
import torch

from opgen.sample.render import render
from opgen.sample.sampler import record_from_graph, sample_graph
from opgen.vocab import Vocabulary, cached_vocabulary
from opgen.vocab.spec import OpSpec


def transformers_specs(vocab: Vocabulary | None = None) -> list[OpSpec]:
    """The vocabulary's transformers classes, in vocabulary order."""
    vocab = vocab or cached_vocabulary()
    return [spec for spec in vocab if spec.name.startswith("transformers.")]


def probe_graph(spec: OpSpec, seed: int = 0, index: int = 0, profile: str = "smoke") -> nx.DiGraph:
    """The sampler's one-op graph for this class alone (no rendering, no analysis)."""
    return sample_graph(seed, index, profile, vocab=Vocabulary([spec]), source="transformers")


def probe_code(spec: OpSpec, seed: int = 0, index: int = 0, profile: str = "smoke") -> str:
    """The task source for this class alone at the profile's base sizes; nothing is executed."""
    return render(probe_graph(spec, seed, index, profile), Vocabulary([spec]))


def probe_record(spec: OpSpec, seed: int = 0, index: int = 0, profile: str = "smoke") -> dict:
    """The sampler's record for a task made of this class alone (render + meta-device analysis, which runs
    the task's constructor and forward on meta tensors in this process)."""
    return record_from_graph(probe_graph(spec, seed, index, profile), Vocabulary([spec]))


def uses_from_pretrained(code: str) -> bool:
    """Whether the task mentions `from_pretrained` at all (tasks must build every config in code)."""
    return "from_pretrained" in code


def _forward(namespace: dict, inputs: list) -> torch.Tensor:
    torch.manual_seed(0)
    model = namespace["Model"](*namespace["get_init_inputs"]()).eval()
    with torch.no_grad():
        return model(*inputs)


def run_eager(code: str) -> dict:
    """Build the task twice on the CPU and run it on two input draws: shape, finiteness, determinism, spread.

    Uninitialised memory is filled with NaN while this runs, so a parameter left to `torch.empty` (classes
    that rely on `PreTrainedModel._init_weights`) shows up as a non-finite output.
    """
    namespace: dict = {"__name__": "opgen_probe_task"}
    exec(compile(code, "<task>", "exec"), namespace)  # noqa: S102 - this process exists to run the task
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        torch.manual_seed(1)
        first_inputs = namespace["get_inputs"]()
        torch.manual_seed(2)
        second_inputs = namespace["get_inputs"]()
        out = _forward(namespace, first_inputs)
        again = _forward(namespace, first_inputs)
        other = _forward(namespace, second_inputs)
    finally:
        torch.use_deterministic_algorithms(False)
    if not isinstance(out, torch.Tensor):
        return {"ok": False, "error": f"forward returned {type(out).__name__}, not a tensor"}
    return {
        "ok": True,
        "eager_shape": list(out.shape),
        "finite": bool(torch.isfinite(out).all()),
        "deterministic": bool(torch.equal(out, again)),
        "input_dependent": not torch.allclose(out, other, atol=1e-4, rtol=1e-4),
        "std": float(out.float().std()) if out.numel() > 1 else 0.0,
    }


def probe(spec: OpSpec, seed: int = 0, index: int = 0, gpu_profile: bool = True) -> dict:
    """One report for a class: the sampled record's facts, the eager run's facts, and the gpu-profile analysis."""
    report: dict = {"name": spec.name}
    try:
        record = probe_record(spec, seed, index)
    except Exception as error:  # a class whose sampling or meta analysis fails is reported, not raised
        report.update(ok=False, stage="sample", error=f"{type(error).__name__}: {error}")
        return report
    report.update(ops=record["ops"], data_source=record["data_source"], output_shape=record["output_shape"],
                  input_shapes=record["input_shapes"], flops=record["flops"],
                  from_pretrained=uses_from_pretrained(record["code"]), code=record["code"])
    try:
        report.update(run_eager(record["code"]))
    except Exception as error:
        report.update(ok=False, stage="eager", error=f"{type(error).__name__}: {error}")
        return report
    if gpu_profile:
        try:
            gpu = probe_record(spec, seed, index, profile="gpu")
            report.update(gpu_input_shapes=gpu["input_shapes"], gpu_output_shape=gpu["output_shape"],
                          gpu_estimated_ms=gpu.get("estimated_gpu_ms"))
        except Exception as error:
            report.update(ok=False, stage="gpu_sample", error=f"{type(error).__name__}: {error}")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="canonical class names (default: every transformers class)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-gpu-profile", action="store_true", help="skip the gpu-profile analysis")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    specs = transformers_specs()
    if args.names:
        wanted = set(args.names)
        specs = [spec for spec in specs if spec.name in wanted]
        missing = wanted - {spec.name for spec in specs}
        if missing:
            print(f"unknown transformers classes: {', '.join(sorted(missing))}", file=sys.stderr)
            return 2
    for index, spec in enumerate(specs):  # a different index per class, so classes get different sizes
        report = probe(spec, args.seed, index, gpu_profile=not args.no_gpu_profile)
        print(json.dumps(report, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
