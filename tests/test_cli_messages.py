"""Bad input is one line naming what is wrong: an unknown command, an output under a file, a malformed JSONL line."""

from __future__ import annotations

import json

from opgen.cli import main
from opgen.sample.sampler import sample_records


def error_lines(capsys) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


def test_an_unknown_command_is_one_line_with_one_prefix(capsys):
    assert main(["frobnicate"]) == 2
    [line] = error_lines(capsys)
    assert line.startswith("opgen: error: argument command: invalid choice: 'frobnicate'")
    assert line.count("opgen:") == 1 and "build" in line


def test_a_subcommand_s_bad_option_names_the_subcommand(capsys):
    assert main(["sample", "--n", "many", "--out", "x.jsonl"]) == 2
    assert error_lines(capsys) == ["opgen: error: sample: argument --n: invalid int value: 'many'"]


def test_an_output_under_a_file_says_the_parent_is_not_a_folder(tmp_path, capsys):
    blocker = tmp_path / "notes.txt"
    blocker.write_text("mine")
    assert main(["sample", "--n", "1", "--out", str(blocker / "s.jsonl")]) == 2
    assert main(["build", "--n", "1", "--device", "cpu", "--out", str(blocker / "run")]) == 2
    assert error_lines(capsys) == [f"opgen: error: cannot write --out {blocker / 's.jsonl'}: {blocker} is not a folder",
                                   f"opgen: error: cannot use {blocker / 'run'} as the run folder: {blocker} is not a "
                                   "folder"]
    assert blocker.read_text() == "mine"


def test_a_malformed_jsonl_line_is_named_by_its_own_number(tmp_path, capsys):
    rows = tmp_path / "rows.jsonl"
    good = [json.dumps(record) for record in sample_records(0, 0, 2)]
    rows.write_text(f"{good[0]}\n\n{good[1]}\n{{\"code\": oops\n")   # line 2 blank, line 4 broken
    assert main(["audit", str(rows)]) == 2
    [line] = error_lines(capsys)
    assert line.startswith(f"opgen: error: {rows}:4: malformed JSON line")


def test_a_limit_that_lifts_the_limit_is_refused_in_one_line(capsys):
    """`nan` or `inf` seconds would let a looping task run for ever; a negative memory limit rejects every task."""
    for args in (["validate", "--input", "x.jsonl", "--out", "y.jsonl", "--timeout", "nan"],
                 ["grade", "--task", "t.py", "--solution", "s.py", "--timeout", "inf"],
                 ["check", "data", "--timeout", "0"],
                 ["validate", "--input", "x.jsonl", "--out", "y.jsonl", "--memory-mb", "-5"]):
        assert main(args) == 2
    lines = error_lines(capsys)
    assert [line.split(": argument ")[1].split(":")[0] for line in lines] == ["--timeout"] * 3 + ["--memory-mb"]
    assert all(line.count("opgen:") == 1 for line in lines)


def test_verdicts_never_overwrite_their_input(tmp_path, capsys):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(record) + "\n" for record in sample_records(0, 0, 1)))
    before = rows.read_text()
    for command in ("validate", "dedup", "time"):
        assert main([command, "--input", str(rows), "--out", str(tmp_path / "." / "rows.jsonl")]) == 2
    assert error_lines(capsys) == [f"opgen: error: --out {tmp_path / '.' / 'rows.jsonl'} is the input: its tasks "
                                   "would be overwritten by the verdicts"] * 3
    assert rows.read_text() == before
