"""Multiple-choice answers: read one option letter out of a free-text reply.

Rule (first that applies wins; the result is always one upper-case letter among the options, so
protocols' votes compare equal answers):

1. **Final statement.** The last "answer is ...", "Answer: ...", "the correct/final/best option
   (choice) is ...", or ``\\boxed{...}`` in the reply gives the *segment* (to the end of its line);
   a bare mention ("option A is wrong") is not a statement.
   * The segment starts with a letter token: ``C``, ``(C)``, ``[C]``, ``**C**``, ``C)``, ``C.``,
     ``C:``, optionally followed by the option's text or an explanation ("(C) because A is
     wrong" -> C). Lower case is accepted only when the token stands alone ("answer: c"); "I"
     followed by a lower-case word is the pronoun, not option I.
   * **Several letters**: when the segment starts with two or more *different* letters joined by
     ``,``, ``/``, ``&``, ``and`` or ``or`` ("A or C", "A, C"), the reply hedges and is
     unparseable (None): listing every option must never earn credit.
   * Otherwise the segment matches exactly one option's text (case and spacing ignored), or it
     contains exactly one distinct parenthesised letter "(B)".
2. **Bare reply.** Without a final statement, the first or the last non-empty line is a lone
   letter token ("C", "**C**", "(C)", "C) the text ...", "C. because ...").
3. Anything else: None (unparseable, scores 0). Letters inside ordinary words or sentences are
   never read ("A cell is ..." is not option A).
"""

from __future__ import annotations

import re
import string
from typing import Sequence

from .answers import last_boxed
from .result import ScoreResult, as_text, unparsed

MAX_OPTIONS = 26
_STATEMENT = re.compile(
    r"(?:\b(?:final|correct|best|my)\s+(?:answer|choice|option)|\banswer)s?\b"
    r"\s*(?:(?:\bis\b|\bwould\s+be\b|\bshould\s+be\b|\bwill\s+be\b)\s*[:：]?|[:：=])\s*(?:option\s+|choice\s+)?",
    re.IGNORECASE)
_MARKUP = re.compile(r"[*_`$]")
_TEXT_LIMIT = 100_000  # only the tail of a huge reply can hold the final statement


def letters(n_options: int) -> str:
    if not 2 <= n_options <= MAX_OPTIONS:
        raise ValueError(f"a multiple-choice item needs 2..{MAX_OPTIONS} options, got {n_options}")
    return string.ascii_uppercase[:n_options]


def _token(allowed: str, lower: bool = False) -> str:
    chars = allowed + (allowed.lower() if lower else "")
    return rf"[(\[]?\s*([{chars}])\s*[)\]]?"


def _lead(segment: str, allowed: str) -> str | None | bool:
    """Letter at the start of a segment; False when several different letters lead it."""
    seg = _MARKUP.sub("", segment).strip()
    if not seg:
        return None
    alone = re.fullmatch(_token(allowed, lower=True) + r"\s*[.)!:]?", seg)
    if alone:
        return alone.group(1).upper()
    joined = re.match(rf"{_token(allowed)}(?:\s*(?:,|/|&|\band\b|\bor\b)\s*{_token(allowed)})+(?![A-Za-z0-9])", seg)
    if joined:
        found = set(re.findall(rf"(?<![A-Za-z])([{allowed}])(?![A-Za-z])", joined.group(0)))
        return False if len(found) > 1 else found.pop()
    lead = re.match(rf"[(\[]\s*([{allowed}])\s*[)\]]|([{allowed}])(?![A-Za-z0-9'])", seg)
    if lead and lead.group(2) == "I" and re.match(r"I\s+[a-z]", seg):
        return None  # the pronoun ("I think ..."), not option I
    if lead:
        return lead.group(1) or lead.group(2)
    return None


def _by_text(segment: str, options: Sequence[str] | None, allowed: str) -> str | None:
    seg = _norm(_MARKUP.sub("", segment))
    if options and seg:
        hits = [allowed[i] for i, opt in enumerate(options) if _norm(opt) == seg]
        if len(hits) == 1:
            return hits[0]
    paren = set(re.findall(rf"\(([{allowed}])\)", segment))
    return paren.pop() if len(paren) == 1 else None


def _norm(text: str) -> str:
    return " ".join(text.lower().strip().rstrip(".").split())


def extract_choice(text: object, n_options: int = 4, options: Sequence[str] | None = None) -> str | None:
    """The option letter a reply commits to, or None (see the module doc for the rule)."""
    reply = as_text(text)
    if reply is None:
        return None
    reply = reply[-_TEXT_LIMIT:]
    allowed = letters(len(options) if options else n_options)
    segments = []
    statements = list(_STATEMENT.finditer(reply))
    if statements:
        last = statements[-1]
        segments.append(reply[last.end():].split("\n", 1)[0])
    boxed = last_boxed(reply)
    if boxed is not None and (not statements or reply.rfind("\\boxed{") > statements[-1].start()):
        segments.insert(0, boxed)
    for segment in segments:
        lead = _lead(segment, allowed)
        if lead is False:
            return None
        if isinstance(lead, str) and lead:
            return lead
        found = _by_text(segment, options, allowed)
        if found:
            return found
    if segments and any(s.strip() for s in segments):
        return None
    lines = [ln for ln in reply.strip().splitlines() if ln.strip()]
    for line in (lines[:1] + lines[-1:]) if lines else []:
        seg = _MARKUP.sub("", line).strip()
        bare = re.fullmatch(_token(allowed) + r"\s*[.):]?", seg) or re.match(
            _token(allowed) + r"\s*[.):]\s", seg)
        if bare:
            return bare.group(1).upper()
    return None


def score_choice(answer: object, gold: str) -> ScoreResult:
    """Exact letter match (the answer is already extracted)."""
    letter = as_text(answer)
    if letter is None:
        return unparsed()
    letter = letter.strip().upper()
    return ScoreResult(float(letter == gold.strip().upper()), True,
                       "letter match" if letter == gold else "wrong letter")


__all__ = ["extract_choice", "score_choice", "letters", "MAX_OPTIONS"]
