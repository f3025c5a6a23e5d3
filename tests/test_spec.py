"""docs/spec.md holds to the code: its columns are the registry's, its reason codes the filters', and its exit statuses
are those of the README and `opgen --help`, which real commands return."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from filters.base import REASONS
from opgen.cli import EXIT_STATUSES, main
from opgen.records import COLUMN_REGISTRY
from opgen.sample.sampler import sample_records

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "docs" / "spec.md"


def table_rows(text: str, header: str) -> list[list[str]]:
    """The cells of each row of the markdown table whose header row starts with `header`."""
    lines = text.split(f"\n{header}", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines]


def type_words(arrow_type: pa.DataType) -> str:
    if pa.types.is_list(arrow_type):
        inner = type_words(arrow_type.value_type)
        return "list of lists of integers" if inner.startswith("list") else f"list of {inner}s"
    return {"string": "string", "int64": "integer", "double": "float", "bool": "bool"}[str(arrow_type)]


def test_the_column_table_is_the_registry_s_published_columns():
    rows = table_rows(SPEC.read_text(), "| column | type |")
    expected = [[f"`{c.name}`", type_words(c.type), c.stage, c.doc] for c in COLUMN_REGISTRY if c.published]
    assert rows == expected


def test_the_reason_codes_are_the_filters_codes():
    rows = table_rows(SPEC.read_text(), "| code |")
    assert [row[0].strip("`") for row in rows] == list(REASONS)


def exit_table(path: Path) -> list[tuple[int, str]]:
    return [(int(status), meaning) for status, meaning in table_rows(path.read_text(), "| status | meaning |")]


def test_one_exit_table_in_the_readme_the_spec_and_the_help(capsys):
    assert exit_table(REPO / "README.md") == exit_table(SPEC) == list(EXIT_STATUSES)
    with pytest.raises(SystemExit) as done:   # argparse's --help (the installed command: tests/test_cli_help.py)
        main(["--help"])
    assert done.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    for status, meaning in EXIT_STATUSES:
        assert f"{status} {meaning}" in help_text
    assert "SPEC.md" not in (REPO / "README.md").read_text()   # the repository's docs stand alone


def test_commands_return_the_statuses_of_the_table(tmp_path, capsys):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(record) + "\n" for record in sample_records(0, 0, 2)))
    assert main(["audit", str(rows)]) == 0                       # every claim holds
    assert main(["audit", str(rows), "--n", "3"]) == 1           # the size it claims fails
    assert main(["audit", str(rows), "--n", "three"]) == 2       # bad usage
    out = capsys.readouterr().out
    assert "| 3 rows | 2 | **no** |" in out
