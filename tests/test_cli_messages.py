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
