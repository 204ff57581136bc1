"""Prompt text of the protocols, and parsers for the fixed helpers' replies.

Pure text over tasks and types (no backend, no protocol machinery), so the protocols and the zoo's
training data (which renders debate follow-ups as the protocol does) share one wording.

Wording is this project's own. Peers are shown anonymously ("Agent 1", "Response A") so a model's
name never biases another.
"""

from __future__ import annotations

import re
from typing import Sequence

from .types import Item, Message

ANSWER_INSTRUCTION = "Think it through, then end your reply with a final line of the form 'Answer: <answer>'."
SYSTEM_PROMPT = "You are a careful problem solver."

MAX_CANDIDATE_CHARS = 4000


def clip(text: str, limit: int = MAX_CANDIDATE_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + " [...]"


def debate_followup(peer_texts: Sequence[str], style: str) -> Message:
    """The user turn of a later debate round: the other agents' latest solutions."""
    return _followup([f"Agent {i + 1}: {clip(t)}" for i, t in enumerate(peer_texts)], style)


def debate_followups(texts: Sequence[str], styles: Sequence[str]) -> list[Message]:
    """:func:`debate_followup` for each of a round's members at once, member k shown everyone's text but its own:
    each text is clipped and labelled once per round (twice: before k its label is its place, after k one less),
    not once per reader (64 debaters read 63 texts each)."""
    clipped = [clip(t) for t in texts]
    before = [f"Agent {i + 1}: {c}" for i, c in enumerate(clipped)]
    after = [f"Agent {i}: {c}" for i, c in enumerate(clipped)]
    return [_followup(before[:k] + after[k + 1:], style) for k, style in enumerate(styles)]


def _followup(shown_peers: list[str], style: str) -> Message:
    if not shown_peers:
        body = "Look at your previous solution again. Check each step and correct any mistake."
    else:
        shown = "\n\n".join(shown_peers)
        body = (f"Here are the solutions of the other agents to the same problem:\n\n{shown}\n\n"
                "Use them as additional information: check their reasoning and yours, then give your "
                "updated solution.")
    if style == "compact":
        return Message("user", f"{body}\nAnswer:")
    return Message("user", f"{body}\n\n{ANSWER_INSTRUCTION}")


def _judging(role: str, item: Item, shown: str, instruction: str) -> list[Message]:
    """A judge's or fuser's prompt: its role, then the question, what it is shown and what it must do."""
    return [Message("system", role), Message("user", f"Question:\n{item.question}\n\n{shown}\n\n{instruction}")]


def pairwise_prompt(item: Item, text_a: str, text_b: str) -> list[Message]:
    return _judging("You judge which of two responses answers a question better.", item,
                    f"Response A:\n{clip(text_a)}\n\nResponse B:\n{clip(text_b)}",
                    "Which response is more likely correct? Explain briefly, then end with [[A]] or [[B]].")


def listwise_prompt(item: Item, texts: Sequence[str]) -> list[Message]:
    shown = "\n\n".join(f"[{i + 1}]\n{clip(t)}" for i, t in enumerate(texts))
    return _judging("You rank responses to a question from best to worst.", item, f"Responses:\n\n{shown}",
                    f"Rank all {len(texts)} responses from most to least likely correct. End with a line such as "
                    "'Ranking: [2] > [1] > [3]'.")


def fuse_prompt(item: Item, ordered_texts: Sequence[str]) -> list[Message]:
    shown = "\n\n".join(f"Candidate {i + 1}:\n{clip(t)}" for i, t in enumerate(ordered_texts))
    return _judging("You merge candidate responses into one best response.", item,
                    f"Candidate responses, best first:\n\n{shown}",
                    f"Write one response that keeps what is right in the candidates and fixes what is wrong. "
                    f"{ANSWER_INSTRUCTION}")


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


# -- Mixture-of-Agents, Heterogeneous Swarms, multi-agent feedback, prompt routing -----------------

def _with_question(item: Item, body: str, style: str) -> list[Message]:
    """``body`` (context for the question) followed by the question, in the member's prompt style."""
    if style == "compact":
        return [Message("user", f"{body}\n\n{item.question}\nAnswer:")]
    return [Message("system", SYSTEM_PROMPT),
            Message("user", f"{body}\n\nQuestion:\n{item.question}\n\n{ANSWER_INSTRUCTION}")]


def references_prompt(item: Item, texts: Sequence[str], style: str = "chat") -> list[Message]:
    """Mixture-of-Agents: earlier responses injected as numbered references (later proposer layers and
    the aggregator)."""
    shown = "\n\n".join(f"{i + 1}. {clip(t)}" for i, t in enumerate(texts))
    body = ("Several models have answered the question below. Their responses follow. Synthesise them "
            "into one high-quality response: judge them critically, since some may be wrong, and do "
            f"not just copy one of them.\n\nResponses:\n\n{shown}")
    return _with_question(item, body, style)


def node_prompt(item: Item, previous: Sequence[str], style: str = "chat", final: bool = False) -> list[Message]:
    """Heterogeneous Swarms: a node sees its predecessors' outputs; the end node must give a final answer."""
    if not previous:
        return _with_question(item, "Please answer the following question.", style)
    shown = "\n\n".join(f"Previous response {i + 1}:\n{clip(t)}" for i, t in enumerate(previous))
    body = (f"{shown}\n\nAnswer the question below with the help of the previous responses; ignore any "
            "that look wrong or unhelpful.")
    if final:
        body += " You give the team's final answer, so make sure to end with one."
    return _with_question(item, body, style)


def feedback_prompt(item: Item, answer_text: str) -> list[Message]:
    """Multi-agent feedback: a peer reviews one member's answer."""
    return [
        Message("system", "You work in a team that answers questions together."),
        Message("user", (f"Question:\n{item.question}\n\nA teammate answered:\n{clip(answer_text)}\n\n"
                         "Give constructive feedback: check each step, say what is right and what is "
                         "wrong, and say which final answer you believe is correct.")),
    ]


def refine_prompt(question: Sequence[Message], own_text: str, feedback: Sequence[str], style: str) -> list[Message]:
    """Multi-agent feedback: the member's question, its own answer, then the peers' feedback."""
    if feedback:
        shown = "\n\n".join(f"Feedback {i + 1}: {clip(t)}" for i, t in enumerate(feedback))
        body = (f"Your teammates reviewed your answer:\n\n{shown}\n\nUse the feedback to refine your "
                "answer; keep what is right and fix what is wrong.")
    else:
        body = "Look at your answer again. Check each step and correct any mistake."
    tail = "\nAnswer:" if style == "compact" else f"\n\n{ANSWER_INSTRUCTION}"
    return list(question) + [Message("assistant", own_text), Message("user", body + tail)]


def route_prompt(item: Item, members: Sequence[str], descriptions: Sequence[str]) -> list[Message]:
    """Prompt routing: the router sees the question and a numbered list of members with their
    descriptions (names are shown here: choosing among the members is the router's whole task)."""
    listing = "\n".join(f"[{i + 1}] {m}: {d}" for i, (m, d) in enumerate(zip(members, descriptions)))
    return [
        Message("system", "You route each question to the team member best suited to answer it."),
        Message("user", (f"Question:\n{item.question}\n\nTeam members:\n{listing}\n\nWhich member should "
                         f"answer? Reply with the member's number in double brackets, e.g. [[1]].")),
    ]


_ROUTE_MARK = re.compile(r"\[\[\s*(\d+)\s*\]\]")
_ROUTE_PHRASE = re.compile(r"\b(?:member|model|agent|number)\s*#?\s*(\d+)\b", re.I)


def parse_route(text: str, members: Sequence[str]) -> int | None:
    """0-based index of the member a router named, or None.

    Read in this order: the last ``[[k]]``; else the last "member/model/agent k"; else a reply that is
    only a number; else the member name mentioned last (whole word, case-insensitive). Numbers out
    of range do not count.
    """
    text = text or ""
    n = len(members)
    for pattern in (_ROUTE_MARK, _ROUTE_PHRASE):
        found = [int(k) for k in pattern.findall(text) if 1 <= int(k) <= n]
        if found:
            return found[-1] - 1
    bare = text.strip().strip(".*()[] ")
    if bare.isdigit() and 1 <= int(bare) <= n:
        return int(bare) - 1
    best, where = None, -1
    for k, name in enumerate(members):
        for match in re.finditer(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.I):
            if match.start() > where:
                best, where = k, match.start()
    return best
