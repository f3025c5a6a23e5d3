"""The input configurations a solution is checked on: the task's own `get_inputs`, then each held-out configuration
its row holds (`held_out_sizes`: {size constant: value}, laid over the task's globals before `get_inputs` is
called; docs/heldout.md). A task without that column (a task file, an older dataset) has its configurations
derived in the worker where it can (`derive_sizes`); the grader checks every one the same way."""

from __future__ import annotations

from dataclasses import asdict, dataclass

PUBLISHED = "published"
# The grader's draws are seeded apart from the draws a build checked and published (seeds 1-3 for seed 0), so a
# solution cannot be fitted to those values: draw k of configuration c with seed s uses input_seed(GRADE_SEED_BASE +
# 1000 * c + s, k), the timed draw and the fresh draw after timing being k = draws and draws + 1.
GRADE_SEED_BASE = 1_000_000


@dataclass(frozen=True)
class InputConfig:
    """One input configuration of a task: its name, its index in the row's list (0: the task's own sizes), and the
    row's description of it (whatever the row stores; it travels to the worker as is)."""

    name: str
    index: int
    spec: dict | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def input_configs(row: dict | None) -> list[InputConfig]:
    """The configurations to check for a task (a dataset row, or None for a task file): the task's own sizes first,
    then the row's held-out ones."""
    from opgen.taskcode.sizes import parse_configs

    held_out = parse_configs((row or {}).get("held_out_sizes"))
    return [InputConfig(PUBLISHED, 0),
            *(InputConfig(f"held_out_{i}", i, sizes) for i, sizes in enumerate(held_out, start=1))]


def derive_sizes(row: dict | None) -> bool:
    """Whether the worker derives held-out configurations itself: the task carries no `held_out_sizes` at all (a
    row whose list is empty holds none on purpose: its stage found none that run)."""
    return (row or {}).get("held_out_sizes") is None


def config_from(payload: dict) -> InputConfig:
    return InputConfig(str(payload["name"]), int(payload["index"]), payload.get("spec"))


def draw_seed(config: InputConfig, seed: int, draw: int) -> int:
    """The torch seed of draw `draw` of `config` when grading with `seed`."""
    from opgen.sandbox.task import input_seed  # torch is imported in the worker, not by the parent

    return input_seed(GRADE_SEED_BASE + 1000 * config.index + seed, draw)


def draw_config(namespace: dict, config: InputConfig, device: str, seed: int, draw: int) -> list:
    """Input draw `draw` of `config`, on `device` (in the sandbox worker). The random generators are then seeded
    at random: a solution that reads `torch.initial_seed()` learns nothing of which draw it was given, nor of the
    draws to come (each follows from the grade's seed, or from the timed draws' random start, by a known rule)."""
    import secrets

    import torch

    from opgen.sandbox.task import draw_inputs

    timed = {name: namespace[name] for name in config.spec if name in namespace} if config.spec else {}
    namespace.update(config.spec or {})
    try:
        return draw_inputs(namespace, device, draw_seed(config, seed, draw))
    finally:
        namespace.update(timed)
        torch.manual_seed(secrets.randbits(63))
