"""The SKILL.md of a work folder, written for its task: the goal, the files, the workflow and its commands, the rules,
the tolerance, every input size the solution is checked at, the baselines and where they were taken, the reward."""

from __future__ import annotations

from opgen.grading.beside_solution.kernels_only import GLUE_TEXT
from opgen.grading.milestones import BEATS_BASELINE

SKILL_TEMPLATE = """# Task {id}: make `ModelNew` faster than PyTorch, with kernels of your own

You are given a PyTorch model, `Model` in `task.py`. Write `ModelNew` in `model_new.py`: the same computation, as fast
as you can make it, with **your own kernels** (a C++/CUDA extension built with `torch.utils.cpp_extension`, or Triton
kernels). The goal is to beat both eager PyTorch and `torch.compile` by more than {margin:.0%}.

```python
{code}
```

## Files

| file | what it is |
|---|---|
| `task.py` | the reference: `Model`, `get_inputs()`, `get_init_inputs()`. Do not change it. |
| `model_new.py` | **your work**: `ModelNew`. It starts as the reference itself, which passes the checks but breaks the kernels-only rule. |
| `task.json` | what the commands check the solution against (tolerance, input sizes, baselines). Do not change it. |
| `compile.py`, `verify.py`, `profiling.py` | the commands below. Do not change them. |
| `build/` | your compiled extensions (made by the commands). |

## Workflow

1. Write your kernels and `ModelNew` in `model_new.py`.
2. `python compile.py`: compiles the C++/CUDA extensions `model_new.py` builds, on a CPU worker, and prints the
   compiler's errors if any. Triton kernels compile when first launched, so they need no step here.
3. `python verify.py`: checks `ModelNew` exactly as the final grade does. Fix what it names, until it prints PASS.
4. `python profiling.py`: times `ModelNew` against eager and `torch.compile`, gives your milestone reward, and shows
   where the time goes, kernel by kernel, for yours and for the reference.
5. Make it faster (fuse operators, tile through shared memory, coalesce and vectorise memory accesses, tune block
   sizes), and go back to 2. Each command runs your code in a sandboxed process with time and memory limits.

The commands take `--device cuda|cpu` (default: CUDA when a GPU is visible) and `--json` (the whole grade as JSON).
Exit status: 0 passed, 1 failed (the report says why and what to do next), 2 the command could not run (one line).

## Rules

- **Kernels only.** Inside `ModelNew`'s forward, no PyTorch compute operator may run: not `torch.*` functions, not
  `torch.nn.functional`, not tensor methods that compute (`x.exp()`, `x @ w`, `x.sum()`), not `torch.ops.aten`, not
  layers called inside the forward (`self.conv(x)`), not through a custom autograd function or a custom op. Only your
  own kernels run there, with glue around them: {glue}. The rule is enforced while your code runs: every
  operator dispatched, even from inside your C++ code (`at::matmul`, `torch::relu`), is seen. In C++/CUDA, write the
  computation yourself; cuBLAS and cuDNN calls made directly are your code, not PyTorch operators.
- Not allowed either: `torch.compile`, TorchScript, `torch.export`, CUDA graphs, numpy, `torch.profiler`, and looking
  for the rule's watch.
- `ModelNew(*get_init_inputs())` must take `Model`'s constructor arguments. Create the same parameters in the same
  order (for instance keep `nn.Linear`/`nn.Conv2d` modules to hold them, and read `.weight`/`.bias` in the forward)
  and they get the reference's weights.
- Imports: `torch`, `math`, `triton`, `torch.utils.cpp_extension`. No files, processes, or interpreter internals.
  Do not patch torch or anything outside your module.
- Return fresh tensors: never an input or a view of one, and never write into the inputs. Outputs must be ready when
  `forward` returns (launch on the current CUDA stream).

## How correctness is judged

On each input configuration below, {draws} fresh input draws (seeded apart from the published ones), your
`ModelNew` first on its own copy, then the reference; outputs must match in number, shape, dtype and device, and in
value: `|yours - reference| <= atol + rtol * |reference|` with **atol = {atol}, rtol = {rtol}**, no NaN or infinity
where the reference is finite. The output is checked again after timing, on the last timed call and on a fresh draw
written into the same tensors, so a result cached between calls fails.

## Input sizes checked

Every configuration is checked alike; the held-out ones are other sizes of the same task, so a kernel written for
the published sizes only (sizes in the code, block sizes that must divide them, no bounds checks) fails them.

| configuration | sizes | inputs (shape, dtype) | output |
|---|---|---|---|
{config_rows}

{held_out_note}

## Baselines

{baselines}

`profiling.py` times your solution, eager PyTorch and `torch.compile` (default mode) now, on this machine, one after
the other under one exclusive hold of the GPU: on CUDA with CUDA events, the L2 cache flushed before each trial, every
stream synchronised, each trial on fresh input values; the median of 10 to 100 trials.

## The reward

CUDA-Agent's milestone reward: **-1** incorrect (any failed check, the kernels-only rule included); **1** correct;
**2** correct and faster than eager by more than {margin:.0%} (your time below {beats:.0%} of eager's); **3**
correct and faster than both eager and `torch.compile` by more than {margin:.0%}. The speed-ups themselves are
reported beside it.

The final grade is `opgen grade --task task.py --solution model_new.py --kernels-only` (with a dataset:
`opgen grade --dataset DATASET --id {id} --solution model_new.py --kernels-only`), possibly with another `--seed`.
"""


def render_skill(task: dict, code: str, description: dict) -> str:
    """SKILL.md for a task (its row's fields), its source, and its description (opgen.grading.describe)."""
    return SKILL_TEMPLATE.format(
        id=task["id"], code=code.strip(), glue=GLUE_TEXT, draws=task.get("draws", 5), atol=description["atol"],
        rtol=description["rtol"], config_rows="\n".join(_config_row(c) for c in description["configs"]),
        held_out_note=_held_out_note(description), baselines=_baselines(task), margin=1 - BEATS_BASELINE,
        beats=BEATS_BASELINE)


def _config_row(config: dict) -> str:
    sizes = ", ".join(f"`{k}={v}`" for k, v in config["sizes"].items()) or "the task's own (`get_inputs()`)"
    inputs = "; ".join(_tensor(x) for x in config["inputs"])
    outputs = "; ".join(_tensor(x) for x in config["outputs"]) if config.get("outputs") else "(not known)"
    return f"| `{config['name']}` | {sizes} | {inputs} | {outputs} |"


def _tensor(described: dict) -> str:
    if "shape" in described:
        return f"`{tuple(described['shape'])}` {described['dtype']}"
    return f"`{described.get('value')}`"


def _held_out_note(description: dict) -> str:
    note = description.get("held_out_note")
    if len(description["configs"]) > 1:
        return f"Held-out sizes: {note}." if note else ""
    return f"Only the task's own sizes are checked: {note or 'this task holds no held-out sizes'}."


def _baselines(task: dict) -> str:
    if task.get("eager_ms") is None:
        return ("No baseline timings were recorded for this task: `profiling.py` times eager PyTorch and "
                "`torch.compile` on your machine.")
    compiled = f"{task['compile_ms']:.4g} ms" if task.get("compile_ms") is not None else "not recorded"
    return (f"Recorded with the dataset, on **{task.get('hardware') or 'an unnamed GPU'}**, at the published sizes: "
            f"eager **{task['eager_ms']:.4g} ms**, `torch.compile` **{compiled}** (median time of one forward call). "
            "Your speed-ups are measured against baselines timed now on your GPU, which may differ.")
