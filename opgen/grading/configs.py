"""The input configurations a solution is checked on: today the task's own `get_inputs`; a row that carries further
input sizes adds one configuration each, and the grader checks every one the same way."""

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
    """The configurations to check for a task (a dataset row, or None for a task file): the task's own sizes first.
    The single place to extend when rows carry held-out sizes."""
    return [InputConfig(PUBLISHED, 0)]


def config_from(payload: dict) -> InputConfig:
    return InputConfig(str(payload["name"]), int(payload["index"]), payload.get("spec"))


def draw_seed(config: InputConfig, seed: int, draw: int) -> int:
    """The torch seed of draw `draw` of `config` when grading with `seed`."""
    from opgen.sandbox.task import input_seed  # torch is imported in the worker, not by the parent

    return input_seed(GRADE_SEED_BASE + 1000 * config.index + seed, draw)


def draw_config(namespace: dict, config: InputConfig, device: str, seed: int, draw: int) -> list:
    """Input draw `draw` of `config`, on `device` (in the sandbox worker)."""
    from opgen.sandbox.task import draw_inputs

    if config.index != 0:
        raise ValueError(f"no input configuration {config.index} ({config.name}) in this version of opgen")
    return draw_inputs(namespace, device, draw_seed(config, seed, draw))
