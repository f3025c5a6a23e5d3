"""scripts/gpu/keep_state.py: a state brought back from a GPU call replaces the committed one only when it is whole
and no older."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from opgen.pipeline import state as state_module
from opgen.pipeline.state import Snapshot, read_state, write_state
from scripts.gpu.keep_state import main, state_files


def _state(file: Path, markers: int, filler: bytes = b"") -> None:
    """A whole state at `file` holding `markers` finished stages (and `filler`, to make parts)."""
    files = [(f"shards/{n:05d}/execute.done", b"{}", 0) for n in range(markers)]
    write_state(Snapshot([*files, ("filler.bin", filler, 0)], {"n": 1}), file)


def _noise(seed: int, size: int) -> bytes:
    """Bytes xz cannot shrink: a payload of several parts."""
    return random.Random(seed).randbytes(size)


def test_a_newer_state_is_kept_with_its_parts_and_an_older_one_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(state_module, "PART_BYTES", 4096)   # parts past 4 KB, as past 16 MiB for real
    brought, into = tmp_path / "call", tmp_path / "builds"
    _state(into / "b.state", 3, filler=_noise(1, 10_000))
    old_parts = state_files(into / "b.state")[1:]
    assert old_parts   # the committed state has parts
    _state(brought / "b.state", 5, filler=_noise(2, 12_000))
    (brought / "b.state.aaaaaaaaaaaa.1").write_bytes(b"an older save's part")   # not named by this state's header
    assert main([str(brought), "--name", "b", "--into", str(into)]) == 0
    assert not (into / "b.state.aaaaaaaaaaaa.1").exists()
    assert "5 finished stages (was 3)" in capsys.readouterr().out
    assert read_state(into / "b.state")[0]["markers"] == 5
    kept_parts = state_files(into / "b.state")[1:]
    brought_parts = [p for p in state_files(brought / "b.state")[1:] if "aaaaaaaaaaaa" not in p.name]
    assert len(kept_parts) == len(brought_parts) > 0 and not set(old_parts) & set(kept_parts)
    assert [p.read_bytes() for p in kept_parts] == [p.read_bytes() for p in brought_parts]

    older = tmp_path / "older"
    _state(older / "b.state", 4)
    before = {p.name: p.read_bytes() for p in into.iterdir()}
    assert main([str(older), "--name", "b", "--into", str(into)]) == 1
    assert "refused" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in into.iterdir()} == before


@pytest.mark.parametrize("broken", ["missing", "not a state", "part missing"])
def test_no_whole_state_brought_back_leaves_the_committed_one(tmp_path, monkeypatch, capsys, broken):
    monkeypatch.setattr(state_module, "PART_BYTES", 4096)
    brought, into = tmp_path / "call", tmp_path / "builds"
    _state(into / "b.state", 2)
    brought.mkdir()
    if broken == "not a state":
        (brought / "b.state").write_text("hello\n")
    elif broken == "part missing":
        _state(brought / "b.state", 9, filler=_noise(3, 10_000))
        state_files(brought / "b.state")[1].unlink()
    before = (into / "b.state").read_bytes()
    assert main([str(brought), "--name", "b", "--into", str(into)]) == 2
    assert capsys.readouterr().err.startswith("keep_state: ")
    assert (into / "b.state").read_bytes() == before and read_state(into / "b.state")[0]["markers"] == 2


def test_the_first_state_of_a_build_is_kept(tmp_path, capsys):
    brought, into = tmp_path / "call", tmp_path / "builds" / "new"
    _state(brought / "b.state", 1)
    assert main([str(brought), "--name", "b", "--into", str(into)]) == 0
    assert "(was none)" in capsys.readouterr().out and read_state(into / "b.state")[0]["markers"] == 1
