"""scripts/analysis/survival_by_rule.py: survival and window share per composition rule, from verdicts or a cut-short log."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "analysis"))

from survival_by_rule import read_verdicts, summarize  # noqa: E402

from opgen.checkpoint import ChunkLog  # noqa: E402

VERDICTS = [
    {"id": "mix-ops-a", "keep": True, "reason": None, "eager_ms_cuda": 3.0},
    {"id": "mix-ops-b", "keep": False, "reason": "runtime_out_of_range", "eager_ms_cuda": 0.4},
    {"id": "mix-ops-c", "keep": False, "reason": "degenerate_output"},
    {"id": "uniform-ops-d", "keep": True, "reason": None, "eager_ms_cuda": 50.0},
]


def test_rules_are_counted_apart_with_survival_from_the_draw_and_the_window_share_of_what_was_measured():
    lines = summarize(VERDICTS, {"mix": 10})
    mix = next(line for line in lines if line.startswith("| mix "))
    cells = [cell.strip() for cell in mix.strip("|").split("|")]
    assert cells[:9] == ["mix", "10", "3", "1", "33.3%", "10.0%", "2", "50.0%", "1.7"]
    assert "runtime_out_of_range 1" in cells[9] and "degenerate_output 1" in cells[9]
    uniform = next(line for line in lines if line.startswith("| uniform "))
    assert "| — |" in uniform and "100.0%" in uniform


def test_a_partial_chunk_log_reads_as_its_finished_verdicts(tmp_path):
    out = tmp_path / "verdicts.jsonl"
    log = ChunkLog(out, {"inputs": 4})
    log.append(0, VERDICTS[:2])
    log.append(2, VERDICTS[2:])
    with open(log.path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"start": 4, "lines": []})[:10])  # a line cut short by a kill
    assert read_verdicts(log.path) == VERDICTS
