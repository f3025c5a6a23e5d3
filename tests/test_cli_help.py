"""Every subcommand's --help prints its usage and exits 0 (a stray % in a help string once broke `opgen build`, and a
doubled one showed as `%%` in a description)."""

from __future__ import annotations

import argparse

import pytest

from opgen.cli import build_parser, main
from tests.conftest import run_cli


def subcommands() -> list[str]:
    """The subcommands the parser registers, read from it (so a new one is covered without editing this test)."""
    actions = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(actions[0].choices)


def test_the_parser_knows_every_subcommand_the_readme_shows():
    assert {"vocab", "sample", "validate", "dedup", "time", "build", "publish", "retime", "check", "prior", "audit",
            "profile"} <= set(subcommands())


@pytest.mark.parametrize("command", subcommands())
def test_every_subcommand_help_prints_its_usage_and_exits_0(command, capsys):
    with pytest.raises(SystemExit) as stop:
        main([command, "--help"])
    out = capsys.readouterr().out
    assert stop.value.code == 0 and out.startswith(f"usage: opgen {command}")
    assert "options:" in out and "-h, --help" in out
    assert "%%" not in out   # a description is printed as written: its % needs no doubling


def test_the_installed_command_prints_the_main_and_build_help():
    top, build = run_cli("--help", timeout=120), run_cli("build", "--help", timeout=120)
    assert top.returncode == 0 and all(name in top.stdout for name in subcommands())
    assert build.returncode == 0 and "0.2% of --n" in build.stdout and build.stderr == ""
