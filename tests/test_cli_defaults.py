"""One set of defaults across commands: --seed 0, --device auto (CUDA when a GPU is visible, else the CPU, said on
stderr), and a missing path named as missing before anything else, the device included."""

from __future__ import annotations

import argparse
import json

import pytest

import opgen.commands.build as build_command
from opgen.cli import build_parser, main
from opgen.commands.device_option import chosen_device
from opgen.sandbox.gpus import resolve_device


def subparsers() -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices)


def option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    return next((action for action in parser._actions if flag in action.option_strings), None)


def test_every_device_option_is_auto_cuda_or_cpu_and_defaults_to_auto():
    devices = {name: option(parser, "--device") for name, parser in subparsers().items()}
    devices = {name: action for name, action in devices.items() if action is not None}
    assert {"validate", "time", "build", "retime", "check", "vocab"} <= set(devices)
    for name, action in devices.items():
        assert (name, action.default, tuple(action.choices)) == (name, "auto", ("auto", "cuda", "cpu"))


def test_every_sampling_seed_defaults_to_0():
    seeds = {name: option(parser, "--seed") for name, parser in subparsers().items()}
    drawn = {name: action.default for name, action in seeds.items() if action is not None and name != "audit"}
    assert {"sample", "validate", "time", "build", "retime", "check"} <= set(drawn)
    assert set(drawn.values()) == {0}


def test_sample_without_a_seed_draws_seed_0(tmp_path):
    assert main(["sample", "--n", "3", "--out", str(tmp_path / "default.jsonl")]) == 0
    assert main(["sample", "--n", "3", "--seed", "0", "--out", str(tmp_path / "zero.jsonl")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "default.jsonl").read_text().splitlines()]
    assert (tmp_path / "default.jsonl").read_text() == (tmp_path / "zero.jsonl").read_text()
    assert {row["seed"] for row in rows} == {0}


def test_auto_takes_cuda_when_a_gpu_is_visible_else_the_cpu_and_says_which(monkeypatch, capsys):
    monkeypatch.setattr("opgen.sandbox.gpus.visible_gpus", lambda: ["0", "1"])
    assert resolve_device("auto") == ("cuda", ["0", "1"], "--device auto: cuda (GPU(s) 0, 1 visible)")
    assert chosen_device("auto") == ("cuda", ["0", "1"])
    monkeypatch.setattr("opgen.sandbox.gpus.visible_gpus", lambda: [])
    assert chosen_device("auto") == ("cpu", [])
    assert chosen_device("cpu") == ("cpu", [])
    assert capsys.readouterr().err.splitlines() == ["opgen: --device auto: cuda (GPU(s) 0, 1 visible)",
                                                    "opgen: --device auto: cpu (no CUDA device visible)"]


class _Configured(Exception):
    pass


def _build_config(monkeypatch, tmp_path, *flags: str, gpus: list[str]):
    """The BuildConfig `opgen build FLAGS` hands the pipeline on a machine that sees `gpus`."""
    def capture(config, *args, **kwargs):
        raise _Configured(config)

    class NoExecutor:
        def close(self) -> None:
            pass

    monkeypatch.setattr("opgen.sandbox.gpus.visible_gpus", lambda: gpus)
    monkeypatch.setattr("opgen.sandbox.gpus.require_cuda", lambda option="--device cuda": gpus)
    monkeypatch.setattr(build_command, "run_build", capture)
    monkeypatch.setattr(build_command, "make_executor", lambda name, workers: NoExecutor())
    with pytest.raises(_Configured) as configured:
        main(["build", "--out", str(tmp_path / "run"), *flags])
    return configured.value.args[0]


def test_the_long_builds_explicit_command_configures_as_before_and_auto_resolves_to_the_same(monkeypatch, tmp_path):
    explicit = _build_config(monkeypatch, tmp_path, "--n", "6000", "--seed", "0", "--device", "cuda", "--profile",
                             "gpu", gpus=["0"])
    assert (explicit.n, explicit.seed, explicit.device, explicit.profile) == (6000, 0, "cuda", "gpu")
    assert _build_config(monkeypatch, tmp_path, "--n", "6000", gpus=["0"]) == explicit
    on_cpu = _build_config(monkeypatch, tmp_path, "--n", "6000", gpus=[])
    assert (on_cpu.device, on_cpu.profile) == ("cpu", "smoke")


@pytest.mark.parametrize("args, named", [
    (["check", "{missing}", "--device", "cuda"], "dataset folder {missing} does not exist (nor is it a Hub id ORG/NAME)"),
    (["retime", "{missing}", "--device", "cuda"], "dataset folder {missing} does not exist (nor is it a Hub id ORG/NAME)"),
    (["publish", "{missing}", "--repo-id", "org/name"], "RUN_DIR {missing} does not exist"),
    (["build", "--n", "4", "--out", "{tmp}/run", "--device", "cuda", "--vocab-plugin", "{missing}"],
     "--vocab-plugin {missing} does not exist"),
    (["build", "--n", "4", "--out", "{tmp}/run", "--device", "cuda", "--resume-from", "{missing}"],
     "--resume-from {missing} does not exist"),
    (["validate", "--input", "{missing}", "--out", "{tmp}/v.jsonl", "--device", "cuda"], "input not found: {missing}"),
    (["time", "--input", "{missing}", "--out", "{tmp}/t.jsonl", "--device", "cuda"], "input not found: {missing}"),
])
def test_a_missing_path_is_named_before_the_device_is_looked_at(args, named, tmp_path, capsys):
    missing = str(tmp_path / "missing")
    assert main([arg.format(missing=missing, tmp=tmp_path) for arg in args]) == 2
    assert capsys.readouterr().err.splitlines() == [f"opgen: error: {named.format(missing=missing)}"]
    assert not (tmp_path / "run").exists()
