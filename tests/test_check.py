"""`opgen check` on a published folder: sound rows pass in fresh processes, a row that breaks a grader-proof rule
is named with its reason (exit 1), bad input is one line (exit 2); the timing agreement's arithmetic."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from opgen.cli import main
from opgen.pipeline.check import agreement, draw_rows
from opgen.publish.folder import publish
from tests.test_build import reference_build

# a real task the every-operator rule rejects (a ReLU after a distance, which is never negative)
RELU_AFTER_DISTANCE = (Path(__file__).parent / "bad_tasks" / "trivial__relu_after_distance.py").read_text()


@pytest.mark.heavy
def test_check_passes_a_sound_folder_and_names_a_broken_row(tmp_path_factory, tmp_path):
    run = reference_build(tmp_path_factory)
    folder = tmp_path / "dataset"
    publish(run, "opgen/check-test", dry_run=True, out=folder)
    report = tmp_path / "report.json"
    assert main(["check", str(folder), "--device", "cpu", "--sample", "0", "--report", str(report),
                 "--no-progress"]) == 0
    found = json.loads(report.read_text())
    assert (found["drawn"], found["failed"], found["timing"]) == (found["rows"], 0, None)

    [shard] = (folder / "data").glob("train-*.parquet")
    table = pq.read_table(shard)
    codes = table.column("code").to_pylist()
    broken_id = table.column("id")[0].as_py()
    codes[0] = RELU_AFTER_DISTANCE
    table = table.set_column(table.schema.get_field_index("code"), "code", [codes])
    # a row whose recorded (GPU) eager time lies outside the window: its promise is broken, whatever it times now
    slow_id = table.column("id")[1].as_py()
    for name, value in (("eager_ms", 150.0), ("hardware", "NVIDIA H200")):
        column = table.column(name).to_pylist()
        column[1] = value
        table = table.set_column(table.schema.get_field_index(name), table.schema.field(name), [column])
    pq.write_table(table, shard)
    assert main(["check", str(folder), "--device", "cpu", "--sample", "0", "--report", str(report),
                 "--no-progress"]) == 1
    found = json.loads(report.read_text())
    assert [(f["id"], f["reason"]) for f in found["failures"]] == [(broken_id, "trivial"),
                                                                    (slow_id, "runtime_out_of_range")]
    assert found["failures"][0]["detail"].startswith("every-operator rule: without `F.relu(x)`")
    assert found["failures"][1]["detail"].startswith("the recorded time: ")


def test_check_bad_input_is_one_line(tmp_path, capsys):
    assert main(["check", str(tmp_path / "missing"), "--device", "cpu"]) == 2
    assert main(["check", str(tmp_path), "--device", "cpu", "--sample", "-1"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 2 and all(line.startswith("opgen: error:") for line in errors)


def test_draw_rows_is_seeded_and_keeps_the_dataset_order():
    rows = [{"id": i} for i in range(50)]
    first, again = draw_rows(rows, 10, seed=3), draw_rows(rows, 10, seed=3)
    assert first == again and len(first) == 10 and [r["id"] for r in first] == sorted(r["id"] for r in first)
    assert draw_rows(rows, 10, seed=4) != first and draw_rows(rows, None, 0) == rows


def test_agreement_counts_the_rows_beyond_the_tolerance():
    pairs = [(1.0, 1.0), (2.0, 2.1), (10.0, 9.5), (4.0, 8.0)]
    summary = agreement(pairs, 0.25)
    assert summary["tasks"] == 4 and summary["outside"] == 1          # 4.0 against 8.0 only
    assert summary["median_ratio"] == pytest.approx((1.0 + 2.0 / 2.1) / 2)
    assert summary["log_correlation"] == pytest.approx(
        __import__("statistics").correlation([math.log(a) for a, _ in pairs], [math.log(b) for _, b in pairs]))
