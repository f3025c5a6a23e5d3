"""The streaming build: timing overlaps validation, yet the dataset is the same as stage by stage, and a build
killed while both run resumes to the same dataset. Timed on the CPU (`cpu_timing`), so CI runs the same path."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from opgen.pipeline.rundir import FAULT_ENV
from tests.conftest import KERNELBENCH as KB
from tests.conftest import REPO

BUILD = """
import sys
from opgen.pipeline.build import Build, BuildConfig, run_build
from opgen.pipeline.executors import LocalExecutor
if __name__ == "__main__":
    if "noskip" in sys.argv[5:]:  # every shard runs to the end, also those whose survivors can only be surplus
        Build._skip_unneeded = lambda self: None
    if "held" in sys.argv[5:]:  # every execute and timing job waits up to 3 s before its work, unless asked to stop
        from dataclasses import replace
        import opgen.pipeline.build as build_module
        from opgen.pipeline.stages import execute_shard, time_shard

        def held(fn):
            def run(payload):
                payload["stop"].wait(3.0)
                return fn(payload)
            return run

        build_module.EXECUTE = replace(build_module.EXECUTE, fn=held(execute_shard))
        build_module.TIMING = replace(build_module.TIMING, fn=held(time_shard))
    config = BuildConfig(n=5, seed=3, shard_size=2, cpu_timing=True, trials=3, warmups=0, reference=sys.argv[2],
                         planning="rounds" if "rounds" in sys.argv[5:] else "survival")
    executor = LocalExecutor(int(sys.argv[4]))
    timing_workers = 2 if "timinglanes" in sys.argv[5:] else None
    try:
        result = run_build(config, sys.argv[1], executor, progress=False, stream=sys.argv[3] == "stream",
                           timing_workers=timing_workers)
    finally:
        executor.close()
    print(result.tasks, result.stats["throughput"]["busy_s"])
"""


def build(run: Path, mode: str, env: dict | None = None, workers: int = 2,
          extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    script = run.parent / "build_script.py"
    script.write_text(BUILD)
    return subprocess.run([sys.executable, str(script), str(run), str(KB), mode, str(workers), *extra], cwd=REPO,
                          capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=900)


def rows(run: Path) -> list[dict]:
    table = pq.read_table(run / "tasks.parquet", columns=["id", "code", "ops", "data_source"])
    return table.to_pylist()


@pytest.fixture(scope="module")
def streamed(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("streamed") / "run"
    done = build(run, "stream")
    assert done.returncode == 0, done.stderr[-3000:]
    return run


@pytest.mark.heavy
def test_streaming_times_every_survivor_and_reports_busy_time(streamed):
    timed = pq.read_table(streamed / "tasks.parquet").to_pylist()
    assert len(timed) == 5 and all(r["eager_ms"] and r["eager_ms_count"] == 3 for r in timed)
    assert all(r["precision"] == "default" and r["trial_mode"] == "adaptive" for r in timed)
    stats = json.loads((streamed / "stats.json").read_text())
    rates = stats["throughput"]
    assert set(rates["busy_s"]) == {"sample+static", "dedup", "execute", "timing"}
    assert all(seconds > 0 for seconds in rates["busy_s"].values())
    assert rates["gpu_timed_s"] > 0 and rates["gpu_busy_share"] is None   # timed on the CPU: no GPU share
    assert rates["tasks_per_min"] == pytest.approx(60 * 5 / rates["wall_s"], rel=0.01)
    assert rates["candidates_per_min"] == pytest.approx(60 * stats["candidates"] / rates["wall_s"], rel=0.01)
    # two execute workers, busy with candidates for part of the build's wall time
    assert rates["execute_workers"] == 2 and 0 < rates["execute_worker_share"] < 1
    # the workers' CPU seconds over their wall seconds, counted (how near 1 they come is the machine's load: a worker
    # sharing a core with three others gets a quarter of it, so no share below is a fact of the build)
    cores = os.cpu_count() or 1
    assert 0 < rates["execute_cpu_share"] <= cores and 0 < rates["timing_cpu_share"] <= cores
    assert stats["timing"]["trials_histogram"] == {"10": 10}   # eager and compile of 5 tasks, 3 trials each
    # the sustained rate leaves out the time to the first published task
    assert 0 < rates["first_task_s"] < rates["invocation_s"]
    after_first = rates["invocation_s"] - rates["first_task_s"]
    if rates["steady_tasks_per_min"] is None:   # every task came within the last second: no rate to speak of
        assert after_first <= 1.01
    else:
        first_tasks = 5 - rates["steady_tasks_per_min"] * after_first / 60
        assert 1 <= round(first_tasks) <= 5 and abs(first_tasks - round(first_tasks)) < 0.05
    log = (streamed / "logs" / "build.log").read_text()
    assert "GPU busy share" in log and "tasks/min since the first" in log
    # where the time to the first task went: the first timed shard's send, return and its rows' own seconds
    assert re.search(r"first timed shard \d+: sent [\d.]+ s into this call, back [\d.]+ s later; its \d+ row\(s\) "
                     r"[\d.]+ s in their timing workers \(the longest [\d.]+ s", log)
    assert log.count("first timed shard") == 1
    assert '"tasks_per_min"' in log.splitlines()[-1] and '"steady_tasks_per_min"' in log.splitlines()[-1]


@pytest.mark.heavy
def test_stage_by_stage_in_one_execute_lane_gives_the_same_dataset(streamed, tmp_path):
    """The old mode runs as the build did before streaming: one shard at a time on all four workers, and every
    shard to its end; the streaming build would run two lanes of two and skip shards."""
    done = build(tmp_path / "run", "stages", workers=4)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "stage by stage, 1 execute lane(s) of 4 workers" in (tmp_path / "run" / "logs" / "build.log").read_text()
    assert rows(tmp_path / "run") == rows(streamed)
    assert json.loads((tmp_path / "run" / "stats.json").read_text())["skipped_shards"] == 0


@pytest.mark.heavy
def test_the_old_mode_starts_a_top_up_round_only_once_the_previous_round_is_timed(tmp_path):
    """As the build ran before streaming: no two stages at once, so round r+1 is drawn after round r's last timing."""
    run = tmp_path / "run"
    done = build(run, "stages", extra=("rounds",))   # planning by rounds: n x 1.25 from the mix, then top-ups
    assert done.returncode == 0, done.stderr[-3000:]
    plans = sorted((run / "rounds").glob("*/plan.json"))
    assert len(plans) >= 2, "this build needs a top-up round for the check below"
    shards = [[run / "shards" / f"{s['shard']:05d}" for s in json.loads(p.read_text())["shards"]] for p in plans]
    for earlier, later in zip(shards, shards[1:]):
        timed = max((shard / "timing.done").stat().st_mtime for shard in earlier)
        drawn = min((shard / "static.done").stat().st_mtime for shard in later)
        assert drawn >= timed


@pytest.mark.heavy
def test_skipping_shards_that_can_only_add_surplus_leaves_the_dataset_unchanged(streamed, tmp_path):
    """Against a build that skips nothing, timed in a lane per timing worker (one build for both: each gives the
    same dataset as the streamed one)."""
    done = build(tmp_path / "run", "stream", extra=("noskip", "timinglanes"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert rows(tmp_path / "run") == rows(streamed)
    assert "2 timing lane(s)" in (tmp_path / "run" / "logs" / "build.log").read_text()
    timed = pq.read_table(tmp_path / "run" / "tasks.parquet", columns=["eager_ms_count"]).column(0).to_pylist()
    assert timed == [3] * 5
    everything = json.loads((tmp_path / "run" / "stats.json").read_text())
    skipped = json.loads((streamed / "stats.json").read_text())
    assert everything["skipped_shards"] == everything["skipped_candidates"] == 0
    for stats in (everything, skipped):
        assert stats["funnel"]["kept"] == stats["survivors"] + stats["skipped_candidates"]
    # what skipping saves shows in the funnel: no more candidates reach the sandbox or the timing stage
    for stage in ("sandbox", "runtime_window"):
        assert skipped["funnel"]["stages"][stage]["seen"] <= everything["funnel"]["stages"][stage]["seen"]
    assert skipped["surplus"] <= everything["surplus"]
    # scripts/analysis/compare_builds.py agrees, and says what became of each candidate the two runs treated differently
    sys.path.insert(0, str(REPO / "scripts" / "analysis"))
    import compare_builds

    report = compare_builds.compare(streamed, tmp_path / "run")
    assert report["same_rows"] and not report["only_a"] and not report["only_b"] and not report["differing"]
    seen_skipping, seen_all = compare_builds.candidates(streamed), compare_builds.candidates(tmp_path / "run")
    published = {row["id"] for row in rows(streamed)}
    fates = {task: compare_builds.fate(seen_skipping[task], published) for task in seen_skipping}
    assert sum(why == "published" for why in fates.values()) == 5
    assert skipped["skipped_shards"]   # this build skips shards (which the assertions above rely on)
    in_skipped = [task for task, why in fates.items() if why.startswith("in a skipped shard")]
    # what the skipping build never executed, the other one did
    assert in_skipped and all(seen_all[task].verdicts.get("execute") for task in in_skipped
                              if seen_all[task].verdicts.get("dedup", (False,))[0])
    # a task only one run publishes is explained by its fate in the other: here a timed survivor left out
    shorter = tmp_path / "shorter"
    shutil.copytree(streamed, shorter)
    table = pq.read_table(shorter / "tasks.parquet")
    pq.write_table(table.slice(0, table.num_rows - 1), shorter / "tasks.parquet")
    left_out = table.column("id")[table.num_rows - 1].as_py()
    report = compare_builds.compare(streamed, shorter)
    assert not report["same_rows"] and report["in_both"] == 4 and not report["only_b"]
    assert report["only_a"] == {left_out: "surplus (its source's quota was already met by earlier candidates)"}
    assert compare_builds.main(str(streamed), str(shorter)) == 1


@pytest.mark.heavy
def test_running_jobs_of_shards_that_can_only_add_surplus_are_stopped_and_the_dataset_is_unchanged(streamed,
                                                                                                   tmp_path):
    run = tmp_path / "run"
    done = build(run, "stream", workers=4, extra=("held",))
    assert done.returncode == 0, done.stderr[-3000:]
    assert rows(run) == rows(streamed)
    stats = json.loads((run / "stats.json").read_text())
    assert stats["stopped_shards"] >= 1 and stats["skipped_shards"] >= stats["stopped_shards"]
    # what the stopped and skipped shards left unjudged is counted: the funnel's kept are survivors or those
    assert stats["funnel"]["kept"] == stats["survivors"] + stats["skipped_candidates"]
    # a stopped job (execute or timing) marks its stage skipped and stopped, with nothing of what it did
    markers = [(m.parent.name, m.stem, json.loads(m.read_text())) for m in run.glob("shards/*/*.done")]
    stopped = [(shard, stage, marker) for shard, stage, marker in markers if marker.get("stopped")]
    assert len({shard for shard, _, _ in stopped}) == stats["stopped_shards"]
    assert all(marker["skipped"] and stage in ("execute", "timing") for _, stage, marker in stopped)
    for shard, stage, _ in stopped:
        outputs = [f"{stage}.jsonl", *(("timed.jsonl",) if stage == "timing" else ())]
        assert all(not (run / "shards" / shard / name).read_text().strip() for name in outputs)
    # run again: the stopped shards stay skipped, nothing is redone, the same dataset
    again = build(run, "stream", workers=4)
    assert again.returncode == 0, again.stderr[-3000:]
    assert rows(run) == rows(streamed)
    assert json.loads((run / "stats.json").read_text())["stopped_shards"] == stats["stopped_shards"]


@pytest.mark.heavy
def test_killed_while_streaming_resumes_to_the_same_dataset(streamed, tmp_path):
    run = tmp_path / "run"
    for markers in (4, 3):   # killed mid-round with execute and timing jobs in flight, twice
        done = build(run, "stream", {FAULT_ENV: str(markers)})
        assert done.returncode == 137, done.stderr[-3000:]
    done = build(run, "stream")
    assert done.returncode == 0, done.stderr[-3000:]
    assert rows(run) == rows(streamed)
    log = (run / "logs" / "build.log").read_text()
    assert log.count("resuming build") == 2


@pytest.mark.heavy
def test_a_finished_build_run_again_starts_no_timing_pools_and_keeps_its_dataset(streamed, tmp_path, monkeypatch):
    import opgen.pipeline.build as build_module
    from opgen.pipeline.build import BuildConfig, run_build
    from opgen.pipeline.executors import LocalExecutor

    started = []
    monkeypatch.setattr(build_module, "start_kept_pools", lambda *args, **kwargs: started.append(args))
    again = tmp_path / "again"
    shutil.copytree(streamed, again)
    config = BuildConfig(n=5, seed=3, shard_size=2, cpu_timing=True, trials=3, warmups=0, reference=str(KB))
    executor = LocalExecutor(2)
    try:
        result = run_build(config, again, executor, progress=False)
    finally:
        executor.close()
    assert started == [] and result.tasks == 5 and rows(again) == rows(streamed)
    (again / "tasks.parquet").unlink()   # no dataset written yet: the pools start with the build, as before
    executor = LocalExecutor(2)
    try:
        run_build(config, again, executor, progress=False)
    finally:
        executor.close()
    assert len(started) == 1 and rows(again) == rows(streamed)


@pytest.mark.heavy
def test_ray_executor_streams_to_the_same_dataset(streamed, tmp_path):
    """The Ray executor (a local 2-CPU cluster it joins) gives the local executor's dataset, timing included."""
    ray = pytest.importorskip("ray")
    from opgen.pipeline.build import BuildConfig, run_build
    from opgen.pipeline.executors import RayExecutor

    # one GPU declared and none there: the timing stage's request (num_gpus=1) is met, and it times on the CPU
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False)
    try:
        executor = RayExecutor(2)
        config = BuildConfig(n=5, seed=3, shard_size=2, cpu_timing=True, trials=3, warmups=0, reference=str(KB))
        result = run_build(config, tmp_path / "run", executor, progress=False)
        executor.close()
        assert ray.is_initialized()          # a cluster the executor joined is not shut down by it
    finally:
        ray.shutdown()
    assert rows(tmp_path / "run") == rows(streamed)
    assert result.stats["throughput"]["busy_s"]["timing"] > 0 and result.stats["throughput"]["gpu_timed_s"] > 0
    timed = pq.read_table(tmp_path / "run" / "tasks.parquet", columns=["eager_ms_count"]).column(0).to_pylist()
    assert timed == [3] * 5


PROVENANCE = ("timing_method", "timing_warmups", "eager_ms_count", "compile_ms_count", "trial_mode", "precision",
              "matmul_precision", "cudnn_conv_precision", "cudnn_rnn_precision", "hardware", "driver_version",
              "cuda_version", "torch_version", "triton_version", "compile_mode")
GPU_ONLY = ("driver_version", "cuda_version", "triton_version")   # null when timed on the CPU (this test)


@pytest.mark.heavy
def test_published_rows_carry_their_provenance_and_kernelbench_baseline_files(streamed, tmp_path, monkeypatch):
    import datasets
    from huggingface_hub import DatasetCard

    from opgen.publish.folder import publish
    from opgen.records import COLUMN_DOCS
    from tests.test_baselines import assert_kernelbench_shape

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = publish(streamed, "opgen/stream-test", dry_run=True, out=tmp_path / "dataset").folder
    # a cache of its own: `datasets` keys a local folder's cache on the card, and every build of this test
    # publishes a folder of the same name and shape
    rows = datasets.load_dataset(str(folder), split="train", cache_dir=str(tmp_path / "hf-cache")).to_list()
    assert len(rows) == 5 and set(PROVENANCE) <= set(rows[0])
    assert all(r[c] is not None for r in rows for c in PROVENANCE if c not in GPU_ONLY)
    assert {(r["precision"], r["matmul_precision"], r["compile_mode"]) for r in rows} == {("default", "ieee", "default")}
    card = DatasetCard.load(folder / "README.md").text
    assert "## Timing provenance" in card and all(f"| `{c}` | {COLUMN_DOCS[c]} |" in card for c in PROVENANCE)
    # the baseline files publish wrote, read back, against KernelBench's own
    eager_file, compile_file = sorted((folder / "baselines").glob("*.json"))
    eager, compiled = assert_kernelbench_shape(eager_file, "eager"), assert_kernelbench_shape(compile_file, "compile")
    assert set(eager) == set(compiled) == {f"{r['id']}.py" for r in rows}
    for row in rows:
        entry = eager[f"{row['id']}.py"]
        assert (entry["mean"], entry["num_trials"], entry["hardware"]) == (row["eager_ms_mean"], row["eager_ms_count"],
                                                                          row["hardware"])
        assert entry["min"] <= row["eager_ms"] <= entry["max"]


@pytest.mark.parametrize("where", ["below a file", "in /proc"])
def test_unwritable_run_folder_is_one_line_and_status_2(tmp_path, where):
    if where == "in /proc" and not Path("/proc/self").is_dir():
        pytest.skip("no /proc here")
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    out = blocked / "run" if where == "below a file" else Path("/proc/opgen-no-such-run")   # even root cannot write
    done = subprocess.run([sys.executable, "-m", "opgen", "build", "--n", "2", "--out", str(out),
                           "--reference", str(KB), "--no-progress"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "cannot use" in done.stderr


@pytest.mark.heavy
def test_agreement_script_reads_an_unfinished_run_folder_s_timed_survivors(streamed, tmp_path):
    """scripts/analysis/agreement.py on a build cut short: the timed survivors of its shards, the dataset's rows among them."""
    import shutil

    sys.path.insert(0, str(REPO / "scripts" / "analysis"))
    from agreement import read_rows

    cut = tmp_path / "cut"
    shutil.copytree(streamed, cut)
    (cut / "tasks.parquet").unlink()
    survivors = read_rows(str(cut))
    dataset = read_rows(str(streamed))
    assert {r["id"] for r in dataset} <= {r["id"] for r in survivors}
    assert [r["sample_index"] for r in survivors] == sorted(r["sample_index"] for r in survivors)
    assert all(r["eager_ms"] and r["code"] for r in survivors)
    rejected = {json.loads(line)["id"] for line in (streamed / "rejected.jsonl").read_text().splitlines()}
    assert not rejected & {r["id"] for r in survivors}


def test_rejections_for_memory_are_counted_by_stage():
    from opgen.pipeline.report import out_of_memory_by_stage

    rejected = [{"stage": "execute", "reason": "exec_error", "detail": "OutOfMemoryError: CUDA out of memory. Tried"},
                {"stage": "execute", "reason": "exec_error", "detail": "alone in a fresh worker, memory limit exceeded"},
                {"stage": "timing", "reason": "exec_error", "detail": "eager: AcceleratorError: CUDA error: out of memory"},
                {"stage": "execute", "reason": "exec_error", "detail": "RuntimeError: shape mismatch"},
                {"stage": "dedup", "reason": "duplicate", "detail": None}]
    assert out_of_memory_by_stage(rejected) == {"execute": 2, "timing": 1}


@pytest.mark.heavy
def test_opgen_profile_reads_where_the_workers_time_went(streamed, tmp_path, capsys):
    from opgen.analysis import run_profile
    from opgen.cli import main

    out = tmp_path / "profile.json"
    assert main(["profile", str(streamed), "--compare", str(streamed), "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    execute, timing = figures["execute"], figures["timing"]
    stats = json.loads((streamed / "stats.json").read_text())
    assert execute["candidates"] == stats["funnel"]["stages"]["sandbox"]["seen"]
    assert set(execute["check_s_per_candidate_seen"]) >= {"sandbox", "eager", "compile"}
    assert execute["cpu_share"] == stats["throughput"]["execute_cpu_share"] and execute["worker_s_mean"] > 0
    # each worker's first task (which pays for its imports and its first compile) apart from its later ones
    executed = [json.loads(line) for shard in sorted((streamed / "shards").glob("*/execute.jsonl"))
                for line in shard.read_text().splitlines()]
    executed = [line for line in executed if line.get("worker_task")]
    assert execute["worker_processes"] == len({line["worker_pid"] for line in executed}) <= execute["candidates"]
    for name, chosen in (("first", lambda n: n == 1), ("later", lambda n: n > 1)):
        seconds = [line["worker_s"] for line in executed if chosen(line["worker_task"])]
        assert seconds and execute[f"{name}_task_worker_s_mean"] == pytest.approx(sum(seconds) / len(seconds), abs=1e-3)
    assert execute["memory_retry"] == {} and execute["gpu_peak_mb"] == {}   # no GPU memory on the CPU
    assert timing["tasks"] == stats["funnel"]["stages"]["runtime_window"]["seen"] and timing["timing_cpu_s_mean"] > 0
    assert timing["in_window"] == stats["funnel"]["stages"]["runtime_window"]["kept"]
    assert timing["tasks"] <= execute["passed"] <= execute["candidates"]
    # the share of timed compiles inductor's cache served, read from the rows (whatever the cache held before: on
    # the CPU the check's and the timing's compiles differ in thread count, so their kernels do not share entries)
    hits = [row["compile_cache_hit"] for shard in sorted((streamed / "shards").glob("*/timed.jsonl"))
            for row in map(json.loads, shard.read_text().splitlines()) if row.get("compile_cache_hit") is not None]
    assert hits and timing["compile_cache_hit_share"] == round(sum(hits) / len(hits), 3)
    assert timing["hold_profiler_share"] > 0 and timing["hold_trials_share"] > 0
    # the hold's parts from a task's medians and trial counts: 15 profiler calls and the trials with 2 settle calls
    # of eager and compiled (on a GPU the hold holds them all; CPU timings are too noisy for that bound)
    task = {"timed_s": 1.0, "eager_ms": 10.0, "compile_ms": 10.0, "eager_ms_count": 18, "compile_ms_count": 8}
    assert run_profile.hold_parts([task, {"timed_s": 5.0}]) == {"hold_profiler_share": 0.3, "hold_trials_share": 0.3}
    # the ceiling: two in-window tasks and one the window rejected held the GPU 3 s in all: 40 a minute
    held = [{"timed_s": 1.0, "in_window": True}, {"timed_s": 1.5, "in_window": True}, {"timed_s": 0.5}]
    assert run_profile.hold_ceiling(held) == 40.0 and run_profile.hold_ceiling([]) is None
    assert timing["in_window_per_min_ceiling"] == run_profile.hold_ceiling(list(run_profile.timed_records(
        run_profile.RunDir(streamed)).values()))
    # what bounds the rate: the share of the time the timed runs kept the lock closed (a task's wait and hold, 30
    # timed a minute at 0.4 + 0.6 s: half), the checks' own lock wait, the rate into the window over the ceiling
    bounds = run_profile.rate_bounds({"lock_wait_share": 0.55},
                                     {"lock_wait_s_mean": 0.4, "timed_s_mean": 0.6, "in_window_per_min_ceiling": 90.0},
                                     {"timed_per_min": 30.0, "in_window_per_min": 27.0})
    assert bounds == {"lock_closed_share": 0.5, "checks_lock_wait_share": 0.55, "ceiling_share": 0.3}
    assert set(run_profile.rate_bounds({}, {}, {}).values()) == {None}
    assert {key: figures["rates"][key] for key in bounds} == run_profile.rate_bounds(execute, timing, figures["rates"])
    capsys.readouterr()
    assert main(["profile", str(streamed)]) == 0
    closed, at = figures["rates"]["lock_closed_share"], figures["rates"]["ceiling_share"]
    assert closed is not None and at is not None   # a timed build has both, on the CPU too
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith(f"what bounds it: the timed runs kept the GPU's lock closed {closed:.0%} of the time")
    assert last.endswith(f"; into the window at {at:.0%} of the ceiling")
    # a run compared with itself: the same tasks, every ratio 1
    assert figures["compare"]["tasks"] == timing["tasks"]
    assert {figure["median_ratio"] for key, figure in figures["compare"].items() if key != "tasks"} == {1.0}
    assert main(["profile", str(tmp_path)]) == 2 and "not an opgen run folder" in capsys.readouterr().err
    # --since an earlier copy of the build that lacked one shard: that shard's figures alone
    earlier = tmp_path / "earlier"
    shutil.copytree(streamed, earlier)
    def lines(shard: Path, name: str) -> list[str]:
        return (shard / f"{name}.jsonl").read_text().splitlines()

    shard = max((path for path in (earlier / "shards").iterdir() if path.is_dir()), key=lambda p: len(lines(p, "timed")))
    shutil.rmtree(shard)
    spans = json.loads((earlier / "logs" / "clock.json").read_text())
    # the earlier copy was taken a share of the build's time before the end (whole seconds, less than its last span)
    cut = float(max(1, min(int(figures["rates"]["wall_s"] / 2), int(spans[-1][1] - spans[-1][0]) - 1)))
    spans[-1][1] -= cut
    (earlier / "logs" / "clock.json").write_text(json.dumps(spans))
    assert main(["profile", str(streamed), "--since", str(earlier), "--json", str(out)]) == 0
    since = json.loads(out.read_text())
    assert since["rates"]["wall_s"] == cut
    assert since["rates"]["executed_per_min"] == round(60 / cut * since["execute"]["candidates"], 1)
    assert since["rates"]["timed_per_min"] == round(60 / cut * since["timing"]["tasks"], 1)
    assert abs(figures["rates"]["wall_s"] - stats["throughput"]["wall_s"]) < 0.2
    assert since["execute"]["candidates"] == len(lines(streamed / "shards" / shard.name, "execute")) < execute["candidates"]
    assert 0 < since["timing"]["tasks"] == len(lines(streamed / "shards" / shard.name, "timed")) < timing["tasks"]
    assert since["execute"]["passed_not_yet_timed"] == execute["passed_not_yet_timed"]
    # the same figures from the build's state file (what a build on lent machines brings back)
    from opgen.pipeline.state import save_state

    save_state(streamed, tmp_path / "build.state")
    assert main(["profile", str(tmp_path / "build.state"), "--json", str(tmp_path / "from_state.json")]) == 0
    from_state = json.loads((tmp_path / "from_state.json").read_text())
    # (and what became of the candidates: the state's tasks written out as the build wrote them)
    assert from_state == {key: figures[key] for key in ("timed", "execute", "timing", "window", "rates", "outcome")}
    # the window's rejections against the sampler's estimate: what a cut on it would spare and lose
    records = {"kept": {"in_window": True, "eager_ms": 5.0, "estimated_gpu_ms": 1.15},
               "fast": {"in_window": False, "eager_ms": 0.5, "estimated_gpu_ms": 1.05},
               "slow": {"in_window": False, "eager_ms": 150.0, "estimated_gpu_ms": 90.0},
               "failed": {"in_window": False, "eager_ms": None}}
    window = run_profile.window_profile(records, (1.0, 100.0))
    assert (window["below"], window["above"], window["below_estimate_ms_median"]) == (1, 1, 1.05)
    assert window["estimate_cut_spares_loses"]["1.1"] == [1, 0] and window["estimate_cut_spares_loses"]["1.2"] == [1, 1]
