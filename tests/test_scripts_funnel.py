"""scripts/analysis/funnel_compare.py: survival per filter of builds side by side, from their stats.json funnels."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "analysis"))
from funnel_compare import main  # noqa: E402


def _stats(folder: Path, candidates: int, stages: dict[str, tuple[int, int]], rejected: dict[str, int]) -> Path:
    folder.mkdir()
    funnel = {"stages": {name: {"seen": seen, "kept": kept, "rejected": {}, "seconds": 1.0}
                         for name, (seen, kept) in stages.items()}}
    tasks = list(stages.values())[-1][1]
    (folder / "stats.json").write_text(json.dumps({"candidates": candidates, "tasks": tasks, "funnel": funnel,
                                                   "rejected": rejected}))
    return folder


def test_two_builds_side_by_side_per_stage_in_build_order(tmp_path, capsys):
    fp32 = _stats(tmp_path / "fp32-run", 100, {"dedup": (100, 40), "degenerate": (40, 36), "compile": (36, 36)},
                  {"duplicate": 60, "degenerate_output": 4})
    bf16 = _stats(tmp_path / "bf16-run", 100, {"dedup": (100, 40), "degenerate": (40, 30), "visible": (30, 27),
                                                "compile": (27, 25)}, {"duplicate": 60, "degenerate_output": 10})
    out = tmp_path / "cmp.json"
    assert main([f"fp32={fp32}", str(bf16 / "stats.json"), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0] == "| stage | fp32: seen, kept (share) | bf16-run: seen, kept (share) |"
    assert [line.split(" | ")[0] for line in lines[2:6]] == ["| dedup", "| degenerate", "| compile", "| visible"]
    assert "| degenerate | 40, 36 (90.0%) | 40, 30 (75.0%) |" in lines
    assert "| visible | — | 30, 27 (90.0%) |" in lines          # a stage one build did not run
    assert "fp32: 36 tasks from 100 candidates (36.0%); rejected: duplicate 60, degenerate_output 4" in lines
    report = json.loads(out.read_text())
    assert report["stages"]["compile"]["bf16-run"] == {"seen": 27, "kept": 25, "share": round(25 / 27, 4)}
    assert report["builds"]["bf16-run"]["survival"] == 0.25


def test_a_folder_without_stats_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match="no build stats at"):
        main([str(tmp_path)])
