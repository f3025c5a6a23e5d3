"""Task and solution files read as Python reads them: a byte-order mark and a coding line honoured, by the folder
reader of `opgen validate` and by `opgen grade`'s."""

from __future__ import annotations

from pathlib import Path

import pytest

from opgen.errors import UsageError
from opgen.grading.tasks import read_source
from opgen.jsonl import read_inputs
from opgen.taskcode.syntax import parse

TASK = (Path(__file__).parent / "grade_corpus" / "tasks" / "linear_gelu.py").read_text()


@pytest.mark.parametrize("encoded", [
    b"\xef\xbb\xbf" + TASK.encode(),                                                   # a UTF-8 byte-order mark
    b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + TASK.encode(),                          # a coding line
], ids=["bom", "coding line"])
def test_a_file_python_runs_is_read_as_python_reads_it(tmp_path, encoded):
    (tmp_path / "task.py").write_bytes(encoded)
    text = read_source(tmp_path / "task.py", "task file")
    [record] = read_inputs(tmp_path)
    assert record["code"] == text and not text.startswith("\ufeff")
    parse(text)
    assert "class Model" in text


def test_an_undecodable_file_is_one_clear_error(tmp_path):
    (tmp_path / "task.py").write_bytes(b"# caf\xe9\n" + TASK.encode())   # latin-1 bytes, no coding line
    with pytest.raises(UsageError, match="cannot read task file"):
        read_source(tmp_path / "task.py", "task file")
    [record] = read_inputs(tmp_path)   # the folder reader keeps it, its byte replaced: the parse step judges it
    assert "\ufffd" in record["code"]


def test_one_task_file_is_an_input_too(tmp_path):
    (tmp_path / "task.py").write_text(TASK)
    [record] = read_inputs(tmp_path / "task.py")
    assert record["source"] == "task.py" and record["code"] == TASK and record["id"].startswith("ops-")


def test_every_record_gets_string_ids(tmp_path):
    import json

    rows = [{"code": TASK, "id": 5}, {"code": TASK, "id": None}, {"code": TASK, "id": {"a": 1}},
            {"code": TASK, "id": "mine", "source": ["x"]}]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    records = read_inputs(tmp_path / "rows.jsonl")
    assert [r["id"] for r in records[:1]] + [r["source"] for r in records[3:]] == ["5", "mine"]
    assert all(isinstance(r["id"], str) and isinstance(r["source"], str) for r in records)
    assert records[1]["id"] == records[2]["id"] and records[1]["id"].startswith("ops-")
