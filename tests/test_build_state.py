"""The build's state archive (`--save-state`, `--resume-from`): self-checking, split past 16 MiB, refused in one line
when corrupt, incomplete, of another version or config; and a build moved between two run folders mid-way ends
with the dataset of an uninterrupted build, redoing nothing finished."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import opgen
from opgen.errors import UsageError
from opgen.pipeline import state
from opgen.pipeline.build import STATE_INTERVAL_ENV
from opgen.pipeline.preview import preview_state
from opgen.pipeline.rundir import FAULT_ENV, RunDir
from tests.conftest import REPO, run_cli
from tests.test_build import build_args, dataset_rows, reference_build

CONFIG = {"n": 3, "seed": 0}


def _fake_run(root: Path, shards: int = 3, payload: int = 3000) -> RunDir:
    """A run folder with finished and unfinished stages; rows of random text, so the archive does not shrink."""
    rundir = RunDir(root)
    rundir.claim(CONFIG)
    (root / "rounds" / "000").mkdir(parents=True)
    (root / "rounds" / "000" / "plan.json").write_text(json.dumps({"round": 0, "shards": []}))
    for shard in range(shards):
        folder = rundir.shard_dir(shard)
        rundir.write_rows(folder, "candidates", [{"sample_index": shard, "code": os.urandom(payload).hex()}])
        rundir.write_rows(folder, "static", [{"sample_index": shard, "keep": True}])
        rundir.mark(folder, "static", {"candidates": 1})
    rundir.write_rows(rundir.shard_dir(0), "execute", [{"sample_index": 0, "keep": True}])   # in flight: no marker
    return rundir


def test_state_holds_marked_work_only_and_restores_it(tmp_path):
    _fake_run(tmp_path / "a")
    summary = state.save_state(tmp_path / "a", tmp_path / "s.state")
    assert summary["parts"] == 1 and summary["markers"] == 3 and summary["bytes"] == (tmp_path / "s.state").stat().st_size
    header, _ = state.read_state(tmp_path / "s.state")
    assert header["opgen_version"] == opgen.__version__ and header["config"] == CONFIG
    target = RunDir(tmp_path / "b")
    assert state.restore_state(tmp_path / "s.state", target, CONFIG) == 3
    for shard in range(3):
        for name in ("candidates.jsonl", "static.jsonl", "static.done"):
            a, b = (root / "shards" / f"{shard:05d}" / name for root in (tmp_path / "a", tmp_path / "b"))
            assert a.read_bytes() == b.read_bytes() and int(a.stat().st_mtime) == int(b.stat().st_mtime)
    assert not (tmp_path / "b" / "shards" / "00000" / "execute.jsonl").exists()   # unmarked: not the state's
    assert (tmp_path / "b" / "rounds" / "000" / "plan.json").is_file()
    # into the same build's folder again: nothing to restore, nothing rewritten
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "b").rglob("*.done")}
    assert state.restore_state(tmp_path / "s.state", target, CONFIG) == 0
    assert before == {p: p.stat().st_mtime_ns for p in (tmp_path / "b").rglob("*.done")}


def test_a_snapshot_reads_an_unchanged_file_once_and_a_rewritten_one_again(tmp_path, monkeypatch):
    rundir = _fake_run(tmp_path / "a")
    rundir.start_clock()
    kept: dict = {}
    first = state.snapshot_state(tmp_path / "a", kept)
    assert state.CLOCK_MEMBER in kept and len(kept) == len(first.files)
    read: list[str] = []
    real_read = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda path: read.append(path.name) or real_read(path))
    # a repair rewrites a timed shard's rows (atomically, as the run folder writes every file), and the clock moves
    rundir.write_rows(rundir.shard_dir(0), "candidates", [{"sample_index": 0, "code": "repaired"}])
    (tmp_path / "a" / state.CLOCK_MEMBER).write_text("[[1.0, 2.0]]")
    second = dict((name, data) for name, data, _ in state.snapshot_state(tmp_path / "a", kept).files)
    assert sorted(read) == ["candidates.jsonl", "clock.json"]      # the others kept from the first read
    assert b"repaired" in second["shards/00000/candidates.jsonl"]
    assert second[state.CLOCK_MEMBER] == b"[[1.0, 2.0]]"
    monkeypatch.setattr(Path, "read_bytes", real_read)
    state.write_state(state.snapshot_state(tmp_path / "a", kept), tmp_path / "s.state")
    assert state.restore_state(tmp_path / "s.state", RunDir(tmp_path / "b"), CONFIG) == 3
    assert "repaired" in (tmp_path / "b" / "shards" / "00000" / "candidates.jsonl").read_text()
    assert state.read_state(tmp_path / "s.state")[0]["markers"] == 3


def test_a_large_state_is_split_into_parts_of_at_most_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(state, "PART_BYTES", 4096)
    _fake_run(tmp_path / "a", shards=4, payload=4000)
    file = tmp_path / "s.state"
    summary = state.save_state(tmp_path / "a", file)
    parts = sorted(tmp_path.glob("s.state.*.*"))
    assert summary["parts"] == len(parts) + 1 >= 3
    assert all(p.stat().st_size <= 4096 for p in parts) and file.stat().st_size <= 4096 + state.HEADER_MAX_BYTES
    assert state.restore_state(file, RunDir(tmp_path / "b"), CONFIG) == 4
    # a second save replaces the parts of the first
    rundir = RunDir(tmp_path / "a")
    rundir.write_rows(rundir.shard_dir(0), "execute", [{"sample_index": 0, "keep": True, "x": os.urandom(2000).hex()}])
    rundir.mark(rundir.shard_dir(0), "execute", {})
    state.save_state(tmp_path / "a", file)
    sha = state.read_state(file)[0]["payload_sha256"][:12]
    assert all(f".{sha}." in p.name for p in tmp_path.glob("s.state.*.*"))
    # a missing part is refused in one line
    next(tmp_path.glob("s.state.*.1")).unlink()
    with pytest.raises(UsageError, match="incomplete"):
        state.read_state(file)


def test_corrupt_or_foreign_states_are_refused(tmp_path):
    _fake_run(tmp_path / "a")
    file = tmp_path / "s.state"
    state.save_state(tmp_path / "a", file)
    raw = bytearray(file.read_bytes())
    raw[-10] ^= 0xFF
    (tmp_path / "bad").write_bytes(bytes(raw))
    with pytest.raises(UsageError, match="corrupt"):
        state.read_state(tmp_path / "bad")
    (tmp_path / "junk").write_text("hello\n")
    with pytest.raises(UsageError, match="not an opgen build state"):
        state.read_state(tmp_path / "junk")
    with pytest.raises(UsageError, match=r"another config \(differs in: n\)"):
        state.restore_state(file, RunDir(tmp_path / "b"), {**CONFIG, "n": 4})
    assert not (tmp_path / "b").exists()
    header, payload = state.read_state(file)
    header["opgen_version"] = "0.0.1"
    (tmp_path / "old").write_bytes((json.dumps(header) + "\n").encode() + payload)
    with pytest.raises(UsageError, match="saved by opgen 0.0.1"):
        state.restore_state(tmp_path / "old", RunDir(tmp_path / "c"), CONFIG)


def _finished(run: Path) -> dict[str, tuple[bytes, int]]:
    """Every marker and marked data file of a run folder: its bytes and mtime."""
    names = [n for n in state.state_members(run) if n not in ("config.json", "logs/clock.json")]
    return {n: ((run / n).read_bytes(), (run / n).stat().st_mtime_ns) for n in names}


@pytest.mark.heavy
def test_a_build_moved_between_run_folders_ends_as_an_uninterrupted_one(tmp_path_factory, tmp_path):
    reference = reference_build(tmp_path_factory)
    saved, first, second = tmp_path / "move" / "build.state", tmp_path / "first", tmp_path / "second"
    # 1. the first machine is killed after 5 markers; its state is saved after each one
    result = run_cli(*build_args(first), "--save-state", str(saved), env={FAULT_ENV: "5", STATE_INTERVAL_ENV: "0"})
    assert result.returncode == 137, result.stderr[-2000:]
    header, _ = state.read_state(saved)
    assert header["markers"] == 5 and saved.stat().st_size < 16 * 2**20
    # 2. a changed option and a damaged state are refused in one line, before anything is written
    args = build_args(second)
    args[args.index("--n") + 1] = "5"
    refused = run_cli(*args, "--resume-from", str(saved))
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "another config (differs in: " in refused.stderr and not second.exists()
    damaged = tmp_path / "damaged.state"
    damaged.write_bytes(saved.read_bytes()[:-100])
    refused = run_cli(*build_args(second), "--resume-from", str(damaged))
    assert refused.returncode == 2 and "corrupt" in refused.stderr and not second.exists()
    # 3. a second machine with an empty folder continues from the state, and finishes
    result = run_cli(*build_args(second), "--resume-from", str(saved), "--save-state", str(saved),
                     env={FAULT_ENV: "2", STATE_INTERVAL_ENV: "0"})
    assert result.returncode == 137, result.stderr[-2000:]   # killed again, two markers further on
    restored = _finished(second)
    assert len([n for n in restored if n.endswith(".done")]) == 7
    for name, (data, _) in _finished(first).items():   # what the first folder finished came over unchanged
        assert restored[name][0] == data, name
    partial = tmp_path / "partial.state"
    partial.write_bytes(saved.read_bytes())
    # (saving beside the build: compressed in a thread while the driver goes on, a last save in the driver at the end)
    result = run_cli(*build_args(tmp_path / "third"), "--resume-from", str(saved), "--save-state", str(saved),
                     env={STATE_INTERVAL_ENV: "0.01"})
    assert result.returncode == 0, result.stderr[-3000:]
    third = tmp_path / "third"
    header, _ = state.read_state(saved)
    assert header["markers"] == len(list(third.glob("*/*/*.done")))
    assert dataset_rows(third) == dataset_rows(reference)
    after = _finished(third)
    for name, (data, mtime) in restored.items():   # no finished stage redone: markers and data as restored
        assert after[name][0] == data and after[name][1] // 10**9 == mtime // 10**9, name
    log = (third / "logs" / "build.log").read_text()
    assert "restored 7 finished stages" in log
    assert "compressed beside the build" in log
    assert json.loads((third / "stats.json").read_text())["tasks"] == 4
    # 4. a preview of a state, on a machine that runs nothing: a finished build's state gives its dataset; a state
    # of a build under way gives what it had finished, and says how far each source is
    preview = subprocess.run([sys.executable, "scripts/analysis/state_preview.py", str(saved), "--out",
                              str(tmp_path / "preview")], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert preview.returncode == 0, preview.stderr[-2000:]
    assert dataset_rows(tmp_path / "preview" / "run") == dataset_rows(reference)
    assert pq.read_table(tmp_path / "preview" / "dataset" / "data").num_rows == 4
    assert "4 of 4 tasks so far" in preview.stdout and "| torch#2 |" in preview.stdout
    _, progress = preview_state(partial, tmp_path / "early")
    assert progress["torch#2"]["executed"] < progress["torch#2"]["planned"]
    early = dataset_rows(tmp_path / "early")
    assert len(early) == progress["torch#2"]["tasks"] < 4
    assert {r["id"] for r in early} <= {r["id"] for r in dataset_rows(reference)}
    early_funnel = json.loads((tmp_path / "early" / "stats.json").read_text())["funnel"]["stages"]
    assert early_funnel["dedup"]["seen"] > 0   # the unfinished round's stages are counted


def test_state_continuity_tells_new_work_from_a_finished_stage_done_again(tmp_path, capsys):
    sys.path.insert(0, str(REPO / "scripts" / "analysis"))
    try:
        from state_continuity import main as continuity
    finally:
        sys.path.pop(0)
    rundir = _fake_run(tmp_path / "a")
    state.save_state(tmp_path / "a", tmp_path / "1.state")
    rundir.mark(rundir.shard_dir(0), "execute")              # new work, saved by the next machine
    (tmp_path / "a" / "config.json").touch()                 # a machine claims the folder again: not a redo
    os.utime(tmp_path / "a" / "config.json", (1, 1))
    state.save_state(tmp_path / "a", tmp_path / "2.state")
    assert continuity([str(tmp_path / "1.state"), str(tmp_path / "2.state")]) == 0
    assert "4 finished stages, 1 new; 0 lost, 0 changed" in capsys.readouterr().out
    static = rundir.shard_dir(1) / "static.done"             # a finished stage written again
    os.utime(static, (static.stat().st_mtime + 60, static.stat().st_mtime + 60))
    state.save_state(tmp_path / "a", tmp_path / "3.state")
    assert continuity([str(tmp_path / f"{k}.state") for k in (1, 2, 3)]) == 1
    out = capsys.readouterr().out
    assert "0 lost, 1 changed\n  shards/00001/static.done" in out and "were lost or redone" in out
    assert continuity([str(tmp_path / "1.state"), str(tmp_path / "missing.state")]) == 2
