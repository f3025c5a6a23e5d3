"""The sandbox pool: results in input order, and crashes, hangs and memory blow-ups contained and replaced."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from opgen.sandbox.pool import SandboxPool, SandboxResult

# "tests.test_sandbox_helpers" when tests/ is a package, else the bare module name; workers inherit sys.path.
HELPERS = __name__.rpartition(".")[0] + ".test_sandbox_helpers" if "." in __name__ else "test_sandbox_helpers"


def _pool(**kwargs) -> SandboxPool:
    options = {"workers": 2, "timeout_s": 3.0, "memory_mb": 1024}
    options.update(kwargs)
    # the helper module lives next to this file; the workers get the parent's sys.path, which includes it
    return SandboxPool(**options)


def _fn(name: str) -> str:
    return f"{HELPERS}:{name}"


def test_results_in_input_order_across_workers():
    with _pool() as pool:
        results = pool.run_many(_fn("echo"), [{"i": i} for i in range(12)])
    assert [r.status for r in results] == ["ok"] * 12
    assert [r.value["echo"]["i"] for r in results] == list(range(12))
    # each result names its worker and which of that worker's tasks it was
    assert all(r.pid == r.value["pid"] for r in results)
    for pid in {r.pid for r in results}:
        assert sorted(r.task_number for r in results if r.pid == pid) == list(range(1, 1 + sum(r.pid == pid for r in results)))


def test_each_result_says_how_long_its_worker_had_it_and_how_much_cpu_it_used():
    with _pool(workers=1) as pool:
        quick, slow, busy, failed = pool.run_many(_fn("dispatch"), [{"fn": "echo"}, {"fn": "slow_echo"},
                                                                     {"fn": "spin"}, {"fn": "python_loop"}])
    # by the clock: at least the sleep and the CPU time (a loaded machine only adds); no bound above but the limit's
    assert (quick.status, slow.status, busy.status) == ("ok", "ok", "ok")
    assert 0 < quick.seconds < slow.seconds and slow.seconds >= 0.5 and busy.seconds >= busy.cpu_s
    assert slow.cpu_s < 0.2 < busy.cpu_s   # sleeping is not working; the spin's 0.3 s of CPU time are counted
    assert failed.status == "timeout" and failed.seconds >= 3.0 and failed.cpu_s == 0.0


def test_workers_get_the_pools_share_of_threads(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    for threads, expected in ((1, "1"), (None, str(max(1, (os.cpu_count() or 1) // 2)))):
        with _pool(workers=2, threads=threads) as pool:
            [result] = pool.run_many(_fn("echo"), [{"env_key": "OMP_NUM_THREADS"}])
        assert result.value["env"] == expected


def test_env_reaches_the_worker():
    with _pool(workers=1, env={"OPGEN_TEST_FLAG": "on"}) as pool:
        [result] = pool.run_many(_fn("echo"), [{"env_key": "OPGEN_TEST_FLAG"}])
    assert result.value["env"] == "on"


def test_slot_envs_give_each_worker_its_own_and_survive_replacement():
    slots = [{"OPGEN_TEST_GPU": "0"}, {"OPGEN_TEST_GPU": "1"}]
    with _pool(workers=2, slot_envs=slots) as pool:
        first = pool.run_many(_fn("slow_echo"), [{"env_key": "OPGEN_TEST_GPU"} for _ in range(8)])
        pool.run_many(_fn("segfault"), [{"n": 1}, {"n": 2}])  # both workers die and are replaced
        second = pool.run_many(_fn("slow_echo"), [{"env_key": "OPGEN_TEST_GPU"} for _ in range(8)])
    assert {r.value["env"] for r in first} == {"0", "1"}
    assert {r.value["env"] for r in second} == {"0", "1"}
    by_pid = {(r.value["pid"], r.value["env"]) for r in first + second}
    assert len(by_pid) == len({pid for pid, _ in by_pid})  # a worker keeps its slot's environment
    assert {r.value["pid"] for r in second} - {r.value["pid"] for r in first}  # replacements took the slots


def test_worker_frees_what_a_task_left_behind_before_the_next():
    with _pool(workers=1, timeout_s=60.0) as pool:
        [left] = pool.run_many(_fn("leave_cycle"), [{}])
        [after] = pool.run_many(_fn("left_alive"), [{}])
    assert left.status == "ok"
    assert after.value == {"alive": 0, "tracked": 1}


def test_a_task_s_freed_host_memory_is_given_back_before_the_next_task():
    """Freed blocks glibc keeps on its heap would count against the pool's resident limit in the next task."""
    with _pool(workers=1, timeout_s=120.0, memory_mb=None) as pool:
        [before] = pool.run_many(_fn("resident"), [{}])
        [churned] = pool.run_many(_fn("churn_host_memory"), [{"rounds": 3, "mb": 1200}])
        [after] = pool.run_many(_fn("resident"), [{}])
    assert churned.status == "ok" and churned.value["rss_mb"] > before.value["rss_mb"] + 800   # kept by the heap
    assert after.value["rss_mb"] < before.value["rss_mb"] + 200


def test_garbage_among_frozen_survivors_is_collected_by_the_periodic_full_collection():
    from opgen.sandbox.worker import FULL_COLLECTION_EVERY

    with _pool(workers=1, timeout_s=60.0) as pool:
        pool.run_many(_fn("hold_cycle"), [{}])
        pool.run_many(_fn("drop_cycle"), [{}])
        [soon] = pool.run_many(_fn("left_alive"), [{}])
        pool.run_many(_fn("echo"), [{} for _ in range(FULL_COLLECTION_EVERY)])
        [later] = pool.run_many(_fn("left_alive"), [{}])
    assert soon.value == {"alive": 1, "tracked": 1}  # frozen: cheap collections skip it for a while
    assert later.value == {"alive": 0, "tracked": 1}


def test_every_failure_mode_gets_one_result_and_the_pool_survives():
    names = ["echo", "raise_error", "segfault", "hard_exit", "python_loop", "c_hang", "not_json",
             "prints_to_stdout", "echo"]
    with _pool() as pool:
        results = [pool.run_many(_fn(name), [{"n": 7}])[0] for name in names]
        after = pool.run_many(_fn("echo"), [{"i": i} for i in range(4)])
    by_name = dict(zip(names[:-1], results[:-1]))
    assert by_name["echo"].status == "ok"
    assert by_name["raise_error"].status == "error" and "boom 7" in by_name["raise_error"].detail
    assert by_name["segfault"].status == "crash" and "SIGSEGV" in by_name["segfault"].detail
    assert by_name["hard_exit"].status == "crash" and "status 3" in by_name["hard_exit"].detail
    assert by_name["python_loop"].status == "timeout"
    assert by_name["c_hang"].status == "timeout"
    assert by_name["not_json"].status == "error" and "JSON" in by_name["not_json"].detail
    assert by_name["prints_to_stdout"].value == {"ok": True}
    assert results[-1].status == "ok"
    assert [r.value["echo"]["i"] for r in after] == [0, 1, 2, 3]


def test_one_batch_mixing_failures_keeps_order_and_isolates_them():
    names = ["echo", "segfault", "echo", "hard_exit", "python_loop", "echo", "bloat", "echo"]
    payloads = [{"fn": name, "i": i} for i, name in enumerate(names)]
    # page faults are slow on this machine (~150 MB/s): a low memory limit keeps the bloat case short
    with _pool(timeout_s=8.0, memory_mb=300) as pool:
        results = pool.run_many(_fn("dispatch"), payloads, progress=True)
    assert [r.status for r in results] == ["ok", "crash", "ok", "crash", "timeout", "ok", "crash", "ok"]
    assert [r.value["echo"]["i"] for r in results if r.status == "ok"] == [0, 2, 5, 7]


def test_workers_are_separate_processes_from_the_parent():
    import os

    with _pool(workers=1) as pool:
        [result] = pool.run_many(_fn("echo"), [{}])
    assert result.value["pid"] != os.getpid()


def test_unknown_function_is_an_error_not_a_crash():
    with _pool(workers=1) as pool:
        [result] = pool.run_many("no_such_module_here:fn", [{}])
        [after] = pool.run_many(_fn("echo"), [{"i": 1}])
    assert isinstance(result, SandboxResult) and result.status == "error"
    assert "no_such_module_here" in result.detail
    assert after.status == "ok"


def test_memory_limit_kills_and_replaces_the_worker():
    with _pool(workers=1, timeout_s=30.0, memory_mb=300) as pool:
        [bloated] = pool.run_many(_fn("bloat"), [{}])
        [after] = pool.run_many(_fn("echo"), [{"i": 1}])
    assert bloated.status == "crash" and "memory limit exceeded" in bloated.detail
    assert after.status == "ok" and after.value["pid"] != bloated.value


@pytest.mark.parametrize("workers", [1, 3])
def test_more_payloads_than_workers_all_answered(workers):
    with _pool(workers=workers) as pool:
        results = pool.run_many(_fn("echo"), [{"i": i} for i in range(7)])
    assert len(results) == 7 and all(r.status == "ok" for r in results)


def test_helper_module_is_beside_this_file():
    assert (Path(__file__).parent / f"{HELPERS.rpartition('.')[2]}.py").exists()


def test_a_stopped_call_finishes_the_tasks_under_way_and_sends_no_more():
    import threading

    from opgen.sandbox.pool import STOPPED

    stop = threading.Event()
    with _pool(workers=1) as pool:
        threading.Timer(0.25, stop.set).start()   # while the first of four half-second tasks runs
        results = pool.run_many(_fn("slow_echo"), [{"i": i} for i in range(4)], stop=stop)
        assert [r.status for r in results] == ["ok", STOPPED, STOPPED, STOPPED]
        assert results[0].value["echo"] == {"i": 0} and results[0].seconds >= 0.5
        # the pool is fine for the next call, with the same worker
        [after] = pool.run_many(_fn("echo"), [{"i": 9}])
    assert after.status == "ok" and after.value["pid"] == results[0].value["pid"]


def test_workers_asked_to_run_confined_that_are_not_say_so_once(capsys, monkeypatch):
    import opgen.sandbox.pool as pool_module
    from opgen.sandbox.confine import PIECES
    monkeypatch.setattr(pool_module, "_unconfined_warned", set())
    with _pool(workers=2) as pool:   # workers not asked to confine themselves, then taken for confined ones
        pool.confined = True
        results = pool.run_many(_fn("echo"), [{"i": i} for i in range(4)])
    assert [r.status for r in results] == ["ok"] * 4
    err = capsys.readouterr().err.splitlines()
    for piece in PIECES:   # each piece that does not hold, once, for all the workers
        lines = [line for line in err if f"run without '{piece}'" in line]
        assert len(lines) == 1, (piece, err)
    assert "may write any file" in next(line for line in err if "'writes'" in line)
    with _pool(workers=1, confined=False) as pool:   # a pool that never asked: nothing to say
        monkeypatch.setattr(pool_module, "_unconfined_warned", set())
        pool.run_many(_fn("echo"), [{"i": 0}])
    err = capsys.readouterr().err
    assert "seccomp" not in err and "Landlock" not in err


def test_an_answer_written_by_task_code_on_the_workers_channel_is_refused():
    """Task code that writes on every descriptor it has reaches the worker's channel: its forged answer (or bytes
    that are no message at all) is the task's `forged` result, never its value, and the pool goes on."""
    with _pool(workers=1) as pool:
        forged, garbled, after = pool.run_many(_fn("dispatch"), [{"fn": "forges_an_answer"},
                                                                 {"fn": "garbles_the_channel"}, {"fn": "echo"}])
    assert (forged.status, garbled.status, after.status) == ("forged", "forged", "ok"), (forged, garbled, after)
    assert forged.value is None and "did not send" in forged.detail and "not a message" in garbled.detail
    assert after.pid not in (forged.pid, garbled.pid)   # a worker whose channel was written in is not used again


def test_a_worker_runs_its_pools_warm_up_before_its_first_task_and_survives_a_failing_one(monkeypatch):
    from opgen.sandbox.spawn import FORK_ENV
    from opgen.sandbox.worker import WARM_UP_ENV
    from opgen.timing.driver import WARM_UP_PATH

    monkeypatch.setenv(FORK_ENV, "0")   # fresh interpreters: one forked from the zygote has the compile stack already

    compile_stack = {"modules": ["torch._inductor.compile_fx"]}
    warmed, cold, broken = ({WARM_UP_ENV: WARM_UP_PATH}, {}, {WARM_UP_ENV: "no_such_module_here:warm"})
    answers = []
    for env in (warmed, cold, broken):
        with _pool(workers=1, timeout_s=120.0, memory_mb=None, env=env) as pool:
            [result] = pool.run_many(_fn("imported"), [compile_stack])
        assert result.status == "ok", result.detail
        answers.append(result.value["torch._inductor.compile_fx"])
    assert answers == [True, False, False]
