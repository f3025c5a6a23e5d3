"""`opgen grade` on the CPU: every cheat of the hack corpus (tests/grade_corpus) rejected with its reason, every honest
solution passing, the run-time defences alone (static scan skipped), the command's exit statuses, a folder of
solutions against a published folder with its summary and resumption."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import opgen
from opgen.cli import main
from opgen.grading.beside_solution.guard import Settings
from opgen.grading.beside_solution.integrity import Snapshot
from opgen.grading.beside_solution.worker import Grading
from opgen.grading.run import GradeOptions, grade_task, payload_for
from opgen.grading.scan import static_verdict
from opgen.grading.summary import summarize_grades
from opgen.grading.tasks import reference_solution

CORPUS = Path(__file__).parent / "grade_corpus"
TASKS = CORPUS / "tasks"
# Timing on the CPU (host clock), with a short plan: the timed path and the checks after it run, not the GPU's figures.
CPU_TIMED = {"device": "cpu", "timing": True, "warmups": 1, "trials": 3, "min_trials": 3}


def headers(path: Path) -> dict[str, str]:
    """The `# key: value` lines at the top of a corpus solution (`# gpu` alone reads as gpu: "")."""
    found = {}
    for line in path.read_text().splitlines():
        match = re.match(r"#\s*(\w+)(?::\s*(.*))?$", line)
        if not match:
            break
        found[match.group(1)] = (match.group(2) or "").strip()
    return found


# Corpus files graded by a test of their own, with more asserted: not graded again by the corpus-wide test.
GRADED_APART = {"cheat_memo_by_value"}   # test_every_timed_trial_runs_on_fresh_values (~25 s a grade here)


def corpus(selected=lambda head: True) -> list:
    cases = []
    for path in sorted((CORPUS / "solutions").glob("*.py")):
        head = headers(path)
        if "gpu" in head or not selected(head) or path.stem in GRADED_APART:
            continue
        marks = [pytest.mark.heavy] if "compiled" in path.stem else []   # one torch.compile: ~15 s on a CPU
        cases.append(pytest.param(path, head, id=path.stem, marks=marks))
    return cases


def grade_file(path: Path, head: dict, **options) -> dict:
    return opgen.grade(path, task=TASKS / f"{head['task']}.py", **{**CPU_TIMED, **options})


@pytest.mark.parametrize("path,head", corpus())
def test_corpus_solution_gets_its_reason(path, head):
    result = grade_file(path, head)
    assert result["reason"] == head["expect"], result
    assert result["correct"] is (head["expect"] == "ok")
    if result["correct"]:   # timed on the host clock, and checked after it
        assert result["solution_ms"] > 0 and result["eager_ms"] > 0 and result["speedup_eager"] > 0
        assert result["tolerance_ratio"] <= 1.0 and result["atol"] == result["rtol"] == 1e-2
    elif result["reason"] == "mismatch":
        assert result["tolerance_ratio"] > 1.0 and result["detail"].startswith("published draw ")
    elif result["reason"] == "non_finite":
        assert result["non_finite_values"] == 4 * 32 and result["detail"].startswith("published draw ")


def test_every_timed_trial_runs_on_fresh_values():
    """A solution that caches its output by a fingerprint of the input values pays its compute on every trial."""
    path = CORPUS / "solutions" / "cheat_memo_by_value.py"
    result = grade_file(path, headers(path), trials=5, min_trials=5)
    assert result["correct"], result
    assert result["speedup_eager"] < 0.2, result   # its kernel ran on every trial: many times the task's own work


@pytest.mark.parametrize("task", ["linear_gelu", "matmul_scale", "pair_of_outputs", "named_outputs"])
def test_the_reference_itself_passes(task):
    result = opgen.grade(solution_code=reference_solution((TASKS / f"{task}.py").read_text()),
                         task=TASKS / f"{task}.py", **CPU_TIMED)
    assert result["reason"] == "ok" and result["max_abs_error"] == 0.0 and result["speedup_eager"] > 0, result


@pytest.mark.parametrize("path,head", corpus(lambda head: "runtime" in head))
def test_runtime_defence_alone_catches_the_cheat(path, head):
    """The static scan skipped: what the sandboxed run finds by itself."""
    task = {"id": head["task"], "code": (TASKS / f"{head['task']}.py").read_text()}
    result = grade_task(task, path.read_text(), GradeOptions(**CPU_TIMED), static_scan=False)
    assert result["reason"] == head["runtime"], result


def test_a_worker_that_saw_tampering_is_not_used_again():
    task = {"id": "linear_gelu", "code": (TASKS / "linear_gelu.py").read_text()}
    honest = reference_solution(task["code"])
    options = GradeOptions(device="cpu")
    first = grade_task(task, honest, options)
    again = grade_task(task, honest, options)
    assert first["worker_pid"] == again["worker_pid"]   # workers are shared between grades ...
    cheat = grade_task(task, (CORPUS / "solutions" / "cheat_patch_functional.py").read_text(), options,
                       static_scan=False)
    after = grade_task(task, honest, options)
    assert cheat["reason"] == "tampering" and cheat["worker_pid"] == again["worker_pid"]
    assert after["reason"] == "ok" and after["worker_pid"] != cheat["worker_pid"]   # ... but not this one


def test_a_finalizer_cannot_patch_the_next_grade_in_its_worker():
    """A model whose attribute's `__del__` patches torch.stack (the comparison's) once the grader drops it: the
    grader frees the model and collects before its last guard check, so the patch is this grade's `tampering`, and a
    wrong solution graded next in the same pool is still wrong (it passes as correct when the grader collects only after its last check)."""
    task = {"id": "linear_gelu", "code": (TASKS / "linear_gelu.py").read_text()}
    options = GradeOptions(device="cpu")
    bomb = grade_task(task, (CORPUS / "solutions" / "cheat_finalizer_patch.py").read_text(), options)
    zeros = grade_task(task, (CORPUS / "solutions" / "cheat_zeros.py").read_text(), options, static_scan=False)
    assert (bomb["reason"], bomb["detail"]) == ("tampering", "torch.stack was replaced or deleted")
    assert zeros["reason"] == "mismatch"


LEFT_RUNNING = {
    "thread": "        threading = getattr(torch, 's' + 'ys').modules['threading']\n"
              "        threading.Thread(target=threading.Event().wait, args=(600,), daemon=True).start()\n",
    # no `threading.Thread`: `threading.enumerate` does not list it, the interpreter's own list of threads does
    "raw thread": "        modules = getattr(torch, 's' + 'ys').modules\n"
                  "        wait = modules['threading'].Event().wait\n"
                  "        modules['_thread'].start_new_thread(lambda: wait(600), ())\n",
    "timer": "        signal = getattr(torch, 's' + 'ys').modules['signal']\n"
             "        signal.signal(signal.SIGALRM, lambda *args: None)\n"
             "        signal.setitimer(signal.ITIMER_REAL, 60)\n",
}


@pytest.mark.parametrize("what", sorted(LEFT_RUNNING))
def test_a_worker_left_with_a_thread_or_a_timer_runs_no_other_grade(what):
    """What a solution leaves running (reached past the static scan by a computed name) could act inside a later
    grade in the same worker: that worker answers, then exits. A timer (its handler is the solution's code) runs
    beside the grader's checks and timing, and ends the grade; a thread that runs only library code (a wait) does
    not (cheat_background_load is one that runs the solution's)."""
    task = {"id": "linear_gelu", "code": (TASKS / "linear_gelu.py").read_text()}
    honest = reference_solution(task["code"])
    leaving = honest.replace("        super().__init__()\n", "        super().__init__()\n" + LEFT_RUNNING[what], 1)
    assert leaving != honest
    options = GradeOptions(device="cpu")
    before = grade_task(task, honest, options)
    left = grade_task(task, leaving, options)
    after = grade_task(task, honest, options)
    if what == "timer":
        assert left["reason"] == "tampering" and "an interval timer running beside" in left["detail"], left
    elif what == "raw thread":   # its function is the solution's code
        assert left["reason"] == "tampering" and "a thread started without `threading`" in left["detail"], left
    else:
        assert left["reason"] == "ok", left
    assert left["worker_pid"] == before["worker_pid"]
    assert after["reason"] == "ok" and after["worker_pid"] != left["worker_pid"]


def test_sandbox_time_limit_is_a_verdict():
    task = {"id": "linear_gelu", "code": (TASKS / "linear_gelu.py").read_text()}
    spinning = ("import torch.nn as nn\nclass ModelNew(nn.Module):\n    def __init__(self, *args):\n"
                "        super().__init__()\n    def forward(self, x):\n        while True:\n            pass\n")
    result = grade_task(task, spinning, GradeOptions(device="cpu", timeout_s=4))
    assert result["reason"] == "timeout" and result["correct"] is False


def test_static_scan_allows_kernel_imports_and_settings():
    kernel = ("import torch\nimport triton\nimport triton.language as tl\n"
              "from torch.utils.cpp_extension import load_inline\ntorch.backends.cuda.matmul.allow_tf32 = True\n"
              "class ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        setattr(self, 'scale', 2.0)\n")
    assert static_verdict(kernel) is None
    aliased = "import torch\nev = torch.cuda.Event\nev.elapsed_time = None\nclass ModelNew: pass\n"
    assert static_verdict(aliased) == ("tampering", "assignment to ev.elapsed_time")
    aten = "import torch\nlib = torch.library.Library('aten', 'IMPL')\nclass ModelNew: pass\n"
    assert static_verdict(aten)[0] == "tampering"


def test_cli_exit_statuses(tmp_path, capsys):
    solutions, task = CORPUS / "solutions", str(TASKS / "linear_gelu.py")
    honest = tmp_path / "honest.py"
    honest.write_text(reference_solution((TASKS / "linear_gelu.py").read_text()))
    assert main(["grade", "--task", task, "--solution", str(honest), "--device", "cpu"]) == 0
    assert json.loads(capsys.readouterr().out)["correct"] is True
    assert main(["grade", "--task", task, "--solution", str(solutions / "cheat_zeros.py"), "--device", "cpu"]) == 1
    assert json.loads(capsys.readouterr().out)["reason"] == "mismatch"
    bad = [["--task", task, "--solution", str(tmp_path / "missing.py")],
           ["--task", str(TASKS / "broken.py"), "--solution", str(honest)],
           ["--solutions", str(solutions)],
           ["--task", task, "--dataset", str(tmp_path), "--solution", str(solutions / "cheat_zeros.py")],
           ["--task", task, "--solution", str(solutions / "cheat_zeros.py"), "--draws", "0"]]
    for args in bad:
        assert main(["grade", *args, "--device", "cpu"]) == 2, args
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == len(bad) and all(line.startswith("opgen: error:") for line in errors)
    assert "the task itself fails" in errors[1]


def published_folder(path: Path, tasks: dict[str, str]) -> Path:
    """A dataset folder as `datasets.load_dataset` reads it: one parquet shard and a card."""
    (path / "data").mkdir(parents=True)
    table = pa.table({"id": list(tasks), "code": list(tasks.values()), "atol": [1e-2] * len(tasks),
                      "rtol": [1e-2] * len(tasks), "eager_ms": [1.5] * len(tasks)})
    pq.write_table(table, path / "data" / "train-00000-of-00001.parquet")
    (path / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n"
                                    "    path: data/train-*\n---\n# grade test\n")
    return path


def test_folder_of_solutions_against_a_published_folder(tmp_path, capsys):
    linear, matmul = (TASKS / "linear_gelu.py").read_text(), (TASKS / "matmul_scale.py").read_text()
    folder = published_folder(tmp_path / "dataset", {"t-linear": linear, "t-matmul": matmul, "t-unsolved": linear})
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    (solutions / "t-linear.py").write_text(reference_solution(linear))
    (solutions / "t-matmul.py").write_text((CORPUS / "solutions" / "cheat_zero_inputs.py").read_text())
    (solutions / "t-stray.py").write_text("class ModelNew: pass\n")
    out, summary = tmp_path / "grades.jsonl", tmp_path / "summary.json"
    args = ["grade", "--dataset", str(folder), "--solutions", str(solutions), "--out", str(out), "--summary",
            str(summary), "--device", "cpu", "--workers", "2", "--no-progress"]
    assert main(args) == 0
    lines = {line["task"]: line for line in map(json.loads, out.read_text().splitlines())}
    assert {k: v["reason"] for k, v in lines.items()} == {"t-linear": "ok", "t-matmul": "input_modified"}
    assert lines["t-linear"]["recorded_eager_ms"] == 1.5 and lines["t-linear"]["solution"] == "t-linear.py"
    figures = json.loads(summary.read_text())
    assert (figures["tasks"], figures["attempted"], figures["not_attempted"], figures["correct"]) == (3, 2, 1, 1)
    assert figures["pass_rate"] == pytest.approx(1 / 3) and figures["pass_rate_attempted"] == 0.5
    assert figures["fast_p_eager"]["0"] == pytest.approx(1 / 3) and figures["fast_p_eager"]["1"] is None  # untimed
    captured = capsys.readouterr()
    assert "1 solution files name no task" in captured.err and "not attempted" in captured.out
    assert main(args) == 0   # a rerun grades nothing again
    assert len(out.read_text().splitlines()) == 2 and "resuming: 2 tasks" in capsys.readouterr().err
    row = opgen.grade(solutions / "t-linear.py", dataset=str(folder), id="t-linear", device="cpu")
    assert row["reason"] == "ok" and row["recorded_eager_ms"] == 1.5


def test_summary_figures():
    lines = [{"correct": True, "reason": "ok", "speedup_eager": 2.0, "speedup_compile": 0.5},
             {"correct": True, "reason": "ok", "speedup_eager": 0.5, "speedup_compile": 1.2},
             {"correct": False, "reason": "mismatch", "speedup_eager": None}]
    figures = summarize_grades(lines, tasks=4)
    assert (figures["attempted"], figures["not_attempted"], figures["pass_rate"]) == (3, 1, 0.5)
    assert figures["faster_than_eager"] == 0.25 and figures["faster_than_compile"] == 0.25
    assert figures["geomean_speedup_eager"] == pytest.approx(1.0)
    assert figures["geomean_speedup_compile"] == pytest.approx((0.5 * 1.2) ** 0.5)
    assert figures["fast_p_eager"] == {"0": 0.5, "0.5": 0.25, "0.8": 0.25, "1": 0.25, "1.5": 0.25, "2": 0.0}
    assert figures["reasons"] == {"ok": 2, "mismatch": 1}


GRADER_CHANGES = {
    "the grader's atol was replaced": "grader.atol = 1e30",
    "the reference model's weights were replaced or written": "grader.reference.linear.weight.data.zero_()",
    "the grader's method judge was shadowed": "grader.judge = lambda *args, **kwargs: None",
    "the grade's result was written": "grader.result['solution_ms'] = 1e-9",
    "the grader's configs was changed": "grader.configs.pop()",
    "the settings the reference runs under were changed": "grader.settings.threads = 1",
    "the task's functions or sizes were replaced": "grader.namespace['batch'] = 8",
}


@pytest.mark.parametrize("detail", sorted(GRADER_CHANGES))
def test_what_a_stretch_of_the_solutions_code_changed_in_the_grade_is_named(detail):
    """The grade's state recorded before a stretch of the solution's code, against a grade changed as a route the
    watch misses would let it (each a way a zeros solution would pass, or be timed as fast); nothing changed, nothing
    named."""
    task = {"id": "linear_gelu", "code": (TASKS / "linear_gelu.py").read_text()}
    options = GradeOptions(device="cpu")
    grader = Grading(payload_for(task, reference_solution(task["code"]), options, 1))
    grader.settings = Settings()
    grader.load_task()
    before = Snapshot(grader)
    assert before.changes(grader) == []
    exec(GRADER_CHANGES[detail], {"grader": grader})  # noqa: S102 - the change under test
    assert before.changes(grader)[:1] == [detail]


def test_a_frame_taken_by_the_solution_itself_ends_the_grade_where_it_was_taken():
    result = grade_file(CORPUS / "solutions" / "cheat_frame_tolerance.py", {"task": "linear_gelu"})
    assert result["reason"] == "tampering" and result["detail"] == (
        "published draw 0: the solution's code took sys._getframe, a route into the grader's objects"), result


@pytest.mark.parametrize("forward", [
    "        self.calls = getattr(self, 'calls', 0) + 1\n        return torch.nn.functional.gelu(self.linear(x)) * self.calls\n",
    "        return torch.nn.functional.dropout(torch.nn.functional.gelu(self.linear(x)), 0.5, training=True)\n",
], ids=["a counter kept in forward", "dropout left training"])
def test_a_task_that_differs_from_itself_is_the_task_s_fault(forward):
    """Two runs of the reference on the same draw must agree: else every honest solution would get `mismatch`."""
    from opgen.errors import UsageError

    task = (TASKS / "linear_gelu.py").read_text().replace(
        "        return torch.nn.functional.gelu(self.linear(x))\n", forward)
    with pytest.raises(UsageError, match="the task itself fails: two runs on the same inputs differ"):
        opgen.grade(solution_code=reference_solution(task), task_code=task, device="cpu")
