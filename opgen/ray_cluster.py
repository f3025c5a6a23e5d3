"""Joining a Ray cluster, for the build and the grader alike: the one this process already joined, the one at
RAY_ADDRESS, or a new local one; an address that cannot be reached is a MachineFault said in one line."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from opgen.errors import MachineFault, UsageError

REPO_ROOT = Path(__file__).resolve().parents[1]
ADDRESS_ENV = "RAY_ADDRESS"
REACH_TIMEOUT_S = 5.0   # a head that does not answer a TCP connect in this long is out of reach


def import_ray(option: str = "--executor ray"):
    """The ray module, or a UsageError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UsageError(f"{option} needs Ray: pip install 'opgen[ray]'") from None
    return ray


def worker_env() -> dict:
    """The runtime environment Ray's workers need to import this opgen (a checkout is not always installed)."""
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)
    return {"env_vars": {"PYTHONPATH": path}}


def join_cluster(cpus: int | None = None, option: str = "--executor ray") -> tuple[object, bool]:
    """(ray, joined_here): joins the cluster this process is already in, else the one at $RAY_ADDRESS, else starts a
    local one with `cpus` CPUs; joined_here says this call connected (the caller then shuts the connection down)."""
    ray = import_ray(option)
    if ray.is_initialized():
        return ray, False
    options = {"runtime_env": worker_env(), "include_dashboard": False, "log_to_driver": False}
    address = os.environ.get(ADDRESS_ENV)
    if address:
        require_reachable(address)
    elif cpus is not None:
        options["num_cpus"] = max(1, cpus)
    try:
        ray.init(**options)
    except (ConnectionError, TimeoutError, RuntimeError) as error:
        where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
        raise MachineFault(f"{where} cannot be joined ({ADDRESS_ENV}): {str(error).splitlines()[0]}") from None
    return ray, True


def require_reachable(address: str) -> None:
    """MachineFault unless the head at `address` (host:port, or ray://host:port) accepts a TCP connection: Ray itself
    retries an unreachable address for a long while, printing a warning a second, before it gives up."""
    if address in ("auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"{ADDRESS_ENV}={address!r} is not HOST:PORT (or ray://HOST:PORT, auto)")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=REACH_TIMEOUT_S):
            pass
    except OSError as error:
        raise MachineFault(f"the Ray cluster at {address} ({ADDRESS_ENV}) cannot be reached: "
                           f"{error.strerror or error}") from None
