"""The reason codes of a grade: `ok`, or what failed, each with its meaning (docs/grading.md explains them)."""

from __future__ import annotations

OK = "ok"
REASONS = {
    OK: "correct on every input draw and configuration, before and after timing",
    "parse_error": "the solution's source does not parse (or a completion holds no code block)",
    "unsafe_code": "the solution imports or calls what the sandbox forbids (files, processes, interpreter internals)",
    "tampering": "the solution changes the grader's world: patches a function or class of torch, time or the "
                 "grader, registers global hooks, leaves a torch function mode active, overrides an aten operator",
    "invalid_solution": "no ModelNew, or ModelNew(*get_init_inputs()) is not an nn.Module",
    "compile_error": "the solution's C++/CUDA extension failed to compile (or passed the compile time limit) on a CPU "
                     "worker",
    "torch_operator": "under the kernels-only rule: the solution's forward ran PyTorch compute operators (or "
                      "torch.compile's code, or numpy) instead of its own kernels",
    "exec_error": "building or calling ModelNew raised",
    "timeout": "the solution ran past the time limit",
    "crash": "the worker running the solution died (segfault, abort, os._exit)",
    "out_of_memory": "the solution ran out of memory, alone in a fresh worker",
    "output_format": "the outputs differ from the reference's in number, structure, tensor type, shape, dtype or device",
    "output_aliases_input": "an output shares storage with an input (the input returned, or a view of it)",
    "input_modified": "the solution wrote into its inputs (the reference does not)",
    "unsynchronized": "an output changed after the call returned: work left running on another stream",
    "non_finite": "NaN or infinity where the reference is finite",
    "mismatch": "values differ from the reference's beyond the tolerance",
    "mismatch_after_timing": "correct while checked, but wrong on the timed calls or on the fresh draw after them",
    "reference_error": "the task itself fails (bad input, not a verdict on the solution)",
}
