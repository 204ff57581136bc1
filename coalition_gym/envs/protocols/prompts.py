"""Prompt text of the protocols, and parsers for the fixed helpers' replies.

Wording is this project's own. Peers are shown anonymously ("Agent 1", "Response A") so a model's
name never biases another.
"""

from __future__ import annotations

import re
from typing import Sequence

from ...tasks.base import ANSWER_INSTRUCTION
from ...types import Item, Message

MAX_CANDIDATE_CHARS = 4000


def clip(text: str, limit: int = MAX_CANDIDATE_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + " [...]"


def debate_followup(peer_texts: Sequence[str], style: str) -> Message:
    """The user turn of a later debate round: the other agents' latest solutions."""
    if not peer_texts:
        body = "Look at your previous solution again. Check each step and correct any mistake."
    else:
        shown = "\n\n".join(f"Agent {i + 1}: {clip(t)}" for i, t in enumerate(peer_texts))
        body = (f"Here are the solutions of the other agents to the same problem:\n\n{shown}\n\n"
                "Use them as additional information: check their reasoning and yours, then give your "
                "updated solution.")
    if style == "compact":
        return Message("user", f"{body}\nAnswer:")
    return Message("user", f"{body}\n\n{ANSWER_INSTRUCTION}")


def pairwise_prompt(item: Item, text_a: str, text_b: str) -> list[Message]:
    return [
        Message("system", "You judge which of two responses answers a question better."),
        Message("user", (f"Question:\n{item.question}\n\nResponse A:\n{clip(text_a)}\n\n"
                         f"Response B:\n{clip(text_b)}\n\nWhich response is more likely correct? "
                         "Explain briefly, then end with [[A]] or [[B]].")),
    ]


def listwise_prompt(item: Item, texts: Sequence[str]) -> list[Message]:
    shown = "\n\n".join(f"[{i + 1}]\n{clip(t)}" for i, t in enumerate(texts))
    return [
        Message("system", "You rank responses to a question from best to worst."),
        Message("user", (f"Question:\n{item.question}\n\nResponses:\n\n{shown}\n\nRank all "
                         f"{len(texts)} responses from most to least likely correct. End with a line "
                         "such as 'Ranking: [2] > [1] > [3]'.")),
    ]


def fuse_prompt(item: Item, ordered_texts: Sequence[str]) -> list[Message]:
    shown = "\n\n".join(f"Candidate {i + 1}:\n{clip(t)}" for i, t in enumerate(ordered_texts))
    return [
        Message("system", "You merge candidate responses into one best response."),
        Message("user", (f"Question:\n{item.question}\n\nCandidate responses, best first:\n\n{shown}\n\n"
                         "Write one response that keeps what is right in the candidates and fixes "
                         f"what is wrong. {ANSWER_INSTRUCTION}")),
    ]


_VERDICT = re.compile(r"\[\[\s*([AB])\s*\]\]")
_VERDICT_PHRASE = re.compile(r"(?:response|output|answer)\s*\(?([AB])\)?\s+is\s+(?:better|more)", re.I)


def parse_pairwise(text: str) -> str | None:
    """``"A"``, ``"B"`` or None. Last ``[[X]]`` wins; else "Response X is better"; else a bare letter."""
    marks = _VERDICT.findall(text or "")
    if marks:
        return marks[-1]
    phrases = _VERDICT_PHRASE.findall(text or "")
    if phrases:
        return phrases[-1].upper()
    bare = (text or "").strip().strip(".*()[] ").upper()
    return bare if bare in ("A", "B") else None


def parse_ranking(text: str, n: int) -> tuple[list[int], bool]:
    """0-based candidate order from a listwise reply, and whether it parsed.

    Indices are read in order of appearance (``[k]`` marks, else bare numbers after "Ranking:");
    out-of-range and repeated indices are dropped; candidates the reply left out follow in their
    original order. An unusable reply keeps the original order and reports ``False``.
    """
    text = text or ""
    line = text[text.lower().rfind("ranking"):] if "ranking" in text.lower() else text
    found = re.findall(r"\[(\d+)\]", line) or re.findall(r"\b(\d+)\b", line)
    order: list[int] = []
    for token in found:
        k = int(token) - 1
        if 0 <= k < n and k not in order:
            order.append(k)
    parsed = bool(order)
    order += [k for k in range(n) if k not in order]
    return order, parsed
