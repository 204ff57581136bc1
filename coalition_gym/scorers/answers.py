"""Final-answer extraction and normalisation shared by text tasks.

The tasks ask every model to end with a line ``Answer: <answer>``. Extraction rule, first match wins:
1. the text after the last ``Answer:`` / ``Final answer:`` marker, to the end of that line;
2. the content of the last ``\\boxed{...}``;
3. the text after the last "the answer is";
4. the whole reply, when it is a single short line of at most three words (compact prompts to
   tiny models end at ``Answer:`` and the model writes only the answer); a sentence such as
   "I am not sure." is not an answer.
Anything else is unparseable (``None``): it scores 0 and is recorded, never raised.
"""

from __future__ import annotations

import functools
import re

_MARKER = re.compile(r"(?:final\s+answer|answer)\s*[:：]\s*(.*)", re.IGNORECASE)
_ANSWER_IS = re.compile(r"the\s+(?:final\s+)?answer\s+is\s*[:：]?\s*(.+)", re.IGNORECASE)
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_SHORT_LINE = 64
_SHORT_TOKENS = 3


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}``, braces balanced."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed{") - 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1:j]
    return None


@functools.lru_cache(maxsize=1 << 16)  # answers repeat: every vote, match and simulated reply normalises one
def normalize_answer(answer: str) -> str:
    """Canonical form used for voting and matching: trimmed, unwrapped, numbers in shortest form."""
    s = " ".join(answer.strip().split()).rstrip(".").strip()
    for left, right in (("**", "**"), ("$", "$"), ("`", "`"), ('"', '"'), ("'", "'")):
        while len(s) >= len(left) + len(right) and s.startswith(left) and s.endswith(right):
            s = s[len(left):len(s) - len(right)].strip()
    s = s.rstrip(".").strip()
    compact = s.replace(",", "") if re.fullmatch(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?", s) else s
    if re.fullmatch(r"[+-]?\d+", compact):
        return str(int(compact))  # exact, however long
    if _NUMBER.match(compact):
        value = float(compact)
        if value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        return f"{value:.12g}"
    return s


def extract_final_answer(text: str | None) -> str | None:
    """The final answer of a reply in canonical form, or None when there is none (see module doc)."""
    if not text:
        return None
    found: str | None = None
    markers = list(_MARKER.finditer(text))
    if markers:
        found = markers[-1].group(1)
    if not found or not found.strip():
        found = last_boxed(text)
    if found is None:
        said = list(_ANSWER_IS.finditer(text))
        if said:
            found = said[-1].group(1).splitlines()[0]
    if found is None and not markers:
        stripped = text.strip()
        if (stripped and "\n" not in stripped and len(stripped) <= _SHORT_LINE
                and len(stripped.split()) <= _SHORT_TOKENS):
            found = stripped
    if found is None:
        return None
    boxed = last_boxed(found)
    answer = normalize_answer(boxed if boxed is not None else found)
    return answer or None
