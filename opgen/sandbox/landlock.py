"""Confine a solution worker's file writes with Landlock: it (and its children) may create, write, rename or delete
files only beneath its scratch and cache folders, so a solution cannot rewrite the grader's source, the dataset it
is graded against or anything else its user owns. Reads are not restricted.

Landlock (Linux 5.13 and later) needs no privilege. A Landlocked process also cannot ptrace, nor open the memory
of, a process outside its domain (`/proc/<pid>/mem` of the grader that started it). Where the kernel lacks it,
`confine_writes` says it could not and the worker runs with the seccomp filter alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import struct
import tempfile
from pathlib import Path

WRITABLE_ENV = "OPGEN_SANDBOX_WRITABLE"   # extra folders a confined worker may write beneath, os.pathsep-separated
_CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "CUDA_CACHE_PATH")

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446   # one number on every architecture Linux unified
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_O_PATH, _O_CLOEXEC = 0o10000000, 0o2000000

# The rights over changing the file system (each ABI version's additions after it); reading and executing stay free.
_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKE = sum(1 << bit for bit in range(6, 13))   # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE = 1 << 13, 1 << 14            # ABI 2, ABI 3


def handled_rights(abi: int) -> int:
    """The write rights a ruleset of this ABI version restricts."""
    rights = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    return rights


def writable_folders(environ: dict[str, str] | None = None) -> list[Path]:
    """Where a solution worker may write: the temporary folder, the compile caches (inductor, Triton, torch
    extensions, CUDA's), the user's cache folder, /dev (null, shm, the GPUs) and the folders the pool names
    (WRITABLE_ENV: the grader's extensions folder)."""
    env = os.environ if environ is None else environ
    temporary = [Path(tempfile.gettempdir()), *([Path(env["TMPDIR"])] if env.get("TMPDIR") else [])]
    return [*temporary, *_made_on_first_use(env), _home(env) / ".nv", Path("/dev")]


def _home(env) -> Path:
    return Path(env.get("HOME") or Path.home())


def _made_on_first_use(env) -> list[Path]:
    """The folders a tool makes when it first writes there (the user's cache folder, Triton's, the caches and folders
    the environment names): made before the rules, since a rule holds only for a folder that exists. CUDA's own
    default cache (~/.nv) is not made: CUDA does without one."""
    named = [Path(env[name]) for name in _CACHE_VARIABLES if env.get(name)]
    named += [Path(p) for p in env.get(WRITABLE_ENV, "").split(os.pathsep) if p]
    return [Path(env.get("XDG_CACHE_HOME") or _home(env) / ".cache"), _home(env) / ".triton", *named]


def _make_caches(env) -> None:
    """Make the folders of `_made_on_first_use`, where they can be."""
    for folder in _made_on_first_use(env):
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass


def _abi(libc) -> int:
    version = libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(0, int(version))


def _allow_beneath(libc, ruleset_fd: int, folder: Path, rights: int) -> None:
    """One rule: every handled right beneath `folder`, if it exists."""
    try:
        fd = os.open(folder, _O_PATH | _O_CLOEXEC)
    except OSError:
        return
    try:
        attr = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd), 12)   # packed, as the kernel's struct
        libc.syscall(_ADD_RULE, ctypes.c_int(ruleset_fd), ctypes.c_int(_RULE_PATH_BENEATH), attr, ctypes.c_uint32(0))
    finally:
        os.close(fd)


def confine_writes(folders: list[Path] | None = None) -> bool:
    """Restrict this process's writes to beneath `folders` (default: writable_folders()); whether it could."""
    libc_name = ctypes.util.find_library("c")
    if platform.system() != "Linux" or not libc_name:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = _abi(libc)
    if abi < 1:
        return False
    rights = handled_rights(abi)
    attr = ctypes.create_string_buffer(struct.pack("=Q", rights), 8)   # the file-system field alone: every ABI's
    ruleset_fd = libc.syscall(_CREATE_RULESET, attr, ctypes.c_size_t(8), ctypes.c_uint32(0))
    if ruleset_fd < 0:
        return False
    if folders is None:
        _make_caches(os.environ)
    try:
        for folder in folders if folders is not None else writable_folders():
            _allow_beneath(libc, ruleset_fd, folder, rights)
        libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return False
        return libc.syscall(_RESTRICT_SELF, ctypes.c_int(ruleset_fd), ctypes.c_uint32(0)) == 0
    finally:
        os.close(ruleset_fd)
