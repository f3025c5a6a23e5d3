"""Grading in sandboxed workers: one solution (`grade_task`), or a folder of them against a dataset (`grade_folder`),
with the machine's failures told apart from the solutions'."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from tqdm import tqdm

from opgen.errors import MachineFault, UsageError
from opgen.grading.beside_solution import GRADE_FUNCTION, PROBE_FUNCTION
from opgen.grading.beside_solution.configs import derive_sizes, input_configs
from opgen.grading.extensions import compile_stage, extension_settings, writable_for
from opgen.grading.milestones import milestone_reward
from opgen.grading.reference import add_reference_timings
from opgen.grading.scan import static_verdict
from opgen.grading.summary import summarize_grades
from opgen.grading.tasks import dataset_rows, read_source, solution_files
from opgen.jsonl import read_jsonl
from opgen.sandbox.confine import CONFINE_ENV, confined_on
from opgen.sandbox.faults import ErrorRun, first_line, machine_fault
from opgen.sandbox.gpus import gpu_slot_envs
from opgen.sandbox.pool import (
    SCRATCH_MB,
    KeptPools,
    SandboxPool,
    SandboxResult,
    is_out_of_memory,
    out_of_memory,
    over_memory_limit,
    warn_once,
)

CONFINEMENT_HINT = ("OPGEN_SANDBOX_CONFINE_SKIP names pieces of the confinement to leave out, and each one left out "
                    "is said on stderr (docs/grading.md, 'The workers' confinement')")
_POOLS = KeptPools()


@dataclass(frozen=True)
class GradeOptions:
    """How to grade: the device, the draws and their seed, timing (default: on CUDA only) and the compile baseline
    (default: with timing on CUDA), the trial plan, the sandbox's limits and workers."""

    device: str = "cuda"
    draws: int = 5
    seed: int = 0
    timing: bool | None = None
    compile_baseline: bool | None = None
    warmups: int = 10
    trials: int = 100
    min_trials: int = 10
    timeout_s: float = 300.0
    memory_mb: int | None = None      # resident memory limit per worker (MB); None or 0: none
    workers: int = 1
    kernels_only: bool = False        # CUDA-Agent's rule: no PyTorch compute operators in the solution's forward
    breakdown: bool = False           # with timing: where the solution's and the reference's time goes, kernel by kernel
    compile_timeout_s: float = 600.0  # seconds to compile a solution's C++/CUDA extensions on a CPU worker
    extensions_dir: str | None = None  # where extensions are built (default: $OPGEN_EXTENSIONS_DIR, else a temp folder)
    reuse_reference: bool = True      # time each task's reference once per process, apart from any solution
    scratch_mb: int = SCRATCH_MB      # what a solution may write during its grade (its scratch folder, any one file)

    def __post_init__(self) -> None:
        if self.device not in ("cuda", "cpu"):
            raise UsageError(f"device must be cuda or cpu, not {self.device!r}")
        if self.draws < 1:
            raise UsageError("draws must be at least 1")
        if self.trials < 1 or self.warmups < 0 or self.min_trials < 1:
            raise UsageError("trials and min_trials must be at least 1, warmups at least 0")
        if self.timeout_s <= 0 or self.compile_timeout_s <= 0 or self.workers < 1:
            raise UsageError("the timeouts must be above 0 and workers at least 1")
        if self.scratch_mb < 1:
            raise UsageError("scratch_mb must be at least 1")

    @property
    def timed(self) -> bool:
        return self.device == "cuda" if self.timing is None else self.timing

    @property
    def with_compile(self) -> bool:
        return self.timed and (self.device == "cuda" if self.compile_baseline is None else self.compile_baseline)


def payload_for(task: dict, solution_code: str, options: GradeOptions, threads: int) -> dict:
    return {"task": task["code"], "solution": solution_code, "device": options.device, "seed": options.seed,
            "draws": options.draws, "configs": [c.as_dict() for c in input_configs(task)],
            "derive_sizes": derive_sizes(task),
            "atol": task.get("atol"), "rtol": task.get("rtol"), "timing": options.timed,
            "compile_baseline": options.with_compile, "warmups": options.warmups, "trials": options.trials,
            "min_trials": options.min_trials, "threads": threads, "kernels_only": options.kernels_only,
            "breakdown": options.breakdown and options.timed, "extensions": extension_settings(options),
            "reference_timing": "apart" if options.reuse_reference and options.timed else "here"}


def solution_pool(options: GradeOptions, workers: int, **settings) -> SandboxPool:
    """Confined workers that run solutions on the options' device (opgen/sandbox/confine.py, `confined_on`)."""
    confined = confined_on(options.device)
    if not confined and os.environ.get(CONFINE_ENV) != "0":
        warn_once(f"the grading workers' confinement is off on {options.device} until it is verified there "
                  f"({CONFINE_ENV}=1 turns it on): solution code may signal other processes, reach the network, "
                  "and read and write what its user may")
    return SandboxPool(workers, options.timeout_s, _memory_mb(options), confined=confined,
                       writable=writable_for(options), scratch_mb=options.scratch_mb,
                       slot_envs=gpu_slot_envs(options.device), **settings)


def grading_pool(options: GradeOptions) -> SandboxPool:
    """The grading workers, kept for the life of this process (a trainer's repeated calls skip their start-up)."""
    key = (options.device, options.workers, float(options.timeout_s), _memory_mb(options), writable_for(options),
           options.scratch_mb)
    return _POOLS.get(key, lambda: solution_pool(options, options.workers, threads=worker_threads(options)))


def _memory_mb(options: GradeOptions) -> int | None:
    return options.memory_mb or None


def static_line(solution_code: str, options: GradeOptions) -> dict | None:
    found = static_verdict(solution_code, kernels_only=options.kernels_only)
    if found is None:
        return None
    return {"correct": False, "reason": found[0], "detail": found[1]}


def _line(result: SandboxResult) -> dict:
    """The grade of one sandbox result: the worker's dict, or the sandbox's own verdict (timeout, crash, memory).
    Running out of memory, the solution's or the task's, reads `out_of_memory` (and is judged again alone)."""
    if result.status == "ok":
        line = {**result.value, "worker_pid": result.pid}
        if line["reason"] in ("exec_error", "reference_error") and is_out_of_memory(line.get("detail")):
            line["reason"] = "out_of_memory"
        return line
    if over_memory_limit(result) or out_of_memory(result, "detail"):
        reason = "out_of_memory"
    elif result.status in ("timeout", "crash"):
        reason = result.status
    elif result.status == "forged":   # the solution wrote a verdict of its own on the worker's channel
        reason = "tampering"
    else:   # the grading function raised: what the solution left behind broke it
        reason = "exec_error"
    return {"correct": False, "reason": reason, "detail": result.detail[-2000:]}


def run_grades(payloads: list[dict], options: GradeOptions, progress: bool = False) -> list[dict]:
    """Grade lines of `payloads`, in order. Extensions are compiled first on CPU workers (opgen/grading/extensions.py):
    a solution whose compile fails never reaches a grading worker. A line whose error might be the machine's is
    checked with a probe of the device in a fresh worker: MachineFault when the device fails it, else the solution's
    verdict stands."""
    if not payloads:
        return []
    failed = compile_stage(payloads, options)
    todo = [i for i in range(len(payloads)) if i not in failed]
    results = grading_pool(options).run_many(GRADE_FUNCTION, [payloads[i] for i in todo], progress=progress)
    lines: list[dict] = [failed.get(i) for i in range(len(payloads))]  # type: ignore[misc]
    for index, result in zip(todo, results):
        lines[index] = _line(result)
    crowded = [i for i in todo if lines[i]["reason"] == "out_of_memory"]
    if crowded:   # judged again alone in a fresh worker: the memory a neighbour or a predecessor held is not its fault
        with solution_pool(options, 1, max_tasks_per_worker=1) as pool:
            for index, result in zip(crowded, pool.run_many(GRADE_FUNCTION, [payloads[i] for i in crowded])):
                lines[index] = _line(result)
    add_reference_timings(payloads, lines, options.timeout_s, _memory_mb(options))
    for index, line in enumerate(lines):
        if payloads[index].get("compiled") is not None:
            line["compiled"] = payloads[index]["compiled"]
    for line in lines:
        if line.get("machine_suspect") or (line["reason"] in ("crash", "exec_error", "reference_error")
                                          and machine_fault(line.get("detail"))):
            require_healthy_device(options, line.get("detail"))
        line.pop("machine_suspect", None)
    return lines


def require_healthy_device(options: GradeOptions, message: str | None) -> None:
    """MachineFault unless a trivial computation succeeds on the device in a fresh worker confined as the grading
    workers are; when only an unconfined one succeeds, the fault names the confinement (the device works, but not
    from where solutions run)."""
    def probe(confined: bool) -> SandboxResult:
        pool = solution_pool(options, 1, max_tasks_per_worker=1) if confined else \
            SandboxPool(1, 120.0, None, max_tasks_per_worker=1, slot_envs=gpu_slot_envs(options.device))
        with pool:
            return pool.run_many(PROBE_FUNCTION, [{"device": options.device}])[0]

    confined = probe(confined=True)
    if confined.status == "ok" and confined.value.get("ok"):
        return
    detail = first_line(message) or first_line(confined.detail)
    free = probe(confined=False)
    if free.status == "ok" and free.value.get("ok"):
        raise MachineFault(f"the device works, but not from a confined grading worker ({detail}); "
                           f"{CONFINEMENT_HINT}")
    raise MachineFault(f"{machine_fault(message) or 'the device failed a trivial computation'}: {detail}")


class LocalGrader:
    """Grades batches in this machine's sandbox workers (a Ray cluster's: opgen/grading/ray_grader.py)."""

    @staticmethod
    def run_grades(payloads: list[dict], options: GradeOptions, progress: bool = False) -> list[dict]:
        return run_grades(payloads, options, progress)

    @staticmethod
    def require_healthy_device(options: GradeOptions, message: str | None) -> None:
        require_healthy_device(options, message)


LOCAL = LocalGrader()


def grade_task(task: dict, solution_code: str, options: GradeOptions, static_scan: bool = True) -> dict:
    """The grade of one solution for one task (a dict with `id`, `code`, and optionally the row's `atol`/`rtol` and
    recorded timings). UsageError when the task itself fails; MachineFault when the machine does. `static_scan`
    False skips the source checks, to try the run-time defences behind them alone (tests)."""
    started = time.perf_counter()
    line = static_line(solution_code, options) if static_scan else None
    if line is None:
        [line] = run_grades([payload_for(task, solution_code, options, worker_threads(options))], options)
    if line["reason"] == "reference_error":
        raise UsageError(f"task {task.get('id')}: {line.get('detail')}")
    return finish_line(line, task, started)


def worker_threads(options: GradeOptions) -> int:
    return max(1, (os.cpu_count() or 1) // options.workers)


def finish_line(line: dict, task: dict, started: float | None = None) -> dict:
    """The line as published: the task's id first, the row's recorded timings beside the new ones, and (`started`)
    the seconds the grade took."""
    finished = {"task": task.get("id"), **{k: _json_number(v) for k, v in line.items()}}
    finished["reward"] = milestone_reward(finished)
    for key in ("eager_ms", "compile_ms", "hardware"):
        if task.get(key) is not None:
            finished[f"recorded_{key}"] = task[key]
    if started is not None:
        finished["seconds"] = round(time.perf_counter() - started, 3)
    return finished


def _json_number(value):
    """JSON has no NaN or infinity: such a float becomes null."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


@dataclass
class FolderReport:
    """A folder of solutions graded against a dataset: the summary figures and where the lines went."""

    figures: dict
    out: str | None

    def as_dict(self) -> dict:
        return asdict(self)


def grade_folder(dataset: str, solutions: str | Path, options: GradeOptions, *, out: str | None = None,
                 config: str = "default", download_to: str | None = None, progress: bool = True,
                 grader=LOCAL) -> FolderReport:
    """Grade `solutions/<id>.py` for every task of `dataset` that has one, `options.workers` at a time, writing a
    JSON line per task to `out` (stdout when None) as they finish; a rerun with the same `out` skips the ids already
    there. The figures cover every task of the dataset (those with no solution file count as not attempted).
    `grader` grades the batches (LOCAL, or a Ray cluster's: opgen/grading/graders.py)."""
    rows = dataset_rows(dataset, config, download_to)
    files = solution_files(solutions)
    ids = {row["id"] for row in rows}
    strays = sorted(set(files) - ids)
    if strays:
        print(f"opgen grade: {len(strays)} solution files name no task of the dataset (e.g. {strays[0]}.py)",
              file=sys.stderr)
    previous = _previous_lines(out, ids)
    todo = [row for row in rows if row["id"] in files and row["id"] not in previous]
    if previous:
        print(f"opgen grade: resuming: {len(previous)} tasks already graded in {out}", file=sys.stderr)
    started = time.perf_counter()
    new_lines: list[dict] = []
    chunk = max(4, 2 * getattr(grader, "workers", options.workers))
    faults = ErrorRun()
    with _writer(out) as write, tqdm(total=len(todo), file=sys.stderr, disable=not progress, unit="task",
                                     dynamic_ncols=True) as bar:
        for start in range(0, len(todo), chunk):
            part = todo[start:start + chunk]
            lines = _grade_rows(part, files, options, faults, grader)
            for line in lines:
                write(line)
                new_lines.append(line)
            bar.update(len(part))
    wall = time.perf_counter() - started
    figures = summarize_grades([*previous.values(), *new_lines], len(rows))
    figures.update(graded_now=len(new_lines), wall_s=round(wall, 1),
                   seconds_per_task=round(wall / len(new_lines), 3) if new_lines else None)
    return FolderReport(figures, out)


def _grade_rows(rows: list[dict], files: dict[str, Path], options: GradeOptions, faults: ErrorRun,
                grader=LOCAL) -> list[dict]:
    codes, lines = [], []
    for row in rows:
        try:
            code = read_source(files[row["id"]], "solution file")
        except UsageError as error:   # one unreadable file is its own verdict, not the end of the run
            code = ""
            lines.append({"correct": False, "reason": "parse_error", "detail": str(error)})
        else:
            lines.append(static_line(code, options))
        codes.append(code)
    sandboxed = [i for i, line in enumerate(lines) if line is None]
    threads = worker_threads(options)
    graded = grader.run_grades([payload_for(rows[i], codes[i], options, threads) for i in sandboxed], options)
    for index, line in zip(sandboxed, graded):
        lines[index] = line
    finished = []
    for row, line in zip(rows, lines):
        finished.append(finish_line({"solution": files[row["id"]].name, **line}, row))
        chain = tuple(row.get("families") or (row["id"],))
        # one error after another on different tasks, all the same: the machine's, unless a probe says it is fine
        if faults.add(bool(line["correct"]), line.get("detail") if not line["correct"] else None, chain):
            grader.require_healthy_device(options, line.get("detail"))
            faults.add(True, None, ())   # the device is fine: the run starts again
    return finished


def _previous_lines(out: str | None, ids: set[str]) -> dict[str, dict]:
    if not out or not Path(out).is_file():
        return {}
    return {line["task"]: line for line in read_jsonl(out) if isinstance(line, dict) and line.get("task") in ids}


class _writer:
    """Appends JSON lines to a file (flushed each time, so a killed run keeps what it graded), or prints them."""

    def __init__(self, out: str | None):
        self.out = out
        self.handle = None

    def __enter__(self):
        if self.out:
            Path(self.out).parent.mkdir(parents=True, exist_ok=True)
            self.handle = open(self.out, "a", encoding="utf-8")
        return self.write

    def write(self, line: dict) -> None:
        text = json.dumps(line)
        if self.handle is None:
            print(text, flush=True)
        else:
            self.handle.write(text + "\n")
            self.handle.flush()

    def __exit__(self, *exc) -> None:
        if self.handle is not None:
            self.handle.close()
