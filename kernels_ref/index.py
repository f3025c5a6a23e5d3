"""Fingerprints of the KernelBench reference, computed once and cached on disk by the reference's content hash."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kernels_ref.fingerprint import FINGERPRINT_ERRORS, FINGERPRINT_VERSION, SHINGLE_SIZE, fingerprint
from kernels_ref.load import load_reference
from opgen.vocab.families import family_table_digest

SIGNATURE_LEVELS = (1, 2, 3)  # an equal operator or family sequence with these levels' tasks is contamination
DEFAULT_CACHE = Path(os.environ.get("OPGEN_CACHE", "~/.cache/opgen")).expanduser()


@dataclass
class ReferenceIndex:
    """KernelBench fingerprints: per problem its name (`level2/1_Conv2D_ReLU_BiasAdd.py`), level, operator
    signature, family signature and Model-class shingles; answers exact Jaccard nearest-neighbour and
    signature queries."""

    names: list[str]
    levels: list[int]
    signatures: list[tuple[str, ...]]
    shingles: list[frozenset[int]]
    content_hash: str
    shingle_size: int
    families: list[tuple[str, ...]] = field(default_factory=list)
    _by_signature: dict[tuple[str, ...], list[int]] = field(default_factory=dict, repr=False)
    _by_families: dict[tuple[str, ...], list[int]] = field(default_factory=dict, repr=False)
    _matrix: np.ndarray | None = field(default=None, repr=False)
    _columns: dict[int, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for index, (signature, level) in enumerate(zip(self.signatures, self.levels)):
            if signature and level in SIGNATURE_LEVELS:
                self._by_signature.setdefault(signature, []).append(index)
        for index, (families, level) in enumerate(zip(self.families, self.levels)):
            if families and level in SIGNATURE_LEVELS:
                self._by_families.setdefault(families, []).append(index)
        vocabulary = sorted(set().union(*self.shingles)) if self.shingles else []
        self._columns = {shingle: column for column, shingle in enumerate(vocabulary)}
        self._matrix = np.zeros((len(vocabulary), len(self.names)), dtype=np.int32)
        for index, shingles in enumerate(self.shingles):
            self._matrix[[self._columns[s] for s in shingles], index] = 1
        self._sizes = np.array([len(s) for s in self.shingles], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.names)

    def signature_match(self, signature: tuple[str, ...]) -> list[int]:
        """Indices of level 1-3 problems whose operator signature equals `signature`."""
        return self._by_signature.get(tuple(signature), [])

    def family_match(self, families: tuple[str, ...]) -> list[int]:
        """Indices of level 1-3 problems whose family signature equals `families`."""
        return self._by_families.get(tuple(families), [])

    def similarities(self, shingles: frozenset[int]) -> np.ndarray:
        """Exact Jaccard of `shingles` with every problem (the intersection counted through a 0/1 matrix)."""
        rows = [self._columns[s] for s in shingles if s in self._columns]
        if not rows:
            return np.zeros(len(self.names))
        intersection = self._matrix[rows].sum(axis=0)
        union = self._sizes + len(shingles) - intersection
        return intersection / np.maximum(union, 1)

    def nearest(self, shingles: frozenset[int]) -> tuple[int, float]:
        """The most similar problem (lowest index on ties) and its Jaccard similarity."""
        scores = self.similarities(shingles)
        best = int(np.argmax(scores))
        return best, float(scores[best])


def problem_name(row: dict) -> str:
    """The path-like name of a problem: `level<k>/<file name>`."""
    name = row["name"] if row["name"].endswith(".py") else row["name"] + ".py"
    return f"level{row['level']}/{name}"


def content_hash(rows: list[dict], shingle_size: int) -> str:
    """sha256 of the reference rows, the fingerprint parameters and the family table (the cache key)."""
    digest = hashlib.sha256(f"{FINGERPRINT_VERSION}|{shingle_size}|{family_table_digest()}".encode())
    for row in rows:
        digest.update(json.dumps([row["level"], row["problem_id"], row["name"], row["code"]]).encode())
    return digest.hexdigest()


def build_index(rows: list[dict], shingle_size: int = SHINGLE_SIZE) -> ReferenceIndex:
    """Fingerprint every reference problem (no cache)."""
    signatures, shingles, families = [], [], []
    for row in rows:
        try:
            print_ = fingerprint(row["code"], shingle_size)
            signatures.append(print_.signature)
            shingles.append(print_.model_shingles)
            families.append(print_.families)
        except FINGERPRINT_ERRORS:  # a reference file we cannot read matches nothing
            signatures.append(())
            shingles.append(frozenset())
            families.append(())
    return ReferenceIndex([problem_name(r) for r in rows], [r["level"] for r in rows], signatures, shingles,
                          content_hash(rows, shingle_size), shingle_size, families)


def reference_index(source: str | None = None, cache_dir: str | os.PathLike | None = None,
                    shingle_size: int = SHINGLE_SIZE) -> ReferenceIndex:
    """The fingerprinted reference for `source` (see load_reference), from `cache_dir` when cached there."""
    rows = load_reference(source)
    key = content_hash(rows, shingle_size)
    cache = Path(cache_dir).expanduser() if cache_dir else DEFAULT_CACHE
    path = cache / f"kernelbench-{key[:24]}.json"
    if path.is_file():
        try:
            data = json.loads(path.read_text())
            return ReferenceIndex(data["names"], data["levels"], [tuple(s) for s in data["signatures"]],
                                  [frozenset(s) for s in data["shingles"]], key, shingle_size,
                                  [tuple(f) for f in data["families"]])
        except (OSError, ValueError, KeyError):
            pass  # a damaged cache file is rebuilt below
    index = build_index(rows, shingle_size)
    data = {"content_hash": key, "shingle_size": shingle_size, "names": index.names, "levels": index.levels,
            "signatures": [list(s) for s in index.signatures], "shingles": [sorted(s) for s in index.shingles],
            "families": [list(f) for f in index.families]}
    try:
        cache.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs the recomputation
    return index
