"""Fingerprints of a task for decontamination and dedup: normalised tokens, shingles, op and family signatures."""

from __future__ import annotations

import builtins
import hashlib
import io
import keyword
import re
import tokenize
import zlib
from dataclasses import dataclass

import numpy as np
import torch

from opgen.taskcode.ops import NOT_OPERATORS, VIEW_METHODS, OpEvent, op_events
from opgen.vocab.families import families_of, family_signature

FINGERPRINT_VERSION = 3  # bump when normalisation or what is cached changes: it keys the reference cache
SHINGLE_SIZE = 7  # tokens per shingle: chosen with scripts/analysis/decontam_curve.py (docs/decontamination.md)
# What fingerprint() raises on code that does not parse.
FINGERPRINT_ERRORS = (SyntaxError, tokenize.TokenError, ValueError, RecursionError)
IDENTIFIER = "V"   # placeholder for a user identifier
NUMBER = "N"       # placeholder for a numeric literal (contamination view)
_SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.STRING,
            tokenize.ENCODING, tokenize.ENDMARKER}
_TENSOR_ATTRS = frozenset(name for name in dir(torch.Tensor) if not name.startswith("_"))
# Names fixed by the task format are structure, not user identifiers.
_KEPT_NAMES = frozenset(keyword.kwlist) | frozenset(dir(builtins)) | {
    "self", "Model", "__init__", "forward", "get_inputs", "get_init_inputs"}
# Canonical spelling of the modules whose attribute names are API names worth keeping.
_MODULE_SPELLINGS = (("torch.nn.functional", "F"), ("torch.nn", "nn"), ("torch", "torch"), ("math", "math"),
                     ("transformers", "transformers"))


@dataclass(frozen=True)
class Fingerprint:
    """What dedup and decontamination compare: contamination shingles, dedup shingles, exact key, signatures."""

    model_shingles: frozenset[int]   # Model class, identifiers and numbers replaced (vs KernelBench)
    file_shingles: frozenset[int]    # whole file, identifiers replaced, numbers kept (within the set)
    exact_key: str                   # whole file, identifiers numbered by first use, numbers kept
    signature: tuple[str, ...]       # canonical operator sequence of Model.forward (binops and methods too)
    families: tuple[str, ...]        # family signature: vocabulary families of the `ops` calls, no-ops left out


# ---------------------------------------------------------------- operator signature

# Families that do not follow from lower-casing and dropping underscores (nn.X vs F.x vs torch.x vs binop).
OP_ALIASES = {
    "mm": "matmul", "bmm": "matmul", "addmm": "linear", "subtract": "sub", "multiply": "mul", "divide": "div",
    "truedivide": "div", "floordiv": "floordivide", "mod": "remainder", "clip": "clamp", "clampmin": "clamp",
    "clampmax": "clamp", "amax": "max", "amin": "min", "absolute": "abs", "negative": "neg",
    "expit": "sigmoid", "upsample": "interpolate", "upsamplingbilinear2d": "interpolate",
    "upsamplingnearest2d": "interpolate", "vectornorm": "norm", "rmsnorm": "rmsnorm",
}
# Operators that only reshape or are the identity at eval time: a disguise can add or drop them freely.
_NOT_IN_SIGNATURE = frozenset(
    {"view", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "contiguous", "expandas", "expand",
     "dropout", "dropout1d", "dropout2d", "dropout3d", "alphadropout", "featurealphadropout", "identity",
     "clone", "detach", "to", "type", "float", "double", "half"}
)
_NORM_DIMS = re.compile(r"^(batchnorm|instancenorm|lazybatchnorm|lazyinstancenorm)[123]d$")


def canonical_op(name: str) -> str | None:
    """The family of an operator name: `nn.ReLU`, `F.relu`, `torch.relu`, `torch.relu_` -> `relu`; None if a no-op.

    Derived, not listed: last dotted part, trailing `_` (in-place) dropped, lower-cased, underscores removed,
    a `loss` suffix dropped (nn.MSELoss ~ F.mse_loss), BatchNorm/InstanceNorm dimensions dropped (they map
    to one functional), then the small OP_ALIASES table.
    """
    if name in NOT_OPERATORS:
        return None
    base = name.rsplit(".", 1)[-1]
    if base.endswith("_") and not base.startswith("_"):
        base = base.rstrip("_")
    family = base.lower().replace("_", "")
    if family.endswith("loss") and len(family) > 4:
        family = family[: -len("loss")]
    family = _NORM_DIMS.sub(lambda match: match.group(1).removeprefix("lazy"), family)
    family = OP_ALIASES.get(family, family)
    if family in _NOT_IN_SIGNATURE or base in VIEW_METHODS:
        return None
    return family


def op_signature(code: str) -> tuple[str, ...]:
    """Canonical operator families of Model.forward in evaluation order (binops included: `x + b` ~ torch.add)."""
    return _op_signature(op_events(code))


def _op_signature(events: list[OpEvent]) -> tuple[str, ...]:
    families = (canonical_op(event.name) for event in events)
    return tuple(family for family in families if family)


# ---------------------------------------------------------------- normalised tokens


def _raw_tokens(code: str) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(code).readline))


def _canonical_module(dotted: str) -> str | None:
    for prefix, short in _MODULE_SPELLINGS:
        if dotted == prefix or dotted.startswith(prefix + "."):
            return short + dotted[len(prefix):]
    return None


def _logical_lines(tokens: list[tokenize.TokenInfo]) -> list[list[tokenize.TokenInfo]]:
    lines: list[list[tokenize.TokenInfo]] = [[]]
    for token in tokens:
        if token.type in _SKIPPED:
            continue
        lines[-1].append(token)
        if token.type == tokenize.NEWLINE:
            lines.append([])
    return [line for line in lines if line]


def _import_aliases(line: list[tokenize.TokenInfo]) -> dict[str, str] | None:
    """Local name -> canonical API spelling for an import line (None when the line is no import)."""
    words = [t.string for t in line if t.type != tokenize.NEWLINE]
    if not words or words[0] not in ("import", "from"):
        return None
    aliases: dict[str, str] = {}
    module = ""
    if words[0] == "from":
        split = words.index("import") if "import" in words else len(words)
        module, words = "".join(words[1:split]) + ".", words[split:]
    items = " ".join(words[1:]).replace("(", " ").replace(")", " ").split(",")
    for item in items:
        parts = item.replace(" . ", ".").split()
        if not parts:
            continue
        dotted = module + parts[0].replace(" ", "")
        local = parts[2] if len(parts) == 3 and parts[1] == "as" else parts[0].split(".")[0]
        target = dotted if (len(parts) == 3 or module) else parts[0].split(".")[0]
        canonical = _canonical_module(target)
        if canonical:
            aliases[local] = canonical
    return aliases


def normalized_lines(code: str) -> tuple[list[list[str]], tuple[int, int] | None]:
    """Logical lines of normalised tokens (imports dropped), and the line span of `class Model`.

    Kept: keywords, builtins, `self`, operators, torch/nn/F/math API names (import aliases resolved), tensor
    attribute names after a dot. Replaced: other identifiers by `V<k>` (k = order of first use).
    Dropped: strings, comments, blank lines, indentation, trailing commas. Raises tokenize.TokenError or
    SyntaxError (IndentationError) on code that does not tokenize.
    """
    aliases: dict[str, str] = {}
    numbering: dict[str, str] = {}
    out_lines: list[list[str]] = []
    model_span: list[int] | None = None
    for line in _logical_lines(_raw_tokens(code)):
        imported = _import_aliases(line)
        if imported is not None:
            aliases.update(imported)
            continue
        if line[0].start[1] == 0 and model_span is not None and len(model_span) == 1:
            model_span.append(len(out_lines))
        if line[0].string == "class" and len(line) > 1 and line[1].string == "Model" and line[0].start[1] == 0:
            model_span = [len(out_lines)]
        normalized = _normalize_line(line, aliases, numbering)
        if normalized != [";"]:  # a docstring-only statement
            out_lines.append(normalized)
    span = None
    if model_span is not None:
        span = (model_span[0], model_span[1] if len(model_span) == 2 else len(out_lines))
    return out_lines, span


def _normalize_line(line: list[tokenize.TokenInfo], aliases: dict[str, str], numbering: dict[str, str]) -> list[str]:
    out: list[str] = []
    previous = ""
    api_chain = False     # the previous name was an API module or an attribute of one
    for index, token in enumerate(line):
        kind, text = token.type, token.string
        if kind == tokenize.NEWLINE:
            out.append(";")
            continue
        if kind == tokenize.OP:
            following = line[index + 1].string if index + 1 < len(line) else ""
            if text == "," and following in (")", "]", "}"):
                continue
            out.append(text)
            if text != ".":
                api_chain = False
            previous = text
            continue
        if kind != tokenize.NAME:
            out.append(text)
            previous, api_chain = text, False
            continue
        after_dot = previous == "."
        if after_dot and api_chain:
            out.append(text)
        elif after_dot and len(out) >= 2 and out[-2] == "self":
            out.append(numbering.setdefault(text, f"{IDENTIFIER}{len(numbering)}"))
            api_chain = False
        elif after_dot:
            out.append(text if text in _TENSOR_ATTRS else numbering.setdefault(text, f"{IDENTIFIER}{len(numbering)}"))
        elif text in aliases:
            out.append(aliases[text])
            api_chain = True
        elif text in _KEPT_NAMES:
            out.append(text)
            api_chain = False
        else:
            out.append(numbering.setdefault(text, f"{IDENTIFIER}{len(numbering)}"))
            api_chain = False
        previous = text
    return out


_TOKEN_HASHES: dict[str, int] = {}
_MULTIPLIER = np.uint64(0x100000001B3)


def _shingles(tokens: list[str], size: int) -> frozenset[int]:
    """32-bit hashes of every run of `size` consecutive tokens (a polynomial hash over stable token hashes)."""
    if not tokens:
        return frozenset()
    hashes = [_TOKEN_HASHES.get(t) or _TOKEN_HASHES.setdefault(t, zlib.crc32(t.encode()) or 1) for t in tokens]
    values = np.array(hashes, dtype=np.uint64)
    count = max(1, len(values) - size + 1)
    combined = np.zeros(count, dtype=np.uint64)
    for offset in range(min(size, len(values))):
        combined = combined * _MULTIPLIER + values[offset:offset + count]  # wraps mod 2**64, as intended
    folded = (combined ^ (combined >> np.uint64(32))) & np.uint64(0xFFFFFFFF)
    return frozenset(folded.tolist())


def _placeholders(tokens: list[str], numbers: bool) -> list[str]:
    """Numbered identifiers (`V<k>`) to one placeholder; numbers to a placeholder too when `numbers`."""
    out = []
    for token in tokens:
        first = token[0]
        if first == IDENTIFIER and token[1:].isdigit():
            out.append(IDENTIFIER)
        elif numbers and (first.isdigit() or first == "." and len(token) > 1):
            out.append(NUMBER)
        else:
            out.append(token)
    return out


def fingerprint(code: str, shingle_size: int = SHINGLE_SIZE) -> Fingerprint:
    """All fingerprints of one task. Raises SyntaxError / tokenize.TokenError on code that does not parse."""
    lines, span = normalized_lines(code)
    whole = [token for line in lines for token in line]
    model = [token for line in lines[span[0]:span[1]] for token in line] if span else whole
    events = op_events(code)
    return Fingerprint(
        model_shingles=_shingles(_placeholders(model, numbers=True), shingle_size),
        file_shingles=_shingles(_placeholders(whole, numbers=False), shingle_size),
        exact_key=hashlib.sha256(" ".join(whole).encode()).hexdigest(),
        signature=_op_signature(events),
        families=family_signature(families_of(event.name for event in events if event.kind == "call")),
    )


def jaccard(first: frozenset[int], second: frozenset[int]) -> float:
    """Exact Jaccard similarity of two shingle sets (0 for two empty sets)."""
    common = len(first & second)
    union = len(first) + len(second) - common
    return common / union if union else 0.0
