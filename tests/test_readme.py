"""The README holds as written: a front page of at most 250 lines whose commands parse, whose plugin example runs, and
whose links lead to documents that exist; the filter example of docs/extending.md runs in the chain."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from filters.base import Funnel, judge
from filters.static import STATIC_FILTERS
from opgen.cli import build_parser, main
from tests.test_cli_help import subcommands

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
TASK = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        {body}
        return torch.relu(x)

def get_inputs():
    return [torch.randn(4, 4)]

def get_init_inputs():
    return []
"""


def section(text: str, heading: str) -> str:
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def readme_commands(text: str) -> list[list[str]]:
    """Every `opgen ...` line of the README's bash blocks, as arguments, less its comment."""
    lines = [line.split("#", 1)[0] for block in code_blocks(text, "bash") for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("opgen ")]


def test_the_readme_is_a_front_page_with_the_set_up_first():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[0] == "Set-up: two commands"
    assert {"The main job", "Loading the dataset", "Extending the vocabulary", "Grading a model's kernels",
            "Checking a dataset", "Figures"} <= set(headings)
    first = code_blocks(section(text, "Set-up: two commands"), "bash")[0].splitlines()
    assert [line.split("#")[0].strip() for line in first] == ["make dataset", "make test"]
    assert "docs/grading.md" in section(text, "Grading a model's kernels")


def test_every_command_the_readme_shows_parses_with_the_real_parser():
    commands = readme_commands(README.read_text())
    assert {args[0] for args in commands} >= {"build", "publish", "retime", "vocab", "sample", "audit", "check",
                                                "profile"}
    parser = build_parser()
    for args in commands:
        parsed = parser.parse_args(args)   # a renamed or missing option is a UsageError naming it
        assert parsed.command == args[0]


def test_the_plugin_example_and_its_focus_run_as_written(tmp_path, monkeypatch, capsys):
    text = section(README.read_text(), "Extending the vocabulary")
    (tmp_path / "my_ops.py").write_text(code_blocks(text, "python")[0])
    monkeypatch.chdir(tmp_path)
    cheap = [args for args in readme_commands(text) if args[0] in ("vocab", "sample")]
    assert len(cheap) == 3 and any("--focus" in args for args in cheap)
    for args in cheap:
        assert main(args) == 0, args
    assert "torch.nansum" in capsys.readouterr().out
    focused = [json.loads(line) for line in (tmp_path / "nansum.jsonl").read_text().splitlines()]
    assert focused and all("torch.nansum" in row["ops"] for row in focused)


def test_every_document_the_readme_names_exists():
    named = set(re.findall(r"`(docs/[\w.]+\.md)`", README.read_text()))
    assert {"docs/building.md", "docs/dataset.md", "docs/extending.md", "docs/grading.md"} <= named
    if "grade" not in subcommands():
        named.discard("docs/grading.md")   # the grading guide comes with `opgen grade`
    assert sorted(doc for doc in named if not (REPO / doc).is_file()) == []


@pytest.fixture
def documented_filter():
    section_text = (REPO / "docs" / "extending.md").read_text().split("## Adding a filter", 1)[1]
    code = code_blocks(section_text, "python")[0]
    namespace: dict = {}
    exec(compile(code, "docs/extending.md", "exec"), namespace)
    return namespace["HostSyncFilter"]()


def test_the_documented_filter_joins_the_chain_and_counts_into_the_funnel(documented_filter):
    chain = (*STATIC_FILTERS, documented_filter)
    funnel = Funnel()
    syncing = judge({"code": TASK.format(body="x = x * x.sum().item()")}, chain, funnel)
    honest = judge({"code": TASK.format(body="x = x * 2")}, chain, funnel)
    assert (syncing.keep, syncing.reason, syncing.stage) == (False, "invalid_task", "host_sync")
    assert honest.keep and honest.stage == "host_sync"
    assert funnel.stages["host_sync"].seen == 2 and funnel.stages["host_sync"].rejected["invalid_task"] == 1


def test_the_loading_example_prints_what_a_cpu_dataset_holds(tmp_path, capsys, monkeypatch):
    import pyarrow.parquet as pq

    from opgen.records import dataset_table
    from opgen.sample.sampler import sample_records

    folder = tmp_path / "dataset"   # a dataset as `make dataset` publishes it: built on the CPU, nothing timed
    (folder / "data").mkdir(parents=True)
    pq.write_table(dataset_table(sample_records(0, 0, 3)), folder / "data" / "train-00000-of-00001.parquet")
    example = code_blocks(section(README.read_text(), "Loading the dataset"), "python")[0]
    assert '"data/smoke/dataset"' in example
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    exec(compile(example.replace('"data/smoke/dataset"', repr(str(folder))), "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert printed.startswith("3 ops-") and "class Model" in printed and "def get_inputs" in printed
    assert "None" not in printed   # every field it prints is filled on the CPU too
