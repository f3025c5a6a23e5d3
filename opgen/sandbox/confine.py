"""Confine a sandbox worker that runs solution code: a seccomp filter lets it (and its children) signal only itself
and its own process group, and refuses ptrace and writes into other processes, so a solution cannot kill or
stop the grader that called it, nor the trainer around it (`kill(getppid(), SIGKILL)`, `kill(-1, ...)`).

A static scan of the source comes first, but a computed attribute name reaches `os.kill` past any scan; the filter
holds whatever the code is. Linux on x86-64 and arm64; elsewhere `confine_signals` says it could not.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import platform
import struct

from opgen.sandbox.landlock import confine_writes

CONFINE_ENV = "OPGEN_SANDBOX_CONFINE"   # "1": the worker confines itself before it runs any task

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7, "arm64": 0xC00000B7}
# Calls that signal a process by its id (first argument: a pid, a thread group id, or a process group as -pgid).
_SIGNALLING = {
    "x86_64": {"kill": 62, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297},
    "aarch64": {"kill": 129, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240},
}
# Calls refused outright: a thread by id alone, a process by a file descriptor, and reaching into another process.
_REFUSED = {
    "x86_64": {"tkill": 200, "pidfd_send_signal": 424, "pidfd_getfd": 438, "ptrace": 101, "process_vm_writev": 311,
               "process_vm_readv": 310},
    "aarch64": {"tkill": 130, "pidfd_send_signal": 424, "pidfd_getfd": 438, "ptrace": 117, "process_vm_writev": 271,
                "process_vm_readv": 270},
}
_X32_SYSCALL_BIT = 0x40000000

_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW, _RET_EPERM = 0x7FFF0000, 0x00050000 | errno.EPERM
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_NR_OFFSET, _ARCH_OFFSET, _ARG0_OFFSET = 0, 4, 16   # struct seccomp_data (the first argument's low word)


def _machine() -> str | None:
    machine = platform.machine().lower()
    return {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(machine)


def filter_program(machine: str, pid: int) -> list[tuple[int, int, int, int]]:
    """The BPF program, as (code, jump if true, jump if false, k) instructions: calls of another architecture or
    ABI refused; the signalling calls allowed only towards `pid`, its process group (-pid) or the caller's own
    group (0); the refused calls refused; everything else allowed."""
    signalling, refused = _SIGNALLING[machine], _REFUSED[machine]
    head = [(_LD_W_ABS, 0, 0, _ARCH_OFFSET), ("arch", _AUDIT_ARCH[machine]), (_LD_W_ABS, 0, 0, _NR_OFFSET),
            ("x32", _X32_SYSCALL_BIT)]
    head += [("refuse", number) for number in sorted(refused.values())]
    head += [("check", number) for number in sorted(signalling.values())]
    head += [(_RET_K, 0, 0, _RET_ALLOW)]
    check = [(_LD_W_ABS, 0, 0, _ARG0_OFFSET), ("allow", pid), ("allow", 0), ("allow", (-pid) & 0xFFFFFFFF),
             (_RET_K, 0, 0, _RET_EPERM)]
    allow_at = len(head) + len(check)
    refuse_at, check_at = allow_at + 1, len(head)
    program = []
    for index, instruction in enumerate(head + check):
        if len(instruction) == 4:
            program.append(instruction)
            continue
        kind, k = instruction
        skip = {"arch": None, "x32": refuse_at, "refuse": refuse_at, "check": check_at, "allow": allow_at}[kind]
        if kind == "arch":   # the right architecture: go on; another: refuse
            program.append((_JEQ_K, 0, refuse_at - index - 1, k))
        elif kind == "x32":
            program.append((_JGE_K, skip - index - 1, 0, k))
        else:
            program.append((_JEQ_K, skip - index - 1, 0, k))
    return program + [(_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, _RET_EPERM)]


def confine_signals() -> bool:
    """Install the filter on this process (its threads and children inherit it); whether it could."""
    machine = _machine()
    libc_name = ctypes.util.find_library("c")
    if machine is None or not libc_name or platform.system() != "Linux":
        return False
    program = filter_program(machine, os.getpid())
    packed = b"".join(struct.pack("HBBI", *instruction) for instruction in program)
    instructions = ctypes.create_string_buffer(packed, len(packed))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program), ctypes.addressof(instructions))
    libc = ctypes.CDLL(libc_name, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) == 0


def confine_if_asked() -> dict[str, bool]:
    """In a worker: confine it when its environment asks (CONFINE_ENV): its signals (this module's filter) and its
    file writes (opgen/sandbox/landlock.py); which of the two hold."""
    if os.environ.get(CONFINE_ENV) != "1":
        return {"signals": False, "writes": False}
    return {"signals": confine_signals(), "writes": confine_writes()}
