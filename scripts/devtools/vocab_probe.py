"""Vocabulary probes: one-operator tasks per spec, and a subprocess runner that executes task code in eager.

`python -m scripts.devtools.vocab_probe` reads JSONL task records (`code`, optional `id`) on stdin and prints one JSON
line per task: whether it ran, its real output shape, whether the output is finite and repeatable.
"""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys
import warnings
from collections.abc import Iterable

import networkx as nx

from opgen.sample.analyze import analyze_code
from opgen.sample.render import op_nodes, render
from opgen.sample.sampler import chain_graph
from opgen.vocab import Vocabulary, cached_vocabulary
from opgen.vocab.profiles import profile_sizes


def single_op_graph(name: str, seed: int, rank: int | None = None, profile: str = "smoke",
                    vocab: Vocabulary | None = None) -> nx.DiGraph:
    """A one-operator chain of operator `name`, its input of the given rank (any of its ranks if None)."""
    vocab = vocab or cached_vocabulary()
    spec = vocab[name]
    if rank is not None:
        if rank not in spec.ranks:
            raise ValueError(f"operator {name!r} does not accept rank {rank} (ranks {spec.ranks})")
        spec = dataclasses.replace(spec, ranks=(rank,))
    only = Vocabulary([spec])
    graph = chain_graph(random.Random(f"probe:{name}:{seed}:{rank}"), 1, only, profile_sizes(profile), spec.standalone)
    graph.graph.update(seed=seed, index=0, profile=profile)
    return graph


def single_op_record(name: str, seed: int, rank: int | None = None, profile: str = "smoke",
                     vocab: Vocabulary | None = None) -> dict:
    """The rendered and meta-analysed one-operator task, with the spec's own idea of the output shape."""
    vocab = vocab or cached_vocabulary()
    graph = single_op_graph(name, seed, rank, profile, vocab)
    code = render(graph, vocab)
    facts = analyze_code(code)
    nodes = op_nodes(graph)
    return {
        "id": f"{name}:{seed}:{rank}",
        "op": name,
        "code": code,
        "ops": facts["ops"],
        "graph_ops": [graph.nodes[n]["op"] for n in nodes],
        "input_shapes": facts["input_shapes"],
        "output_shape": facts["output_shape"],
        "spec_output_shape": list(graph.nodes[nodes[-1]]["out_shape"]),
    }


def run_in_subprocess(tasks: Iterable[dict], timeout: float = 600.0) -> dict[str, dict]:
    """Execute task records in a fresh Python process; results keyed by task id."""
    lines = "".join(json.dumps({"id": t["id"], "code": t["code"]}) + "\n" for t in tasks)
    done = subprocess.run([sys.executable, "-m", "scripts.devtools.vocab_probe"], input=lines, capture_output=True, text=True,
                          timeout=timeout, check=False)
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0:
        raise RuntimeError(f"probe runner exited {done.returncode}: {done.stderr[-2000:]}")
    return {r["id"]: r for r in results}


def _shape_of(value) -> list[int]:
    import torch

    if isinstance(value, torch.Tensor):
        return list(value.shape)
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return list(value[0].shape)
    return []


def _run_one(code: str) -> dict:
    import torch

    namespace: dict = {"__name__": "opgen_probe_task"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(code, "<task>", "exec"), namespace)  # noqa: S102 - this process exists to run task code
        torch.manual_seed(0)
        model = namespace["Model"](*namespace["get_init_inputs"]()).eval()
        inputs = namespace["get_inputs"]()
        with torch.no_grad():
            first = model(*inputs)
            second = model(*inputs)
    out = first if isinstance(first, torch.Tensor) else first[0]
    again = second if isinstance(second, torch.Tensor) else second[0]
    floating = out.is_floating_point()
    return {
        "ok": True,
        "shape": _shape_of(first),
        "dtype": str(out.dtype),
        "finite": bool(torch.isfinite(out).all()) if floating else True,
        "repeatable": bool(torch.equal(out, again)),
        "warnings": sorted({str(w.message)[:200] for w in caught}),
    }


def main() -> int:
    import torch

    torch.set_num_threads(1)
    for line in sys.stdin:
        if not line.strip():
            continue
        task = json.loads(line)
        try:
            result = _run_one(task["code"])
        except Exception as error:  # report and carry on with the next task
            result = {"ok": False, "error": f"{type(error).__name__}: {error}"[:500]}
        print(json.dumps({"id": task.get("id"), **result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
