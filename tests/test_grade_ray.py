"""Grading on a Ray cluster, with a real local one (CPU only, started here): a folder of corpus solutions gets the
local pool's verdicts, a task's next batch goes to the actor that timed its reference, an actor killed mid-batch
loses no grade and changes none, and a cluster out of reach is one line and exit 2. The routing on its own too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

import pytest

from opgen.cli import main
from opgen.grading.graders import batch_grader
from opgen.grading.ray_routing import route, steal
from opgen.grading.rewards import grade_completions
from tests.test_grade import CORPUS, TASKS, headers

ray = pytest.importorskip("ray")
REPO = Path(__file__).resolve().parents[1]
# quick ones: the CPU's first torch.compile in a process (honest_compiled) alone would take longer than all of these
SOLUTIONS = ("honest_rewrite", "honest_matmul", "cheat_zeros", "cheat_nan", "bad_wrong_shape", "cheat_forged_answer")
CPU_TIMED = {"device": "cpu", "timing": True, "warmups": 1, "trials": 3, "min_trials": 3}


def _task(name: str) -> dict:
    task = headers(CORPUS / "solutions" / f"{name}.py")["task"]
    return {"id": task, "code": (TASKS / f"{task}.py").read_text()}


def _completion(name: str) -> str:
    return "```python\n" + (CORPUS / "solutions" / f"{name}.py").read_text() + "\n```"


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    from opgen.grading.ray_grader import close_graders

    close_graders()
    ray.shutdown()


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> tuple[Path, Path]:
    """A JSONL dataset of one row per solution (its task's source) and the folder of solutions named by row id."""
    root = tmp_path_factory.mktemp("ray-folder")
    (root / "solutions").mkdir()
    with open(root / "tasks.jsonl", "w") as handle:
        for name in SOLUTIONS:
            handle.write(json.dumps({"id": name, "code": _task(name)["code"]}) + "\n")
            (root / "solutions" / f"{name}.py").write_text((CORPUS / "solutions" / f"{name}.py").read_text())
    return root / "tasks.jsonl", root / "solutions"


def _grade_folder(folder, out: Path, *extra: str) -> dict[str, tuple]:
    dataset, solutions = folder
    assert main(["grade", "--dataset", str(dataset), "--solutions", str(solutions), "--device", "cpu", "--out",
                 str(out), "--no-progress", *extra]) == 0
    return {line["task"]: (line["correct"], line["reason"]) for line in map(json.loads, out.read_text().splitlines())}


def test_a_folder_graded_on_ray_gets_the_local_verdicts(cluster, folder, tmp_path):
    on_ray = _grade_folder(folder, tmp_path / "ray.jsonl", "--executor", "ray", "--ray-actors", "2")
    local = _grade_folder(folder, tmp_path / "local.jsonl", "--workers", "2")
    assert on_ray == local
    assert local == {name: (headers(CORPUS / "solutions" / f"{name}.py")["expect"] == "ok",
                            headers(CORPUS / "solutions" / f"{name}.py")["expect"]) for name in SOLUTIONS}


def test_an_actor_killed_mid_batch_loses_no_grade(cluster):
    grader, options = batch_grader({"device": "cpu"}, "ray", 2)
    first = grader.slots[0]
    killed_pid = first.info["pid"]

    def kill_when_busy() -> None:   # its first chunk is under way: its sandbox workers are still starting
        while first.running is None:
            time.sleep(0.01)
        ray.kill(first.handle, no_restart=False)

    killer = threading.Thread(target=kill_when_busy)
    killer.start()
    lines = grade_completions([_completion(name) for name in SOLUTIONS], [_task(name) for name in SOLUTIONS],
                              options, grader)
    killer.join()
    assert grader.redone >= 1   # the kill hit grades in flight, and they were sent again
    assert [line["reason"] for line in lines] == [headers(CORPUS / "solutions" / f"{name}.py")["expect"]
                                                  for name in SOLUTIONS]
    assert first.alive and first.info["pid"] != killed_pid   # Ray restarted it


def test_a_tasks_next_batch_goes_to_the_actor_that_timed_its_reference(cluster):
    grader, options = batch_grader(dict(CPU_TIMED), "ray", 2)
    names = ["honest_rewrite", "honest_matmul"]
    first = grade_completions([_completion(n) for n in names], [_task(n) for n in names], options, grader)
    # in the other order: without what the first batch taught, the larger-first split would swap the two actors
    again = grade_completions([_completion(n) for n in reversed(names)], [_task(n) for n in reversed(names)],
                              options, grader)
    assert [line["reason"] for line in first + again] == ["ok"] * 4, first + again
    assert [line["reference_reused"] for line in again] == [True, True]
    assert {line["reference_worker_pid"] for line in first} == {line["reference_worker_pid"] for line in again}


def test_an_unreachable_cluster_is_one_line_and_exit_2(folder, tmp_path):
    dataset, solutions = folder
    out = tmp_path / "never.jsonl"
    env = {**os.environ, "RAY_ADDRESS": "127.0.0.1:1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "opgen", "grade", "--dataset", str(dataset), "--solutions",
                           str(solutions), "--executor", "ray", "--device", "cpu", "--out", str(out)],
                          capture_output=True, text=True, env=env, cwd=REPO)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == ["opgen: error: machine fault: the Ray cluster at 127.0.0.1:1 "
                                                "(RAY_ADDRESS) cannot be reached: Connection refused"]
    assert not out.exists() or not out.read_text()


def test_route_keeps_a_task_together_and_where_it_went_before():
    preferred: dict[str, int] = {}
    queues = route(["a", "b", "a", "c", "b", "a"], [0, 1], preferred)
    assert sorted(map(sorted, queues.values())) == [[0, 2, 5], [1, 3, 4]]   # a alone on one actor, b and c on the other
    assert route(["c", "b", "a"], [0, 1], preferred) == {preferred["a"]: deque([2]), 1 - preferred["a"]: deque([0, 1])}


def test_route_splits_a_task_larger_than_a_fair_share_and_steal_takes_the_tail():
    queues = route(["a"] * 5, [0, 1, 2], {})
    assert sorted(len(queue) for queue in queues.values()) == [1, 2, 2]
    longest = max(queues, key=lambda actor: len(queues[actor]))
    thief = min(queues, key=lambda actor: len(queues[actor]))
    tail = queues[longest][-1]
    assert steal(queues, thief, 1) == [tail] and tail not in queues[longest]
    assert steal(queues, thief, 5, allowed=lambda index: False) == []
