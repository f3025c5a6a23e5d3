"""A confined worker's own scratch folder and environment: what it may write, and what it knows of the user.

Each confined worker gets a fresh folder (`make_scratch`) that is its temporary folder, its home and its compile
caches (inductor's, Triton's, CUDA's, torch's extensions), the only place it may write besides the folders its pool
names (opgen/sandbox/landlock.py). The pool empties it after every task (`empty_scratch`: nothing a grade wrote is
seen by the next, and no grade reads a cache another wrote) and removes it with the worker; a task whose folder grows
past its limit is stopped (`scratch_bytes`).

Its environment is an allow-list (`allowed_environment`): what Python, torch, CUDA, Triton, the compilers and the
worker read, never the rest of the user's environment, where tokens and keys live (`HF_TOKEN`, cloud credentials).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

# variables a confined worker keeps, by name and by prefix; none whose name says it holds a secret
KEPT_NAMES = frozenset({"PATH", "LANG", "LANGUAGE", "TZ", "TERM", "USER", "LOGNAME", "SHELL", "CC", "CXX", "CUDAHOSTCXX",
                        "MAX_JOBS", "LD_LIBRARY_PATH", "LD_PRELOAD", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH",
                        "CPLUS_INCLUDE_PATH", "PKG_CONFIG_PATH", "CONDA_PREFIX", "VIRTUAL_ENV", "NINJA_STATUS"})
KEPT_PREFIXES = ("LC_", "PYTHON", "TORCH", "PYTORCH", "CUDA", "NVIDIA", "NVCC", "CUBLAS", "CUDNN", "CUFFT", "CURAND",
                 "CUSOLVER", "CUSPARSE", "NCCL_", "TRITON", "OMP_", "KMP_", "GOMP_", "MKL", "OPENBLAS", "DNNL_",
                 "ONEDNN_", "ATEN_", "MALLOC_", "OPGEN_")
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "APIKEY", "API_KEY", "ACCESS_KEY", "PRIVATE",
                "AUTH", "LICENSE", "LICENCE", "COOKIE", "SESSION")
# ... and names with one of these among their parts (split at "_"): `OPGEN_HUB_KEY`, `MY_TOK`, `KEYRING_PW`
SECRET_PARTS = frozenset({"KEY", "KEYS", "TOK", "TOKS", "PW", "PWD", "PASS", "PASSPHRASE", "CERT", "CERTS", "PEM",
                          "SIG", "SIGNATURE", "CRED", "CREDS", "SALT", "HMAC", "JWT", "BEARER", "OTP"})

# the folders of a scratch and the variables that point into them (set for each worker, so never part of what a
# zygote must agree on: opgen/sandbox/spawn.py)
SCRATCH_FOLDERS = ("tmp", "home", "cache")
SCRATCH_VARIABLES = {"TMPDIR": "tmp", "TMP": "tmp", "TEMP": "tmp", "HOME": "home", "TRITON_HOME": "home",
                     "XDG_CACHE_HOME": "cache", "TORCHINDUCTOR_CACHE_DIR": "cache/inductor",
                     "TRITON_CACHE_DIR": "cache/triton", "CUDA_CACHE_PATH": "cache/nv",
                     "TORCH_EXTENSIONS_DIR": "cache/torch_extensions"}
SCRATCH_ROOT_ENV = "OPGEN_SCRATCH_DIR"   # where scratch folders are made (default: the temporary folder)


def keeps(name: str) -> bool:
    """Whether a confined worker keeps the variable `name` of the grader's environment."""
    upper = name.upper()
    if any(word in upper for word in SECRET_WORDS) or not SECRET_PARTS.isdisjoint(upper.split("_")):
        return False
    return upper in KEPT_NAMES or upper.startswith(KEPT_PREFIXES)


def allowed_environment(environ: dict[str, str]) -> dict[str, str]:
    """The part of `environ` a confined worker keeps."""
    return {name: value for name, value in environ.items() if keeps(name)}


def make_scratch() -> Path:
    """A fresh scratch folder, with its parts."""
    root = os.environ.get(SCRATCH_ROOT_ENV) or None
    if root:
        Path(root).mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="opgen-scratch-", dir=root))
    for part in SCRATCH_FOLDERS:
        (folder / part).mkdir()
    return folder


def scratch_environment(folder: Path) -> dict[str, str]:
    """The variables that point a worker's temporary folder, home and caches into `folder`."""
    return {name: str(folder / part) for name, part in SCRATCH_VARIABLES.items()}


def empty_scratch(folder: Path) -> None:
    """Remove everything in the scratch `folder` but its parts' folders (the worker's current folder is one)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            path = Path(entry.path)
            if entry.name in SCRATCH_FOLDERS and entry.is_dir(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    for inner in os.scandir(path):
                        _remove(Path(inner.path))
            else:
                _remove(path)


def remove_scratch(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def scratch_bytes(folder: Path, stop_at: int | None = None) -> int:
    """The bytes the files beneath `folder` take on disk (their blocks, so a sparse file counts what it holds),
    counting stopped once past `stop_at`."""
    total = 0
    stack = [folder]
    while stack:
        current = stack.pop()
        with contextlib.suppress(OSError):
            for entry in os.scandir(current):
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    else:
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
        if stop_at is not None and total > stop_at:
            break
    return total
