"""The import rule of docs/architecture.md: CLI → pipeline → (sample, filters, timing, publish) →
(sandbox, taskcode, kernels_ref, vocab) → records/errors; no import from a lower layer to a higher one, no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("opgen", "filters", "kernels_ref")
# unit -> layer; a module belongs to the longest unit that prefixes it
LAYERS = {
    "opgen.records": 0, "opgen.errors": 0, "opgen.jsonl": 0, "opgen.checkpoint": 0, "opgen.version": 0, "opgen.hub": 0,
    "opgen.interrupts": 0, "opgen.outcome": 0,
    "opgen.taskcode": 1, "opgen.vocab": 1,
    "opgen.sandbox": 2, "kernels_ref": 2, "opgen.ray_cluster": 2,
    "opgen.sample": 3, "opgen.mining": 3, "filters": 3, "opgen.timing": 3, "opgen.publish": 3,
    "opgen.pipeline": 4, "opgen.grading": 4, "opgen.grading.beside_solution": 4, "opgen.heldout": 4,
    "opgen.analysis": 4,
    "opgen.agent": 5, "opgen.commands": 5, "opgen.cli": 5, "opgen.__main__": 5, "opgen": 5,
}
NEVER = {"filters": ("opgen.pipeline", "opgen.timing", "opgen.commands", "opgen.cli"),
         "kernels_ref": ("opgen.pipeline", "opgen.timing", "opgen.commands", "opgen.cli", "filters"),
         "opgen.grading": ("opgen.commands", "opgen.cli", "opgen.agent"),
         "opgen.grading.beside_solution": ("opgen.grading", "opgen.commands", "opgen.cli", "opgen.agent")}
# What the grader's process takes from the code that runs beside a solution: the entry points' paths (the package's
# `*_FUNCTION` names) and the two pure helpers of the payload and the verdict line.
WORKER_SIDE = "opgen.grading.beside_solution"
WORKER_SIDE_DOORS = (f"{WORKER_SIDE}.configs", f"{WORKER_SIDE}.figures")


def unit_of(module: str) -> str | None:
    matches = [unit for unit in LAYERS if module == unit or module.startswith(unit + ".")]
    return max(matches, key=len) if matches else None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module this file imports, at top level or inside functions (`from a import b` counts a.b too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] in PACKAGES}


def edges() -> list[tuple[str, str, str, str]]:
    """(source module, imported module, source unit, target unit) for every cross-unit import."""
    out = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            source = module_name(path)
            for target in imports_of(path):
                source_unit, target_unit = unit_of(source), unit_of(target)
                if target_unit and source_unit != target_unit:
                    out.append((source, target, source_unit, target_unit))
    return out


def test_every_module_has_a_layer():
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            assert unit_of(module_name(path)) is not None, module_name(path)


def test_no_import_goes_up_a_layer():
    upward = [f"{s} imports {t}" for s, t, su, tu in edges() if LAYERS[tu] > LAYERS[su]]
    assert not upward, "\n".join(upward)


def test_filters_and_kernels_ref_stay_below_pipeline_timing_and_cli():
    bad = [f"{s} imports {t}" for s, t, su, tu in edges()
           if any(su == low and any(tu == high or tu.startswith(high + ".") for high in highs)
                  for low, highs in NEVER.items())]
    assert not bad, "\n".join(bad)


def test_the_grader_does_not_depend_on_the_command_layer():
    """opgen.grading (opgen.grade and opgen.reward included) runs without the CLI: what it shares with the commands
    (the device choice, the machine's sizing) lives below both, in opgen.sandbox."""
    assert unit_of("opgen.grading.api") == "opgen.grading" and LAYERS["opgen.grading"] < LAYERS["opgen.commands"]
    into_commands = [f"{s} imports {t}" for s, t, su, tu in edges()
                     if su == "opgen.grading" and tu in ("opgen.commands", "opgen.cli", "opgen.agent")]
    assert not into_commands, "\n".join(into_commands)


def test_the_worker_side_imports_nothing_of_the_graders_side():
    """Code that shares a process with the solution never imports the grader's own modules (run, api, rewards, ...):
    the arrows between the two sides point one way, from the grader to the worker's entry points."""
    assert unit_of(f"{WORKER_SIDE}.worker") == WORKER_SIDE and unit_of("opgen.grading.run") == "opgen.grading"
    back = [f"{s} imports {t}" for s, t, su, tu in edges() if su == WORKER_SIDE and tu == "opgen.grading"]
    assert not back, "\n".join(back)


def test_the_grader_reaches_the_worker_side_only_through_its_doors():
    def door(target: str) -> bool:
        parent, _, name = target.rpartition(".")
        return (target == WORKER_SIDE or (parent == WORKER_SIDE and name.endswith("_FUNCTION"))
                or target in WORKER_SIDE_DOORS or parent in WORKER_SIDE_DOORS)

    through_walls = [f"{s} imports {t}" for s, t, su, tu in edges()
                     if su == "opgen.grading" and tu == WORKER_SIDE and not door(t)]
    assert not through_walls, "\n".join(through_walls)


def test_units_form_no_cycle():
    graph = nx.DiGraph((su, tu) for _, _, su, tu in edges())
    assert nx.is_directed_acyclic_graph(graph), list(nx.simple_cycles(graph))


@pytest.mark.parametrize("source", ["def f():\n    from opgen.pipeline.build import Build\n"])
def test_the_rule_sees_imports_inside_functions(tmp_path, source):
    path = tmp_path / "probe.py"
    path.write_text(source)
    assert imports_of(path) == {"opgen.pipeline.build", "opgen.pipeline.build.Build"}
