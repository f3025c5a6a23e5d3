"""The solution inside a model's completion: its text (a string, or a conversation of {"role", "content"} messages as
RL trainers pass them) and the fenced code block that holds `ModelNew`."""

from __future__ import annotations

import re

# A fenced block: ``` or ~~~, an optional language tag, the code, the closing fence (an unclosed block is cut off).
FENCED = re.compile(r"^[ \t]*(```|~~~)[ \t]*([\w.+-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.S | re.M)
PYTHON_TAGS = frozenset({"", "python", "py", "python3", "py3"})
DEFINES_MODEL_NEW = re.compile(r"^\s*(class\s+ModelNew\b|ModelNew\s*=)", re.M)


def completion_text(completion: object) -> str:
    """The text of a completion: a string as is; of a conversation, its assistant messages' contents joined (a content
    may itself be a list of {"type": "text", "text"} parts); anything else reads as empty."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    if not isinstance(completion, list | tuple):
        return ""
    messages = [m for m in completion if isinstance(m, dict)]
    replies = [m for m in messages if m.get("role") in (None, "assistant")] or messages
    return "\n".join(_content_text(m.get("content")) for m in replies)


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list | tuple):
        return "\n".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content
                         if isinstance(part, dict | str))
    return ""


def extract_code(completion: object) -> str | None:
    """The solution in a completion: the last fenced Python block that defines ModelNew, else the last fenced Python
    block, else None (no code block)."""
    blocks = [code for _, tag, code in FENCED.findall(completion_text(completion)) if tag.lower() in PYTHON_TAGS]
    for code in reversed(blocks):
        if DEFINES_MODEL_NEW.search(code):
            return code
    return blocks[-1] if blocks else None
