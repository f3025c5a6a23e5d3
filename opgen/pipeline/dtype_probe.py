"""The precision probe: which operators have kernels in bf16 and fp16 on this device.

Each operator alone (a chain of one, or its own transformers task) is sampled a few times at smoke sizes,
rendered in the precision, and run once in a sandboxed worker on the device. An operator none of whose tasks
runs, with errors that name the precision, has no kernel in it; an operator that fails for another reason (a
shape its smoke draw cannot take) is not judged by the probe."""

from __future__ import annotations

import datetime
import re

from opgen.sample.render import render
from opgen.sample.sampler import sample_graph
from opgen.sandbox.gpus import gpu_slot_envs
from opgen.sandbox.pool import SandboxPool
from opgen.vocab import Vocabulary

PROBE_TASKS = 3
# Messages of a kernel missing in a precision ("addmm_impl_cpu_" not implemented for 'Half', "Unsupported dtype
# BFloat16", expected scalar type Float but found BFloat16, ...).
PRECISION_ERROR = re.compile(r"BFloat16|Half|bfloat16|float16|dtype|scalar type", re.IGNORECASE)


def probe_task(payload: dict) -> dict:
    """In a sandbox worker: build the task's model and run one forward pass on the device."""
    import torch

    from opgen.sandbox.task import build_model, draw_inputs, load_namespace, run_forward, synchronize

    namespace = load_namespace(payload["code"], payload["id"])
    model = build_model(namespace, payload["device"], 0)
    outputs = run_forward(model, draw_inputs(namespace, payload["device"], 1))
    synchronize(payload["device"])
    return {"dtypes": sorted({str(t.dtype) for t in outputs if isinstance(t, torch.Tensor)})}


def probe_codes(vocab: Vocabulary, names: list[str], dtype: str, seed: int = 0) -> list[tuple[str, str]]:
    """(operator, task source in `dtype`) for PROBE_TASKS tasks of each operator alone."""
    jobs = []
    for name in names:
        source = "transformers" if vocab[name].standalone else "torch#1"
        for index in range(PROBE_TASKS):
            graph = sample_graph(seed, index, "smoke", vocab, source=source, focus=[name])
            graph.graph["dtype"] = dtype
            jobs.append((name, render(graph, vocab)))
    return jobs


def probe_dtypes(vocab: Vocabulary, dtypes: list[str], device: str, names: list[str] | None = None,
                 workers: int = 2, timeout_s: float = 120.0, memory_mb: int | None = 4096,
                 progress: bool = False) -> dict:
    """The findings in the layout of dtype_support.json, for `names` (default: every operator)."""
    import torch

    names = names or [spec.name for spec in vocab]
    found: dict = {"probe": {"device": device, "torch": torch.__version__, "tasks_per_operator": PROBE_TASKS,
                             "date": datetime.date.today().isoformat(),
                             "hardware": torch.cuda.get_device_name(0) if device == "cuda" else "cpu"}}
    with SandboxPool(workers, timeout_s, memory_mb, slot_envs=gpu_slot_envs(device)) as pool:
        for dtype in dtypes:
            jobs = probe_codes(vocab, names, dtype)
            payloads = [{"code": code, "id": f"probe-{dtype}-{i}", "device": device} for i, (_, code) in enumerate(jobs)]
            results = pool.run_many("opgen.pipeline.dtype_probe:probe_task", payloads, progress=progress)
            outcomes: dict[str, list] = {}
            for (name, _), result in zip(jobs, results):
                outcomes.setdefault(name, []).append(result)
            unsupported, unjudged = {}, {}
            for name, results_of in outcomes.items():
                if any(r.status == "ok" for r in results_of):
                    continue
                details = [r.detail for r in results_of]
                if all(PRECISION_ERROR.search(d or "") for d in details):
                    unsupported[name] = details[0].strip().splitlines()[-1][:300]
                else:
                    unjudged[name] = next(d for d in details if not PRECISION_ERROR.search(d or ""))[:300]
            found[dtype] = {"operators": len(outcomes), "unsupported": dict(sorted(unsupported.items())),
                            "not_judged": dict(sorted(unjudged.items()))}
    return found
