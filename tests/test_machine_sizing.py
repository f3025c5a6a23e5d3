"""Build defaults sized to the machine: on cuda from the cores, GPUs and host memory; given flags stay."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from opgen.sandbox import machine_sizing
from opgen.sandbox.machine_sizing import size_for_machine


@pytest.fixture
def h200_host(monkeypatch):
    """16 cores and 128 GiB, as on the one-H200 machine the defaults were measured on."""
    monkeypatch.setattr(machine_sizing.os, "cpu_count", lambda: 16)
    monkeypatch.setattr(machine_sizing.psutil, "virtual_memory", lambda: SimpleNamespace(total=128 << 30))


def test_one_h200_shares_its_cores_between_checks_and_timing(h200_host):
    sizing = size_for_machine("cuda", 1, None, None, None)
    assert (sizing.workers, sizing.timing_workers, sizing.memory_mb) == (10, 6, 14000)
    assert "--workers 10, --timing-workers 6, --memory-mb 14000" in sizing.note


def test_given_flags_override_and_are_named(h200_host):
    sizing = size_for_machine("cuda", 1, 6, None, 8000)
    assert (sizing.workers, sizing.timing_workers, sizing.memory_mb) == (6, 6, 8000)
    assert "--workers 6 (given)" in sizing.note and "--memory-mb 8000 (given)" in sizing.note


def test_more_gpus_share_the_cores_and_a_small_host_keeps_the_floor(monkeypatch):
    monkeypatch.setattr(machine_sizing.os, "cpu_count", lambda: 32)
    monkeypatch.setattr(machine_sizing.psutil, "virtual_memory", lambda: SimpleNamespace(total=16 << 30))
    sizing = size_for_machine("cuda", 4, None, None, None)
    assert (sizing.workers, sizing.timing_workers, sizing.memory_mb) == (20, 3, 4096)


def test_cpu_builds_keep_the_small_defaults(h200_host):
    sizing = size_for_machine("cpu", 0, None, None, None)
    assert (sizing.workers, sizing.timing_workers, sizing.memory_mb, sizing.note) == (2, None, 4096, "")
