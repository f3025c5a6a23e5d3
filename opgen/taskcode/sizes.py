"""Held-out input sizes of a task: the module-level size constants that only `get_inputs` reads, other values for
them (configurations besides the timed one), the task's source at a configuration, and its inputs there.

A task in KernelBench format reads its sizes from module-level constants when `get_inputs()` is called, so a
configuration is a mapping {constant: value} laid over the module's namespace: any harness can use one without
opgen (exec the task, update its globals with the mapping, call `get_inputs()`; `inputs_at` does exactly that).
A size is free when changing it keeps the weights: no constant that `get_init_inputs` or the `Model` class reads,
directly or through other constants, is ever varied. Whether a configuration runs is decided later, by running
it (the held-out stage, opgen/heldout/).
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Iterator

from opgen.taskcode.syntax import parse

# The values each configuration scales the free sizes by, in the order they are tried: smaller than the timed
# sizes first (the memory and time a task may take are bounded by its timed configuration), larger only for sizes
# too small to shrink; made odd, so that a kernel assuming sizes divisible by its block (or equal to the timed
# ones) fails.
SCALES = (0.5, 0.75, 0.625, 0.375, 0.875, 0.25, 1.5)
_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
               ast.Pow: operator.pow}


class NoHeldOutSizes(ValueError):
    """The task has no size that can vary without changing its weights (the reason is the message)."""


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _names_read(node: ast.AST | None) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} if node is not None else set()


def _bindings(node: ast.stmt) -> list[tuple[str, ast.expr]] | None:
    """The (name, value expression) pairs a module-level statement binds: `n = 4`, `n: int = 4`, or `a, b = 4, 16`;
    None for any other statement."""
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return [(node.target.id, node.value)]
    if not isinstance(node, ast.Assign) or len(node.targets) != 1:
        return None
    target = node.targets[0]
    if isinstance(target, ast.Name):
        return [(target.id, node.value)]
    if (isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) and len(target.elts) == len(node.value.elts)
            and all(isinstance(element, ast.Name) for element in target.elts)):
        return [(element.id, value) for element, value in zip(target.elts, node.value.elts)]
    return None


def _assignments(tree: ast.Module) -> dict[str, list[ast.expr]]:
    """The value expressions module-level statements bind to each name, by name (a name bound twice is ambiguous
    and never varied)."""
    found: dict[str, list[ast.expr]] = {}
    for node in tree.body:
        for name, value in _bindings(node) or ():
            found.setdefault(name, []).append(value)
    return found


def _integer(node: ast.AST, known: dict[str, int]) -> int | None:
    """The value of an integer expression of literals and known constants (`2048 * 2`, `dim // heads`)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return known.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _integer(node.operand, known)
        return -value if value is not None else None
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _integer(node.left, known), _integer(node.right, known)
        if left is None or right is None or (isinstance(node.op, ast.FloorDiv) and right == 0):
            return None
        if isinstance(node.op, ast.Pow) and not 0 <= right <= 64:
            return None
        return _ARITHMETIC[type(node.op)](left, right)
    return None


def _closure(names: set[str], reads: dict[str, set[str]]) -> set[str]:
    """`names` and every module-level name their assignments read, transitively."""
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(reads.get(name, ()))
    return seen


def free_sizes(code: str) -> dict[str, int]:
    """The task's free sizes {constant: timed value}: positive integer constants assigned once at module level,
    read by `get_inputs` itself (so that updating the module's globals reaches it), and by no other module-level
    code (`get_init_inputs`, the `Model` class, helpers), directly or through the constants those read. Raises
    NoHeldOutSizes saying why there are none."""
    tree = parse(code)
    get_inputs = _function(tree, "get_inputs")
    if get_inputs is None:
        raise NoHeldOutSizes("no get_inputs function")
    assignments = _assignments(tree)
    reads = {name: set().union(*(_names_read(value) for value in values)) for name, values in assignments.items()}
    known: dict[str, int] = {}
    for node in tree.body:   # in source order, so a constant defined from earlier ones is known
        for name, value_node in _bindings(node) or ():
            value = _integer(value_node, known)
            if value is not None:
                known[name] = value
    fixed_readers: set[str] = set()   # what every other module-level statement reads: the weights' sizes
    for node in tree.body:
        if not (_bindings(node) is not None or node is get_inputs or isinstance(node, (ast.Import, ast.ImportFrom))):
            fixed_readers |= _names_read(node)
    fixed = _closure(fixed_readers, reads)
    read_by_inputs = _names_read(get_inputs)   # read when it is called: what a namespace update reaches
    free = {name: known[name] for name in sorted(read_by_inputs - fixed)
            if name in known and known[name] > 0 and len(assignments.get(name, ())) == 1}
    if not free:
        why = "every size get_inputs reads also sets the weights" if read_by_inputs & set(known) else \
            "get_inputs reads no module-level size constant"
        raise NoHeldOutSizes(why)
    return free


def held_out_value(value: int, scale: float, aligned: bool = False) -> int:
    """`value` scaled by `scale`, at least 1: made odd when above 2 (kept below `value` when possible), or, when
    `aligned` (a size the task needs divisible as the timed one is: heads, pixel-shuffle factors), a multiple of
    the largest power of two that divides `value` and is at most a quarter of it."""
    scaled = max(1, round(value * scale))
    if aligned:
        step = value & -value
        while step > 1 and step > value // 4:
            step //= 2
        return max(step, round(value * scale / step) * step)
    if scaled > 2 and scaled % 2 == 0:
        scaled = scaled - 1 if scaled + 1 >= value else scaled + 1
    return scaled


def scaled_configs(free: dict[str, int], scales: tuple[float, ...] = SCALES,
                   aligned: frozenset[str] = frozenset()) -> Iterator[dict[str, int]]:
    """Configurations of the free sizes, one per scale (the `aligned` names kept divisible as timed), each
    differing from the timed one and from the ones before it. Constants defined from a varied one follow it only
    in a rewritten task file (`sized_code`) or when the harness derives them; the derivation never varies a
    constant that another constant is computed from and the weights read."""
    seen = [dict(free)]
    for scale in scales:
        config = {name: held_out_value(value, scale, name in aligned) for name, value in free.items()}
        if config not in seen:
            seen.append(config)
            yield config


def sized_code(code: str, sizes: dict[str, int]) -> str:
    """The task's source with its size constants set to `sizes` (each constant's value expression replaced by
    the new integer): a standalone task file at that configuration, which any KernelBench-style harness runs."""
    tree = parse(code)
    assignments = _assignments(tree)
    lines = code.splitlines(keepends=True)
    edits = []
    for name, value in sizes.items():
        nodes = assignments.get(name)
        if not nodes or len(nodes) != 1:
            raise KeyError(f"{name} is not a size constant of this task")
        node = nodes[0]
        edits.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, str(int(value))))
    for start_line, start_col, end_line, end_col, text in sorted(edits, reverse=True):
        first, last = lines[start_line - 1], lines[end_line - 1]
        # ast offsets count UTF-8 bytes
        head = first.encode()[:start_col].decode()
        tail = last.encode()[end_col:].decode()
        lines[start_line - 1:end_line] = [head + text + tail]
    return "".join(lines)


def inputs_at(code: str, sizes: dict[str, int] | None = None, seed: int | None = None, device: str = "cpu") -> list:
    """The inputs of the task at configuration `sizes` (None: its timed sizes): the task executed, its module
    globals updated with `sizes`, then `get_inputs()` called (seeded with `seed` when given), tensors moved to
    `device`. Runs the task's code: call it only where that is safe (a sandbox)."""
    import torch

    namespace: dict = {"__name__": "opgen_task"}
    exec(compile(code, "<task>", "exec"), namespace)  # noqa: S102 - the caller's sandbox
    namespace.update(sizes or {})
    if seed is not None:
        torch.manual_seed(seed)
    inputs = namespace["get_inputs"]()
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def held_out_inputs(code: str, held_out_sizes: str | list | None, index: int, seed: int | None = None,
                    device: str = "cpu") -> list:
    """The inputs of held-out configuration `index` of a published row: `held_out_inputs(row["code"],
    row["held_out_sizes"], i)` for i in range(row["held_out_count"])."""
    configs = parse_configs(held_out_sizes)
    if not 0 <= index < len(configs):
        raise IndexError(f"the task holds {len(configs)} held-out configurations, not {index + 1}")
    return inputs_at(code, configs[index], seed, device)


def parse_configs(held_out_sizes: str | list | None) -> list[dict[str, int]]:
    """A row's `held_out_sizes` (its JSON text, or the list already parsed) as a list of configurations."""
    if not held_out_sizes:
        return []
    configs = json.loads(held_out_sizes) if isinstance(held_out_sizes, str) else held_out_sizes
    return [{str(k): int(v) for k, v in config.items()} for config in configs]
