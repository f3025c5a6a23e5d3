"""Confine a sandbox worker that runs solution code, before any of that code runs. Each piece is the kernel's, so it
holds however the code spells its calls (computed attribute names, `sys.modules`, ctypes):

- a seccomp filter (`filter_program`): signals only to the worker itself and its own process group, so a solution
  cannot kill or stop the grader or the trainer (`kill(getppid(), SIGKILL)`, `kill(-1, ...)`); no ptrace and no
  reads or writes of another process's memory; no network: sockets of the local (AF_UNIX) family alone, `connect`
  answered "no such file" whatever the address (as if nothing listened anywhere), and no io_uring (which could make
  sockets in their place). A socket may still `bind`, `listen` and `accept`: CUDA's start binds a local socket of its
  own (`@cuda-uvmfd-...`) and fails when that is refused, and with `connect` refused nothing can reach it;
- Landlock (opgen/sandbox/landlock.py): files written only beneath the worker's scratch and the folders its pool
  names, and read only from the system and Python's folders, not the user's home, the temporary folder or other
  processes' `/proc` entries (a grader's `environ` there);
- no capabilities (`drop_capabilities`): a worker run by root keeps root's files but none of root's powers;
- a size limit on any one file it writes (`limit_file_size`);
- a keeper (opgen/sandbox/keeper.py): every process it starts ends with it.

`OPGEN_SANDBOX_CONFINE_SKIP` names pieces to leave out (comma-separated, from PIECES): the worker's ready line and
the pool's warning say which pieces hold, so a machine that refuses one is never silently unconfined.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import platform
import resource
import signal
import struct

from opgen.sandbox.landlock import confine_files

CONFINE_ENV = "OPGEN_SANDBOX_CONFINE"   # "1": the worker confines itself before it runs any task
# Whether the confinement has run CUDA's start, a Triton kernel and the GPU test suite on a GPU: until it has, solution
# workers on CUDA run unconfined (and say so), since a confinement that keeps CUDA from starting fails every grade
VERIFIED_ON_CUDA = False
SKIP_ENV = "OPGEN_SANDBOX_CONFINE_SKIP"
FILE_LIMIT_ENV = "OPGEN_SANDBOX_FILE_MB"   # the largest file a confined worker may write, in MB
PIECES = ("signals", "network", "writes", "reads", "capabilities", "file_size", "processes")

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# Calls that signal a process by its id (first argument: a pid, a thread group id, or a process group as -pgid).
_SIGNALLING = {
    "x86_64": {"kill": 62, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297},
    "aarch64": {"kill": 129, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240},
}
# Calls that make a socket (first argument: its family): allowed for AF_UNIX alone.
_SOCKETS = {"x86_64": {"socket": 41, "socketpair": 53}, "aarch64": {"socket": 198, "socketpair": 199}}
# Calls refused outright: a thread by id alone, a process by a file descriptor, and reaching into another process.
_REFUSED = {
    "x86_64": {"tkill": 200, "pidfd_send_signal": 424, "pidfd_getfd": 438, "ptrace": 101, "process_vm_writev": 311,
               "process_vm_readv": 310},
    "aarch64": {"tkill": 130, "pidfd_send_signal": 424, "pidfd_getfd": 438, "ptrace": 117, "process_vm_writev": 271,
                "process_vm_readv": 270},
}
# ... and the network's: a socket reaches nothing without `connect` (io_uring could connect in its place).
_NETWORK_REFUSED = {
    "x86_64": {"connect": 42, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427},
    "aarch64": {"connect": 203, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427},
}
_AF_UNIX = 1
# What a refused `connect` answers: "no such file", what a client meets where no server runs. CUDA's start tries to
# connect to the MPS control socket (/tmp/nvidia-mps/control) and goes on without MPS on that answer. The filter cannot
# read the address, so every connect gets it.
CONNECT_ERRNO = errno.ENOENT
_X32_SYSCALL_BIT = 0x40000000

_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_RET_EPERM = _RET_ERRNO | errno.EPERM
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_NR_OFFSET, _ARCH_OFFSET, _ARG0_OFFSET = 0, 4, 16   # struct seccomp_data (the first argument's low word)


def machine() -> str | None:
    """The architecture as the filter knows it, or None where it has no filter."""
    name = platform.machine().lower()
    return {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(name)


def filter_program(machine: str, pid: int, signals: bool = True, network: bool = True,
                   connect_errno: int = CONNECT_ERRNO) -> list[tuple[int, int, int, int]]:
    """The BPF program, as (code, jump if true, jump if false, k) instructions: calls of another architecture or
    ABI refused; with `signals`, the signalling calls allowed only towards `pid`, its process group (-pid) or the
    caller's own group (0), and the calls that reach into another process refused; with `network`, sockets of the
    AF_UNIX family alone and the network's calls refused (`connect` with `connect_errno`); everything else allowed."""
    refused = {**(_REFUSED[machine] if signals else {}), **(_NETWORK_REFUSED[machine] if network else {})}
    connect = refused.pop("connect", None) if connect_errno != errno.EPERM else None
    checks = []   # (syscall numbers, the first argument's values that are allowed)
    if signals:
        checks.append((sorted(_SIGNALLING[machine].values()), (pid, 0, (-pid) & 0xFFFFFFFF)))
    if network:
        checks.append((sorted(_SOCKETS[machine].values()), (_AF_UNIX,)))
    # labels: each instruction is a tuple, or ("jump", label, k) / ("arch", k) resolved below
    program: list = [(_LD_W_ABS, 0, 0, _ARCH_OFFSET), ("arch", _AUDIT_ARCH[machine]), (_LD_W_ABS, 0, 0, _NR_OFFSET),
                     ("x32", _X32_SYSCALL_BIT)]
    program += [("jump", "refuse", number) for number in sorted(refused.values())]
    if connect is not None:
        program.append(("jump", "refuse connect", connect))
    for index, (numbers, _) in enumerate(checks):
        program += [("jump", f"check{index}", number) for number in numbers]
    program.append((_RET_K, 0, 0, _RET_ALLOW))   # any other call
    for index, (_, allowed) in enumerate(checks):
        program.append(f"check{index}")
        program.append((_LD_W_ABS, 0, 0, _ARG0_OFFSET))
        program += [("jump", "allow", value) for value in allowed]
        program.append((_RET_K, 0, 0, _RET_EPERM))
    program += ["allow", (_RET_K, 0, 0, _RET_ALLOW), "refuse", (_RET_K, 0, 0, _RET_EPERM)]
    if connect is not None:
        program += ["refuse connect", (_RET_K, 0, 0, _RET_ERRNO | connect_errno)]
    return _resolved(program)


def _resolved(program: list) -> list[tuple[int, int, int, int]]:
    """The program with its labels (strings) removed and its jumps made relative."""
    positions, instructions = {}, []
    for item in program:
        if isinstance(item, str):
            positions[item] = len(instructions)
        else:
            instructions.append(item)
    resolved = []
    for index, item in enumerate(instructions):
        if item[0] == "jump":
            resolved.append((_JEQ_K, positions[item[1]] - index - 1, 0, item[2]))
        elif item[0] == "arch":   # the right architecture: go on; another: refuse
            resolved.append((_JEQ_K, 0, positions["refuse"] - index - 1, item[1]))
        elif item[0] == "x32":
            resolved.append((_JGE_K, positions["refuse"] - index - 1, 0, item[1]))
        else:
            resolved.append(item)
    return resolved


def _libc():
    name = ctypes.util.find_library("c")
    if not name or platform.system() != "Linux":
        return None
    libc = ctypes.CDLL(name, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return libc


def install_filter(signals: bool = True, network: bool = True, connect_errno: int = CONNECT_ERRNO) -> bool:
    """Install the filter on this process (its threads and children inherit it); whether it could."""
    arch, libc = machine(), _libc()
    if arch is None or libc is None or not (signals or network):
        return False
    program = filter_program(arch, os.getpid(), signals, network, connect_errno)
    packed = b"".join(struct.pack("HBBI", *instruction) for instruction in program)
    instructions = ctypes.create_string_buffer(packed, len(packed))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program), ctypes.addressof(instructions))
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) == 0


def confine_signals() -> bool:
    """The signal half of the filter alone (tests probe whether a machine takes a filter with it)."""
    return install_filter(signals=True, network=False)


def drop_capabilities() -> bool:
    """Give up every capability, for good (the bounding set too, so no program run later gets one back); whether this
    process now holds none. A worker run by root then keeps root's files but cannot read other users' files, trace
    or read another process, load modules, mount or reconfigure the network."""
    libc = _libc()
    if libc is None:
        return False
    with contextlib.suppress(OSError, ValueError):
        last = int(open("/proc/sys/kernel/cap_last_cap").read())
        for capability in range(last + 1):
            libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0)   # refused without CAP_SETPCAP: nothing to drop then
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = struct.pack("=Ii", 0x20080522, 0)   # _LINUX_CAPABILITY_VERSION_3, this process
    data = bytes(24)                              # two (effective, permitted, inheritable) triples, all empty
    libc.capset.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.capset(header, data)
    return _holds_no_capability()


def _holds_no_capability() -> bool:
    try:
        status = open("/proc/self/status").read()
    except OSError:
        return False
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return all(int(fields.get(name, "1").strip(), 16) == 0 for name in ("CapEff", "CapPrm", "CapAmb"))


def limit_file_size(megabytes: int) -> bool:
    """No file written larger than `megabytes`: a write past it fails with EFBIG (SIGXFSZ is ignored, so the write
    fails rather than the process); whether the limit holds."""
    limit = megabytes << 20
    try:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    except (OSError, ValueError, AttributeError):
        return False
    return True


def confined_on(device: str) -> bool:
    """Whether solution workers on `device` are confined: on the CPU always; on CUDA once the confinement is verified
    there (VERIFIED_ON_CUDA), or when OPGEN_SANDBOX_CONFINE=1 asks for it (OPGEN_SANDBOX_CONFINE=0: nowhere)."""
    setting = os.environ.get(CONFINE_ENV)
    if setting in ("0", "1"):
        return setting == "1"
    return device != "cuda" or VERIFIED_ON_CUDA


def skipped_pieces(environ=None) -> set[str]:
    """The pieces the environment leaves out (SKIP_ENV)."""
    env = os.environ if environ is None else environ
    return {piece.strip() for piece in env.get(SKIP_ENV, "").split(",") if piece.strip() in PIECES}


def confine(pieces: set[str], file_mb: int | None = None, writable: list | None = None,
            connect_errno: int = CONNECT_ERRNO) -> dict[str, bool]:
    """Confine this process with `pieces` (of PIECES; "processes", the keeper, is the worker's to start) and say which
    hold. Capabilities go first (dropping them needs the others' leave), the filter last (it would refuse Landlock's
    own calls nothing). `writable` replaces the folders Landlock lets it write beneath (landlock.writable_folders)."""
    held = dict.fromkeys(PIECES, False)
    if "file_size" in pieces and file_mb is not None:
        held["file_size"] = limit_file_size(file_mb)
    held.update(confine_files(writes="writes" in pieces, reads="reads" in pieces, writable=writable))
    if "capabilities" in pieces:
        held["capabilities"] = drop_capabilities()
    signals, network = "signals" in pieces, "network" in pieces
    if install_filter(signals, network, connect_errno):
        held.update(signals=signals, network=network)
    return held


def confine_if_asked() -> dict[str, bool]:
    """In a worker: confine it when its environment asks (CONFINE_ENV), with every piece but the skipped ones; which
    pieces hold (PIECES)."""
    if os.environ.get(CONFINE_ENV) != "1":
        return dict.fromkeys(PIECES, False)
    megabytes = os.environ.get(FILE_LIMIT_ENV, "")
    return confine(set(PIECES) - skipped_pieces(), int(megabytes) if megabytes.isdigit() else None)
