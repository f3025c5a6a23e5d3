"""Workers forked from the zygote are the workers a fresh interpreter makes: same session, descriptors, arguments,
environment and threads, their own random seeds, no way back to the zygote; and a zygote that fails or dies
leaves the pool working."""

from __future__ import annotations

import os
import signal

import pytest

from opgen.sandbox import landlock, spawn
from opgen.sandbox.pool import SandboxPool

DESCRIBE = "tests.test_sandbox_helpers:describe_process"


def _described(monkeypatch, fork: str, workers: int = 2, threads: int = 1) -> list[dict]:
    monkeypatch.setenv(spawn.FORK_ENV, fork)
    with SandboxPool(workers, 60, None, env={"OPGEN_TEST_MARK": fork}, threads=threads) as pool:
        results = pool.run_many(DESCRIBE, [{"env_key": "OPGEN_TEST_MARK"}] * workers)
        kinds = {type(worker.proc).__name__ for worker in pool._pool}
    assert all(result.status == "ok" for result in results), [result.detail for result in results]
    assert kinds == {"ForkedProcess" if fork == "1" else "Popen"}
    return [result.value for result in results]


@pytest.mark.parametrize("threads", [1, 2])
def test_a_forked_worker_looks_like_a_fresh_one_from_inside(monkeypatch, threads):
    fresh, forked = _described(monkeypatch, "0", threads=threads), _described(monkeypatch, "1", threads=threads)
    for process in fresh + forked:
        assert process["session"] == process["group"] == process["pid"]   # leads its own session and group
        assert process["argv0"].endswith(os.path.join("opgen", "sandbox", "worker.py"))
        assert "opgen.sandbox.worker" in process["cmdline"]   # how a quiet hold knows a worker (quiet.py)
        assert process["threads"] == threads
    assert [p["env"] for p in fresh] == ["0", "0"] and [p["env"] for p in forked] == ["1", "1"]
    # the same descriptors: the protocol's pipes, /dev/null, the stderr log; never the zygote's socket
    def kinds(process: dict) -> list[str]:
        return sorted(target.split(":")[0] if ":" in target and not target.startswith("/") else
                      "proc" if target.startswith("/proc/") else target if target == "/dev/null" else "file"
                      for target in process["descriptors"].values())
    assert kinds(forked[0]) == kinds(fresh[0])
    assert not any(target.startswith("socket:") for process in forked for target in process["descriptors"].values())
    assert forked[0]["random"] != forked[1]["random"]   # seeded afresh in each, as a new interpreter is


def test_a_forked_worker_killed_by_a_signal_is_reported_as_a_fresh_one_is(monkeypatch):
    for fork in ("0", "1"):
        monkeypatch.setenv(spawn.FORK_ENV, fork)
        with SandboxPool(1, 60, None) as pool:
            segfault, after = pool.run_many("tests.test_sandbox_helpers:segfault", [{}]) + pool.run_many(
                "tests.test_sandbox_helpers:echo", [{}])
        assert segfault.status == "crash" and segfault.detail.startswith("worker killed by SIGSEGV"), fork
        assert after.status == "ok" and after.value["pid"] != segfault.pid


def test_a_dead_zygote_leaves_the_pool_working(monkeypatch):
    monkeypatch.setenv(spawn.FORK_ENV, "1")
    with SandboxPool(1, 60, None, env={"TORCHINDUCTOR_OPGEN_TEST": "a zygote of its own"}) as pool:
        [first] = pool.run_many("tests.test_sandbox_helpers:echo", [{}])
        zygote = pool._pool[0].proc._zygote
        os.kill(zygote.proc.pid, signal.SIGKILL)
        zygote.proc.wait()
        # its worker lives on; once it ends, no one is left to say how: it counts as killed
        [still, ended] = [pool.run_many("tests.test_sandbox_helpers:echo", [{}])[0],
                          pool.run_many("tests.test_sandbox_helpers:hard_exit", [{}])[0]]
        [again] = pool.run_many("tests.test_sandbox_helpers:echo", [{}])   # a new zygote forks the next one
        assert type(pool._pool[0].proc).__name__ == "ForkedProcess" and pool._pool[0].proc._zygote is not zygote
    assert first.status == still.status == again.status == "ok" and still.pid == first.pid != again.pid
    assert ended.status == "crash" and ended.detail.startswith("worker killed by SIGKILL")


def test_a_zygote_that_cannot_start_leaves_workers_to_fresh_interpreters(monkeypatch):
    monkeypatch.setenv(spawn.FORK_ENV, "1")
    monkeypatch.setattr(spawn.Zygote, "__init__", _failing_init)
    with SandboxPool(1, 60, None, env={"TORCHINDUCTOR_OPGEN_TEST": "no zygote"}) as pool:
        [result] = pool.run_many("tests.test_sandbox_helpers:echo", [{}])
        assert result.status == "ok" and type(pool._pool[0].proc).__name__ == "Popen"


def _failing_init(self, env):
    raise spawn.ZygoteError("no zygote here")


def test_forking_is_off_beside_a_gpu_unless_asked(monkeypatch):
    monkeypatch.delenv(spawn.FORK_ENV, raising=False)
    monkeypatch.setattr(landlock.glob, "glob", lambda pattern: ["/dev/nvidia0"] if "nvidia" in pattern else [])
    assert not spawn.forking_enabled()
    monkeypatch.setenv(spawn.FORK_ENV, "1")
    assert spawn.forking_enabled()
    monkeypatch.setattr(landlock.glob, "glob", lambda pattern: [])
    monkeypatch.delenv(spawn.FORK_ENV)
    assert spawn.forking_enabled()
    monkeypatch.setenv(spawn.FORK_ENV, "0")
    assert not spawn.forking_enabled()


def test_workers_share_a_zygote_only_when_they_agree_on_what_torch_reads_as_it_loads():
    base = {"PATH": "/bin", "OMP_NUM_THREADS": "1", "TORCHINDUCTOR_CACHE_DIR": "/tmp/a"}
    assert spawn.import_key(base) == spawn.import_key({**base, "PATH": "/usr/bin", "OMP_NUM_THREADS": "4",
                                                       "OPGEN_SANDBOX_WARM_UP": "m:f"})
    assert spawn.import_key(base) != spawn.import_key({**base, "TORCHINDUCTOR_CACHE_DIR": "/tmp/b"})
    assert spawn.import_key(base) != spawn.import_key({**base, "CUDA_VISIBLE_DEVICES": "1"})


def test_a_process_forked_from_one_with_a_zygote_starts_its_own(monkeypatch):
    monkeypatch.setenv(spawn.FORK_ENV, "1")
    with SandboxPool(1, 60, None) as pool:
        pool.run_many("tests.test_sandbox_helpers:echo", [{}])
        parents = pool._pool[0].proc._zygote
    read, write = os.pipe()
    child = os.fork()
    if child == 0:   # the copy: no zygote of its parent's, and one of its own once it starts a worker
        try:
            before = len(spawn._zygotes)
            with SandboxPool(1, 60, None) as pool:
                [result] = pool.run_many("tests.test_sandbox_helpers:echo", [{}])
                own = pool._pool[0].proc._zygote
            os.write(write, f"{before} {result.status} {own.proc.pid != parents.proc.pid}".encode())
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 200).decode()
    os.waitpid(child, 0)
    assert answer == "0 ok True"


def test_a_cpu_build_s_check_and_timing_pools_agree_on_what_torch_reads_as_it_loads():
    """So one zygote serves both: pools that differ in a variable torch reads as it loads need a zygote each, and
    each zygote imports torch, dynamo and inductor."""
    from opgen.timing.driver import _pool_envs

    timing_env = _pool_envs("cpu", None, None)[0][""]
    checks, timing = SandboxPool(2, 60, None), SandboxPool(1, 60, None, env=timing_env)
    assert spawn.import_key(checks.env) == spawn.import_key(timing.env)
