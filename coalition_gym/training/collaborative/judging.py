"""Judges score one response to a question on a 1-10 scale.

Two ways, per judge:
- ``prompt``: the judge is asked (Ask role ``judge``) and writes a score; a reply without a score in
  1..10 counts as 5.5, the middle of the scale, and is counted as unparseable.
- ``likelihood``: for models trained on a compact answer format (the zoo), which cannot follow a
  judging instruction: the score is ``1 + 9 * p``, where ``p`` is the judge's geometric-mean
  probability of the response's tokens after the question.
``auto`` uses likelihood for HF members in the compact style and prompt for every other member.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Sequence

from ...agents.base import derive_seed
from ...agents.hf import sequence_logprobs
from ...tasks.base import Task
from ...types import Ask, Item, Message, SamplingParams
from .members import Member
from .updates import encode_completion

NEUTRAL = 5.5
_SCORE_PATTERNS = (r'"score"\s*:\s*(\d+(?:\.\d+)?)', r"score\s*[:=]\s*(\d+(?:\.\d+)?)",
                   r"(\d+(?:\.\d+)?)\s*/\s*10\b")


def judge_prompt(question: str, response: str) -> list[Message]:
    return [Message("user", f"Judge how well the response answers the question.\nQuestion: {question}\n"
                            f"Response to judge: {response}\n\nReply with only a JSON object holding a score from "
                            '1 (wrong or useless) to 10 (correct and clear), like {"score": 7}.')]


def parse_score(text: str) -> float | None:
    """The 1-10 score in a judge's reply (a JSON object, ``score: n`` or ``n/10``), else None."""
    try:
        data = json.loads(text.strip())
        if isinstance(data, dict) and isinstance(data.get("score"), (int, float)) and 1 <= data["score"] <= 10:
            return float(data["score"])
    except ValueError:
        pass
    for pattern in _SCORE_PATTERNS:
        for found in re.findall(pattern, text, flags=re.IGNORECASE):
            value = float(found)
            if 1 <= value <= 10:
                return value
    return None


def judge_mode(member: Member, setting: str) -> str:
    if setting != "auto":
        return setting
    return "likelihood" if member.trainable and member.style == "compact" else "prompt"


@dataclass(frozen=True)
class Judgement:
    item: Item
    response: str
    answer: str | None  # the response's extracted answer (what a simulated judge sees)


@dataclass
class JudgeCounts:
    scored: int = 0
    unparseable: int = 0


def score_responses(judge: Member, mode: str, task: Task, todo: Sequence[Judgement], seed: int, tag: str,
                    counts: JudgeCounts) -> list[float]:
    """One judge's score of every response in ``todo`` (one batched call)."""
    if not todo:
        return []
    if mode == "likelihood":
        if not judge.trainable:
            raise ValueError(f"judge {judge.name!r} has no model to score likelihoods with; use judge='prompt'")
        asks = [Ask(judge.name, tuple(task.prompt(j.item, judge.style)), seed=0, item=j.item) for j in todo]
        prompts = [judge.generator.encode_prompt(a) for a in asks]  # type: ignore[attr-defined]
        completions = [encode_completion(judge, j.response) for j in todo]
        logps = sequence_logprobs(judge.model, prompts, completions, pad_id=judge.generator.pad_id)  # type: ignore
        counts.scored += len(todo)
        return [1.0 + 9.0 * math.exp(sum(lp) / max(len(lp), 1)) for lp in logps]
    asks = []
    for k, j in enumerate(todo):
        question = "\n".join(m.content for m in task.prompt(j.item, "chat") if m.role == "user")
        asks.append(Ask(judge.name, tuple(judge_prompt(question, j.response)),
                        seed=derive_seed(seed, j.item.id, judge.name, 0, k, tag),
                        params=SamplingParams(temperature=0.0, max_new_tokens=32), role="judge", item=j.item,
                        info={"answers": (j.answer,)}))
    scores = []
    for sample in judge.generator.generate(asks):
        value = parse_score(sample.text)
        counts.scored += 1
        if value is None:
            counts.unparseable += 1
        scores.append(NEUTRAL if value is None else value)
    return scores
