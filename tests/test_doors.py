"""The doors a graded solution finds shut, on the CPU and (marked gpu) on CUDA: no secret of the grader's (its
environment, its environ file, a token in the user's home), no network (a listener the test starts receives
nothing), no process alive after its grade (not even one that left its session), and no write past its scratch's
cap, outside its scratch, or left behind. Each solution reaches its door through computed attribute chains, which
the static scan cannot see, as a real attacker would."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest

import opgen
from opgen.sandbox.landlock import confine_files
from opgen.sandbox.pool import PROCESS_LIMIT, SCRATCH_LIMIT

ROOT = Path(__file__).resolve().parents[1]
LINEAR_GELU = Path(__file__).parent / "grade_corpus" / "tasks" / "linear_gelu.py"


def _landlock_applies() -> bool:
    probe = "import sys\nfrom opgen.sandbox.landlock import confine_files\nsys.exit(0 if confine_files()['reads'] else 1)"
    return subprocess.run([sys.executable, "-c", probe], cwd=ROOT).returncode == 0


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not _cuda(), reason="no CUDA")])]
needs_landlock = pytest.mark.skipif(not _landlock_applies(), reason="this kernel has no Landlock")
assert confine_files   # the module the skip above probes

# The process's modules through a chain no scan reads: torch imports os, os imports sys.
PRELUDE = '''import torch
import torch.nn as nn

_os = getattr(torch, "o" + "s")
_sys = getattr(_os, "s" + "ys")
_load = getattr(getattr(_sys, "mod" + "ules")["importlib"], "import_" + "module")
_open = getattr(_load("i" + "o"), "op" + "en")
'''
# An honest model that tries its door once, as it is built.
HONEST = '''

class ModelNew(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.linear = nn.Linear(features, hidden)
        door()

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x))
'''


def solution(door: str) -> str:
    return PRELUDE + door + HONEST


def grade(code: str, device: str, **options) -> dict:
    return opgen.grade(solution_code=code, task=LINEAR_GELU, device=device, **options)


# --- secrets -------------------------------------------------------------------------------------------------------

SNOOP = '''
def door():
    found = []
    if secret in str(dict(getattr(_os, "envi" + "ron"))):
        found.append("its environment")
    pid = getattr(_os, "getp" + "pid")()
    for _ in range(6):   # every ancestor's environ file, up to the grader and past it
        try:
            if secret.encode() in _open(f"/proc/{pid}/environ", "rb").read():
                found.append(f"the environ of {pid}")
        except OSError:
            pass
        try:
            pid = int(_open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    try:
        if secret in _open(token_file).read():
            found.append("the token file")
    except OSError:
        pass
    if found:
        raise RuntimeError("read the secret from " + ", ".join(found))
'''


@needs_landlock
@pytest.mark.parametrize("device", DEVICES)
def test_no_secret_of_the_grader_reaches_a_solution(device, tmp_path):
    secret = f"hf_{uuid.uuid4().hex}"
    home = tmp_path / "home"
    token = home / ".cache" / "huggingface" / "token"
    token.parent.mkdir(parents=True)
    token.write_text(secret)
    code = solution(f"secret = {secret!r}\ntoken_file = {str(token)!r}\n" + SNOOP)
    path = tmp_path / "snoop.py"
    path.write_text(code)
    # the grader as a user runs it: its token in its environment (so in its environ file) and in its home
    env = {**os.environ, "HF_TOKEN": secret, "HOME": str(home), "MY_SERVICE_API_KEY": secret}
    done = subprocess.run([sys.executable, "-m", "opgen", "grade", "--task", str(LINEAR_GELU), "--solution", str(path),
                           "--device", device], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr   # correct: every attempt found nothing
    assert secret not in done.stdout + done.stderr


SYSTEM_SECRETS = '''
def door():
    for path in paths:
        try:
            _open(path, "rb").read(1)
        except OSError:
            continue
        raise RuntimeError("read " + path)
'''


@needs_landlock
def test_the_system_s_secrets_stay_unread_by_a_worker_run_by_their_owner():
    """A worker run by root drops its capabilities but still owns /etc/shadow: Landlock hides it."""
    readable = [path for path in ("/etc/shadow", "/etc/gshadow") if os.access(path, os.R_OK)]
    if not readable:
        pytest.skip("no system secret this user can read")
    result = grade(solution(f"paths = {readable!r}\n" + SYSTEM_SECRETS), "cpu")
    assert result["correct"], result


def test_a_link_to_a_folder_that_holds_a_hidden_one_opens_nothing(tmp_path):
    """A rule holds for what a link leads to (a link inside an allowed folder leads nowhere past it)."""
    from opgen.sandbox.landlock import read_rules

    (tmp_path / "run" / "secrets").mkdir(parents=True)
    (tmp_path / "run" / "lock").mkdir()
    (tmp_path / "var_run").symlink_to(tmp_path / "run")             # as /var/run leads to /run
    (tmp_path / "key").symlink_to(tmp_path / "run" / "secrets")     # into a hidden folder
    (tmp_path / "lock").symlink_to(tmp_path / "run" / "lock")
    rules = set(read_rules([tmp_path / "run" / "secrets"], []))
    assert {tmp_path / "run" / "lock", tmp_path / "lock"} <= rules
    assert not rules & {tmp_path / "run", tmp_path / "var_run", tmp_path / "key", tmp_path / "run" / "secrets"}


def test_the_worker_keeps_an_allow_list_of_the_environment():
    from opgen.sandbox.scratch import keeps

    assert keeps("CUDA_VISIBLE_DEVICES") and keeps("PATH") and keeps("TORCHINDUCTOR_CACHE_DIR")
    assert not any(keeps(name) for name in ("HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN",
                                            "TORCH_HUB_TOKEN", "WANDB_API_KEY", "SSH_AUTH_SOCK", "HOME_SECRET",
                                            # kept prefixes, with a secret's word among the name's parts
                                            "TORCH_HUB_KEY", "OPGEN_HUB_KEY", "PYTHON_KEYRING_PW", "OPGEN_HF_TOK",
                                            "CUDA_LICENSE", "NVIDIA_API_KEY", "OPGEN_PASS", "TRITON_CERT"))
    assert all(keeps(name) for name in ("CUDA_HOME", "TORCH_CUDA_ARCH_LIST", "PYTHONHASHSEED", "OMP_NUM_THREADS",
                                        "TRITON_CACHE_DIR", "NVIDIA_VISIBLE_DEVICES", "OPGEN_SCRATCH_DIR", "LC_ALL"))


# --- network -------------------------------------------------------------------------------------------------------

CALL_HOME = '''
def door():
    sockets = _load("soc" + "ket")
    for family, address in targets:
        try:
            connection = getattr(sockets, "sock" + "et")(getattr(sockets, family))
            connection.settimeout(2)
            connection.connect(address)
            connection.sendall(b"exfiltrated")
        except OSError:
            if not swallow:
                raise
    try:
        datagram = getattr(sockets, "sock" + "et")(sockets.AF_INET, sockets.SOCK_DGRAM)
        datagram.sendto(b"exfiltrated", udp)
    except OSError:
        if not swallow:
            raise
'''


class Listener:
    """A TCP and a UDP socket on 127.0.0.1 and a Unix socket that record every byte and connection they receive."""

    def __init__(self, folder: Path):
        self.received: list[bytes] = []
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.unix_path = str(folder / "listener.sock")
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(self.unix_path)
        self.unix.listen()
        for server in (self.tcp, self.unix):
            threading.Thread(target=self._accept, args=(server,), daemon=True).start()
        threading.Thread(target=self._datagrams, daemon=True).start()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            self.received.append(b"<connection>" + connection.recv(100))

    def _datagrams(self) -> None:
        while True:
            try:
                self.received.append(self.udp.recv(100))
            except OSError:
                return

    def targets(self) -> str:
        return (f"targets = [('AF_INET', ('127.0.0.1', {self.tcp.getsockname()[1]})), ('AF_UNIX', "
                f"{self.unix_path!r})]\nudp = ('127.0.0.1', {self.udp.getsockname()[1]})\n")

    def close(self) -> None:
        for server in (self.tcp, self.udp, self.unix):
            server.close()


@pytest.fixture
def listener(tmp_path):
    server = Listener(tmp_path)
    yield server
    server.close()


@pytest.mark.parametrize("device", DEVICES)
def test_a_listener_receives_nothing_and_a_solution_that_needs_the_network_fails(device, listener):
    quiet = grade(solution(listener.targets() + "swallow = True\n" + CALL_HOME), device)
    assert quiet["reason"] == "ok", quiet   # an honest model besides: every call failed inside it
    loud = grade(solution(listener.targets() + "swallow = False\n" + CALL_HOME), device)
    assert not loud["correct"] and "PermissionError" in loud["detail"], loud
    time.sleep(0.5)
    assert listener.received == []


def sockets_as_cuda_uses_them(payload: dict) -> dict:
    """Inside a worker: bind and listen on a local socket of its own, as CUDA's start does, then connect to a Unix
    socket the test listens on and open a TCP socket."""
    def attempt(action) -> str:
        try:
            action()
            return "allowed"
        except OSError as error:
            return type(error).__name__

    own = socket.socket(socket.AF_UNIX)
    bound = attempt(lambda: (own.bind(f"\0opgen-test-{os.getpid()}"), own.listen()))
    client = socket.socket(socket.AF_UNIX)
    return {"bind and listen": bound, "connect": attempt(lambda: client.connect(payload["unix"])),
            "tcp": attempt(lambda: socket.socket(socket.AF_INET).close())}


def test_a_confined_worker_binds_its_own_socket_but_reaches_no_other(listener):
    """CUDA's start binds a socket of its own (and fails when that is refused); a connect finds nothing, as if no
    socket were there (what CUDA meets where no MPS server runs), and no other family of socket opens."""
    from opgen.sandbox.pool import SandboxPool

    with SandboxPool(1, 60, None, confined=True) as pool:
        [result] = pool.run_many(f"{__name__}:sockets_as_cuda_uses_them", [{"unix": listener.unix_path}])
    assert result.status == "ok", result.detail
    assert result.value == {"bind and listen": "allowed", "connect": "FileNotFoundError", "tcp": "PermissionError"}
    time.sleep(0.2)
    assert listener.received == []


# --- processes -----------------------------------------------------------------------------------------------------

DAEMON = '''
def door():
    fork, wait = getattr(_os, "fo" + "rk"), getattr(_os, "wait" + "pid")
    for _ in range(copies):
        child = fork()
        if child == 0:   # leave the worker's session and its process group, then leave the child behind
            getattr(_os, "set" + "sid")()
            if fork() == 0:
                getattr(_os, "ex" + "ecv")("/bin/sh", ["/bin/sh", "-c", f"sleep 600; : {marker}"])
            getattr(_os, "_ex" + "it")(0)
        wait(child, 0)
'''


def _alive(marker: str) -> list[int]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if marker in " ".join(process.info["cmdline"] or []):
            found.append(process.pid)
    return found


def _gone(marker: str, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _alive(marker)


@pytest.mark.parametrize("device", DEVICES)
def test_no_process_of_a_solution_outlives_its_grade(device):
    marker = f"opgen-door-{uuid.uuid4().hex}"
    try:
        result = grade(solution(f"marker = {marker!r}\ncopies = 2\n" + DAEMON), device)
        assert result["reason"] == "ok", result   # the daemons do it no harm: it is graded, they are ended
        assert _gone(marker), "a process the solution left behind is still running"
    finally:
        for pid in _alive(marker):
            psutil.Process(pid).kill()


def test_a_solution_that_starts_too_many_processes_is_stopped():
    marker = f"opgen-door-{uuid.uuid4().hex}"
    try:
        result = grade(solution(f"marker = {marker!r}\ncopies = 400\n" + DAEMON), "cpu")
        assert result["reason"] == "crash" and PROCESS_LIMIT in result["detail"], result
        assert _gone(marker)
    finally:
        for pid in _alive(marker):
            psutil.Process(pid).kill()


HANG = '''
def door():
    if getattr(_os, "fo" + "rk")() == 0:
        getattr(_os, "ex" + "ecv")("/bin/sh", ["/bin/sh", "-c", f"sleep 600; : {marker}"])
    _load("ti" + "me").sleep(600)
'''


def test_a_grader_killed_mid_grade_leaves_no_process_behind(tmp_path):
    """A trainer that dies while a solution hangs (past any time limit it would have enforced): the worker and what
    it started end within seconds, not when the hang does."""
    import signal

    marker = f"opgen-door-{uuid.uuid4().hex}"
    path = tmp_path / "hang.py"
    path.write_text(solution(f"marker = {marker!r}\n" + HANG))
    grader = subprocess.Popen([sys.executable, "-m", "opgen", "grade", "--task", str(LINEAR_GELU), "--solution",
                               str(path), "--device", "cpu", "--timeout", "600"], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while not _alive(marker) and grader.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _alive(marker), "the solution never ran"
        grader.send_signal(signal.SIGKILL)
        grader.wait()
        assert _gone(marker, seconds=30), "the hanging solution's process outlived its killed grader"
    finally:
        grader.kill()
        for pid in _alive(marker):
            psutil.Process(pid).kill()


# --- the disk ------------------------------------------------------------------------------------------------------

FILL = '''
def door():
    folder = _load("temp" + "file").gettempdir()
    for index in range(files):
        with _open(f"{folder}/{marker}-{index}", "wb") as out:
            for _ in range(megabytes):
                out.write(bytes(1 << 20))
    if linger:
        _load("ti" + "me").sleep(linger)
'''
SHARED = '''
def door():
    for folder in folders:
        with _open(f"{folder}/{marker}", "w") as out:
            out.write("planted")
'''


def _left_behind(marker: str) -> list[Path]:
    root = Path(tempfile.gettempdir())
    found = list(root.glob(f"{marker}*"))
    for scratch in root.glob("opgen-scratch-*"):
        found += list(scratch.rglob(f"{marker}*"))
    return found


@pytest.mark.parametrize("device", DEVICES)
def test_a_large_write_fails_at_the_cap_and_leaves_nothing(device):
    marker = f"opgen-door-{uuid.uuid4().hex}"
    one_file = grade(solution(f"marker = {marker!r}\nfiles, megabytes, linger = 1, 48, 0\n" + FILL), device,
                     scratch_mb=16)
    assert not one_file["correct"] and "File too large" in one_file["detail"], one_file
    many = grade(solution(f"marker = {marker!r}\nfiles, megabytes, linger = 4, 12, 3\n" + FILL), device,
                 scratch_mb=16)
    assert many["reason"] == "crash" and SCRATCH_LIMIT in many["detail"], many
    assert _left_behind(marker) == []


@needs_landlock
def test_a_solution_writes_nowhere_but_its_own_scratch():
    from opgen.sandbox.pool import DEFAULT_CACHE_DIR

    marker = f"opgen-door-{uuid.uuid4().hex}"
    shared = [tempfile.gettempdir(), str(DEFAULT_CACHE_DIR), str(Path.home())]
    result = grade(solution(f"marker = {marker!r}\nfolders = {shared!r}\n" + SHARED), "cpu")
    assert not result["correct"] and "PermissionError" in result["detail"], result
    assert not any((Path(folder) / marker).exists() for folder in shared)
    kept = grade(solution(f"marker = {marker!r}\nfiles, megabytes, linger = 1, 1, 0\n" + FILL), "cpu")
    assert kept["reason"] == "ok", kept   # its own temporary folder: written, and gone after the grade
    assert _left_behind(marker) == []


# --- tasks written elsewhere ----------------------------------------------------------------------------------------

@needs_landlock
def test_a_task_from_elsewhere_writes_nothing_when_validated_or_checked(tmp_path):
    """`opgen validate` (and `check`, `time`) run tasks a user did not write: their workers are confined as a
    solution's, so a task that reaches past the static scan to the shell writes nothing outside its scratch."""
    planted = tmp_path / "planted"
    task = LINEAR_GELU.read_text().replace(
        "    def forward(self, x):\n",
        "    def forward(self, x):\n"
        f"        getattr(getattr(torch, 'o' + 's'), 'sys' + 'tem')('touch {planted}')\n", 1)
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "task.py").write_text(task)
    done = subprocess.run([sys.executable, "-m", "opgen", "validate", "--input", str(tmp_path / "tasks"), "--out",
                           str(tmp_path / "verdicts.jsonl"), "--device", "cpu", "--workers", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "verdicts.jsonl").exists() and not planted.exists()
