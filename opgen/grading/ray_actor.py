"""What runs on a Ray cluster's nodes for the grader: the grading actor (one per GPU, or per share of a CPU-only
node), which grades batches exactly as a local batch is graded, in sandbox workers of its own that it keeps with its
reference timings; and the compile task, which builds solutions' extensions on a node's CPUs, holding no GPU.
Solution code runs only in the sandbox workers, never in these processes."""

from __future__ import annotations

import os
from dataclasses import replace

from opgen.grading.extensions import compile_stage, extension_settings
from opgen.grading.run import GradeOptions, require_healthy_device, run_grades
from opgen.sandbox.machine_sizing import size_for_machine


class GradingActor:
    """Grades batches on this actor's device: its own kept sandbox workers, its own reference timings."""

    def __init__(self, device: str):
        self.device = device

    def describe(self) -> dict:
        """Where the actor runs: its node, its process, its GPUs (as Ray assigned them), and where its node builds
        extensions (for the compile tasks sent to that node)."""
        import ray

        context = ray.get_runtime_context()
        return {"node_id": context.get_node_id(), "pid": os.getpid(),
                "gpus": [str(gpu) for gpu in context.get_accelerator_ids().get("GPU", [])],
                "extensions": extension_settings(GradeOptions(device=self.device))}

    def grade(self, payloads: list[dict], options: GradeOptions, threads: int) -> list[dict]:
        """The grade lines of `payloads` (in order), as run_grades gives them on this node."""
        options = self._on_this_node(options)
        extensions = extension_settings(options)
        for payload in payloads:   # what the driver could not know of this node
            payload.update(threads=threads, extensions=extensions)
        return run_grades(payloads, options)

    def check_device(self, options: GradeOptions, message: str | None) -> None:
        """MachineFault unless this actor's device passes a trivial computation (run.require_healthy_device)."""
        require_healthy_device(self._on_this_node(options), message)

    def _on_this_node(self, options: GradeOptions) -> GradeOptions:
        if options.memory_mb is not None:
            return options
        return replace(options, memory_mb=size_for_machine(options.device, 1, None, None, None).memory_mb)


def compile_on_node(payloads: list[dict], options: GradeOptions) -> tuple[dict[int, dict], dict[int, dict]]:
    """(failed, compiled): the grade lines of the payloads whose extensions failed to compile, and what the others'
    compile recorded (extensions.compile_stage, in this node's CPU sandbox workers), both by index."""
    failed = compile_stage(payloads, options)
    compiled = {index: payload["compiled"] for index, payload in enumerate(payloads) if "compiled" in payload}
    return failed, compiled
