"""Confine a solution worker's files with Landlock: it (and its children) may create, write, rename or delete files
only beneath its scratch folder and the folders its pool names (and write to the device files, the GPUs and
/dev/null, and to its own process's /proc entries),
so a solution cannot rewrite the grader's source, the dataset it is graded against, the compile caches a reference
uses or another grade's scratch; and it may read everything but the user's home, the temporary folders and
`/proc`, where only its own process's entries and the system's (cpuinfo, the driver's) stay readable, so it cannot
read a token from the user's files or from another process's environment. What Python, torch, CUDA and the compilers
need beneath a hidden folder (a virtual environment in the home folder) stays readable.

Landlock (Linux 5.13 and later) needs no privilege. A Landlocked process also cannot ptrace, nor open the memory
of, a process outside its domain. Where the kernel lacks it, `confine_files` says it could not and the worker runs
with the seccomp filter alone.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import glob
import os
import platform
import pwd
import stat
import struct
import sys
import tempfile
from pathlib import Path

WRITABLE_ENV = "OPGEN_SANDBOX_WRITABLE"   # extra folders a confined worker may write beneath, os.pathsep-separated
SCRATCH_ENV = "OPGEN_SANDBOX_SCRATCH"     # the worker's own scratch folder (its temporary folder, home and caches)
HIDDEN_ENV = "OPGEN_SANDBOX_HIDDEN"       # folders of the grader's a confined worker may not read (its home, temp)
_CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "CUDA_CACHE_PATH")
# the users' folders, the temporary ones, and the system's secrets that a worker run by root (its capabilities
# dropped, still the files' owner) could read: passwords' hashes, private keys, mounted service credentials
_SYSTEM_HIDDEN = ("/home", "/root", "/tmp", "/var/tmp", "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
                  "/etc/sudoers", "/etc/sudoers.d", "/etc/ssh", "/etc/ssl/private", "/run/secrets", "/var/run/secrets")
_DEVICE_FOLDERS = ("/dev", "/dev/nvidia-caps", "/dev/dri", "/dev/pts")
GPU_DEVICE_FILES = ("/dev/nvidiactl", "/dev/nvidia[0-9]*", "/dev/kfd")

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446   # one number on every architecture Linux unified
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_O_PATH, _O_CLOEXEC = 0o10000000, 0o2000000

_WRITE_FILE, _READ_FILE, _READ_DIR, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 2, 1 << 3, 1 << 4, 1 << 5
_MAKE = sum(1 << bit for bit in range(6, 13))   # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE = 1 << 13, 1 << 14            # ABI 2, ABI 3
_FILE_RIGHTS = _WRITE_FILE | _READ_FILE | _TRUNCATE   # the rights a rule on a file (not a folder) may carry
_READS = _READ_FILE | _READ_DIR


def write_rights(abi: int) -> int:
    """The rights over changing the file system a ruleset of this ABI version restricts."""
    rights = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    return rights


handled_rights = write_rights


def writable_folders(environ: dict[str, str] | None = None) -> list[Path]:
    """Where a solution worker may write: its scratch folder (SCRATCH_ENV), else the temporary folder and the compile
    caches; and the folders its pool names (WRITABLE_ENV: the grader's extensions folder)."""
    env = os.environ if environ is None else environ
    named = [Path(p) for p in env.get(WRITABLE_ENV, "").split(os.pathsep) if p]
    if env.get(SCRATCH_ENV):
        return [Path(env[SCRATCH_ENV]), *named]
    temporary = [Path(tempfile.gettempdir()), *([Path(env["TMPDIR"])] if env.get("TMPDIR") else [])]
    caches = [Path(env[name]) for name in _CACHE_VARIABLES if env.get(name)]
    home = Path(env.get("HOME") or Path.home())
    return [*temporary, Path(env.get("XDG_CACHE_HOME") or home / ".cache"), home / ".triton", *caches, *named]


def hidden_folders(environ: dict[str, str] | None = None) -> list[Path]:
    """What a solution worker may not read: the system's home and temporary folders, this user's home, and the
    folders its pool names (HIDDEN_ENV: the grader's home and temporary folder)."""
    env = os.environ if environ is None else environ
    try:
        home = pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        home = ""
    named = [p for p in env.get(HIDDEN_ENV, "").split(os.pathsep) if p]
    return [Path(p) for p in (*_SYSTEM_HIDDEN, home, *named) if p and p != "/"]


def needed_folders(environ: dict[str, str] | None = None) -> list[Path]:
    """What stays readable within the hidden folders: Python (its prefixes, import path and the package), the tools
    on PATH, the CUDA toolkit, and the folders the worker writes."""
    env = os.environ if environ is None else environ
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(sys.executable).parent), *sys.path]
    for name in ("PYTHONPATH", "PATH"):
        paths += env.get(name, "").split(os.pathsep)
    paths += [env.get("CUDA_HOME", ""), env.get("CUDA_PATH", ""), str(Path(__file__).resolve().parents[2])]
    return [Path(p) for p in paths if p and os.path.isabs(p)] + writable_folders(env)


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def read_rules(hidden: list[Path], needed: list[Path]) -> list[Path]:
    """The paths to allow reading beneath so that everything is readable but the `hidden` folders, and the `needed`
    paths within them: every sibling on the way down to a hidden folder, and the needed paths themselves."""
    hidden_real = {_real(path) for path in hidden}
    rules: list[Path] = []

    def walk(folder: Path) -> None:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            return
        for name in names:
            path = folder / name
            real = _real(path)
            if real in hidden_real or path in hidden_real:
                continue
            if path.is_symlink():
                # a rule holds for what the link leads to: a link into a hidden folder, or to a folder that holds
                # one (/var/run to /run), would open it; that folder is walked where it lies
                if not any(h.is_relative_to(real) or real.is_relative_to(h) for h in hidden_real):
                    rules.append(path)
            elif any(h.is_relative_to(path) for h in hidden_real):
                walk(path)
            else:
                rules.append(path)

    walk(Path("/"))
    rules += [p for p in needed if any(_real(p).is_relative_to(h) for h in hidden_real)]
    return rules


def _proc_rules() -> list[Path]:
    """The entries of /proc a worker may read: the system's (cpuinfo, meminfo, the driver's, sys) and its own
    process's (/proc/self resolves to it), never another process's."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    own = str(os.getpid())
    return [Path("/proc", name) for name in names if not name.isdigit() or name == own]


def gpu_device_present() -> bool:
    """Whether this machine shows a GPU's device files (NVIDIA's or AMD's)."""
    return any(glob.glob(pattern) for pattern in GPU_DEVICE_FILES)


def _device_files() -> list[Path]:
    """The device files a worker may write to: the character devices (the GPUs, null, zero, random)."""
    files = []
    for folder in _DEVICE_FOLDERS:
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                with contextlib.suppress(OSError):
                    if stat.S_ISCHR(entry.stat().st_mode):
                        files.append(Path(entry.path))
    return files


def _abi(libc) -> int:
    version = libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(0, int(version))


def _allow(libc, ruleset_fd: int, path: Path, rights: int) -> None:
    """One rule: `rights` beneath the folder `path`, or on the file (the file's share of them), if it exists."""
    try:
        fd = os.open(path, _O_PATH | _O_CLOEXEC)
    except OSError:
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_RIGHTS
        if rights:
            attr = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd), 12)   # packed, as the kernel's struct
            libc.syscall(_ADD_RULE, ctypes.c_int(ruleset_fd), ctypes.c_int(_RULE_PATH_BENEATH), attr,
                         ctypes.c_uint32(0))
    finally:
        os.close(fd)


def _make_folders(folders: list[Path]) -> None:
    """Make the writable folders that do not exist yet, where they can be: a rule holds only for a folder that
    exists."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.mkdir(parents=True, exist_ok=True)


def _libc():
    libc_name = ctypes.util.find_library("c")
    if platform.system() != "Linux" or not libc_name:
        return None
    libc = ctypes.CDLL(libc_name, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def confine_files(writes: bool = True, reads: bool = True, writable: list[Path] | None = None) -> dict[str, bool]:
    """Restrict this process's writes to beneath `writable` (default: writable_folders()) and the device files, and
    its reads to all but the hidden folders (hidden_folders(), with needed_folders() within them, and other
    processes' /proc entries); which of the two hold."""
    held = {"writes": False, "reads": False}
    libc = _libc()
    abi = _abi(libc) if libc is not None and (writes or reads) else 0
    if abi < 1:
        return held
    handled = (write_rights(abi) if writes else 0) | (_READS if reads else 0)
    if abi >= 2:
        # REFER (moving a file to another folder) is refused by any ruleset of ABI 2 and later unless a rule grants
        # it, handled or not: a ruleset for reads alone grants it everywhere (the moves Triton's cache makes within
        # the scratch once failed with EXDEV), as Landlock still refuses a move that would make a file more readable
        handled |= _REFER
    attr = ctypes.create_string_buffer(struct.pack("=Q", handled), 8)   # the file-system field alone: every ABI's
    ruleset_fd = libc.syscall(_CREATE_RULESET, attr, ctypes.c_size_t(8), ctypes.c_uint32(0))
    if ruleset_fd < 0:
        return held
    folders = writable_folders() if writable is None else writable
    if writable is None:
        _make_folders(folders)
    try:
        for folder in folders:
            _allow(libc, ruleset_fd, folder, handled)
        for device in _device_files():
            _allow(libc, ruleset_fd, device, handled)
        if writes and gpu_device_present():
            # its own /proc entries, beside a GPU alone: CUDA's start names its threads through
            # /proc/self/task/<tid>/comm (opened for writing, truncated) and fails when that is refused. No rule can
            # name those files ahead, so /proc/self/mem is writable there too: a solution can write its own memory
            # with no ctypes (docs/grading.md, "What it does not stop")
            _allow(libc, ruleset_fd, Path("/proc/self"), _WRITE_FILE | (_TRUNCATE if abi >= 3 else 0))
        if not writes and abi >= 2:
            _allow(libc, ruleset_fd, Path("/"), _REFER)
        if reads:
            hidden = [*hidden_folders(), Path("/proc")]
            for path in [*read_rules(hidden, needed_folders()), *_proc_rules()]:
                _allow(libc, ruleset_fd, path, _READS)
        libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return held
        if libc.syscall(_RESTRICT_SELF, ctypes.c_int(ruleset_fd), ctypes.c_uint32(0)) != 0:
            return held
        return {"writes": writes, "reads": reads}
    finally:
        os.close(ruleset_fd)


def confine_writes(folders: list[Path] | None = None) -> bool:
    """Restrict this process's writes alone to beneath `folders` (default: writable_folders()); whether it could."""
    return confine_files(writes=True, reads=False, writable=folders)["writes"]
