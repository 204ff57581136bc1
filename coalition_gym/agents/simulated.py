"""Seeded simulated collaborators: fast, controllable stand-ins for language models.

Each agent has a *knowledge state* per item, fixed for the (agent, item) pair: it either knows the
answer or it does not. Knowledge is drawn from a Gaussian copula, so agents in the same
``error_group`` fail on the same items with a tunable ``correlation``; when they fail they also
tend to give the same wrong answer (a shared distractor). Sampling then adds temperature-driven
noise: an agent that knows rarely slips, an agent that does not know scatters its guesses as the
temperature rises, so self-consistency (SLM-MUX) carries real signal. In debate rounds an agent may
adopt its peers' majority (``conformity``) or recognise a correct peer answer (``recognition``).

Replies are ordinary text ending with ``Answer: ...``, the same format the tasks ask real models
for, and are a pure function of (profile, item, role, ask seed).

Adversarial members (``adversary=`` one of :data:`.adversaries.ADVERSARIES`) are saboteurs driven by
the same seeds and roles; see :mod:`.adversaries` for what each does. Two knobs of honest agents say
how far they can be misled: ``persuadability`` (revising after reading a persuasively argued peer
answer) and ``style_bias`` (a ranker, fuser or aggregator preferring the "verified" style). Both act
only when such text is shown, so pools without adversaries behave exactly as before.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
from collections import Counter
from dataclasses import asdict, dataclass, field
from statistics import NormalDist
from typing import Any, Callable, Mapping, Sequence

from ..errors import BackendError, ConfigError
from ..scorers.answers import normalize_answer
from ..settings_check import check_settings, setting
from ..types import Ask, Item, Sample
from .adversaries import ADVERSARIES, adversarial_text, claimed, register_adversary
from .base import Generator, stable_hash

_NORMAL = NormalDist()


@dataclass(frozen=True)
class AgentProfile:
    """Behaviour of one simulated agent. Probabilities are in [0, 1]."""

    name: str
    skill: float = setting(0.6, ge=0, le=1, doc="P(knows the answer) on an item of unknown or medium difficulty")
    category_skill: Mapping[str, float] = field(default_factory=dict)  # overrides per item category
    difficulty_slope: float = setting(3.0, ge=0, doc="logit drop per unit of item difficulty above 0.5")
    error_group: str | None = None  # agents of one group share their hard items and wrong answers
    # Weight of the group's shared latent in knowledge. Positive: the agent fails where its group fails
    # and tends to pick the group's wrong answer. Negative: it tends to know what the group does not (a
    # complementary model); its wrong answers are its own.
    correlation: float = setting(0.0, ge=-1, le=1)
    diversity: float = setting(0.8, ge=0, doc="P(a not-knowing agent re-guesses) per unit of temperature")
    slip: float = setting(0.04, ge=0, le=1, doc="P(a knowing agent writes a wrong answer) per unit of temperature")
    conformity: float = setting(0.3, ge=0, le=1, doc="P(adopting the peers' majority in a debate round); "
                                "halved when it knows")
    recognition: float = setting(0.3, ge=0, le=1, doc="P(a not-knowing agent adopts a correct answer it sees "
                                 "from a peer)")
    judge_skill: float = setting(0.75, ge=0, le=1, doc="ranker/fuser roles: P(preferring the correct candidate)")
    format_error: float = setting(0.0, ge=0, le=1, doc="P(a reply without a parseable final answer)")
    world_seed: int = setting(0, ge=0, doc="seeds the shared world of item difficulties and group latents")
    # Fields added after the ones above are left out of the identity and of the random draws while at
    # their defaults (see _describe), so adding them changed no existing pool's samples.
    adversary: str | None = setting(None, choices=tuple(ADVERSARIES), doc="a saboteur profile "
                                    "(adversaries.ADVERSARIES); none: honest")
    persuadability: float = setting(0.5, ge=0, le=1, doc="P(adopting a persuasively argued peer answer when "
                                    "revising); halved when it knows")
    style_bias: float = setting(0.0, ge=0, le=1, doc="ranker/fuser roles: P(preferring the \"verified\" style "
                                "whatever the correctness)")

    def __post_init__(self) -> None:
        check_settings(self, f"agent {self.name!r}")
        for category, value in self.category_skill.items():  # per entry: beyond a field's declaration
            if not 0.0 <= float(value) <= 1.0:
                raise ConfigError(f"agent {self.name!r}: category_skill[{category}]={value} must be in [0, 1]")


#: fields that shape an agent's random draws (the original ones); later fields only steer behaviour
_DRAW_FIELDS = ("name", "skill", "category_skill", "difficulty_slope", "error_group", "correlation", "diversity",
                "slip", "conformity", "recognition", "judge_skill", "format_error", "world_seed")


def _describe(profile: AgentProfile, draws_only: bool = False) -> str:
    """The dataclass repr, without later fields at their defaults (or without any, ``draws_only``): the
    identity of agents that existed before those fields is unchanged, so are their samples and caches."""
    defaults = AgentProfile(name=profile.name)
    shown = [f.name for f in dataclasses.fields(profile) if f.name in _DRAW_FIELDS
             or (not draws_only and getattr(profile, f.name) != getattr(defaults, f.name))]
    return f"AgentProfile({', '.join(f'{k}={getattr(profile, k)!r}' for k in shown)})"


def adversary_profile(kind: str, name: str, world_seed: int = 0) -> AgentProfile:
    """A simulated saboteur of profile ``kind`` (see :mod:`.adversaries`) named ``name``."""
    if kind not in ADVERSARIES:
        raise ConfigError(f"unknown adversary profile {kind!r}; use one of {', '.join(ADVERSARIES)}")
    return AgentProfile(name, skill=0.0, adversary=kind, world_seed=world_seed)


def _uniform(*parts: object) -> float:
    return (stable_hash(*parts) + 0.5) / 2.0**63


def plausible_wrong_answers(item: Item, k: int = 4) -> list[str]:
    """``k`` deterministic, distinct wrong answers that look like the gold one."""
    given = item.meta.get("distractors") if item.meta else None
    if given:
        return [str(d) for d in given][:k]
    return list(_made_up_wrong_answers(item.id, item.gold, len(item.choices) if item.choices else 0, k))


@functools.lru_cache(maxsize=4096)  # asked once per simulated reply: 64 members x 3 debate rounds per episode
def _made_up_wrong_answers(item_id: str, gold: str, choices: int, k: int) -> tuple[str, ...]:
    rng = random.Random(stable_hash("distractors", item_id, gold))
    if choices:
        letters = [chr(ord("A") + i) for i in range(choices)]
        return tuple([c for c in letters if c != gold][:k] or ["Z"])
    candidates: list[str] = []
    try:
        value = float(gold)
    except ValueError:
        value = None
    if value is not None and math.isfinite(value):
        integral = value == int(value)
        offsets = [1, -1, 2, -2, 10, -10, 3, 5]
        rng.shuffle(offsets)
        raw = [value + o if integral else value * (1 + o / 20) for o in offsets]
        raw += [-value, value * 2]
        candidates = [normalize_answer(str(int(x)) if integral else f"{x:.6g}") for x in raw]
    else:
        word = gold or "none"
        candidates = [word[::-1], word[:-1] or word + "s", word + word[-1], word.swapcase(),
                      word[1:] + word[0], "".join(sorted(word)), word.upper() + "!"]
        rng.shuffle(candidates)
    unique: list[str] = []
    for c in candidates:
        if c != gold and c not in unique:
            unique.append(c)
    while len(unique) < k:
        unique.append(f"{gold}~{len(unique)}")
    return tuple(unique[:k])


class SimulatedAgent(Generator):
    """A Generator that answers protocol Asks according to an :class:`AgentProfile`."""

    def __init__(self, profile: AgentProfile):
        self.profile = profile
        self.identity = f"sim:{profile.name}:{stable_hash(_describe(profile)):x}"
        # Draws are keyed on the original fields only: a judge given a style_bias draws as before on
        # honest candidates, so its verdicts change only where a styled candidate is shown.
        self._draw_key = f"sim:{profile.name}:{stable_hash(_describe(profile, draws_only=True)):x}"

    def describe(self) -> dict[str, Any]:
        return {"kind": "sim", "identity": self.identity, "profile": asdict(self.profile)}

    # -- latent, per (agent, item) ------------------------------------------------------------
    def p_knows(self, item: Item) -> float:
        p = self.profile.category_skill.get(item.category, self.profile.skill)
        if item.difficulty is not None and 0.0 < p < 1.0:
            logit = math.log(p / (1 - p)) - self.profile.difficulty_slope * (item.difficulty - 0.5)
            p = 1.0 / (1.0 + math.exp(-logit))
        return p

    def knows(self, item: Item) -> bool:
        prof = self.profile
        z_own = _NORMAL.inv_cdf(_uniform("know", prof.world_seed, prof.name, item.id))
        rho = prof.correlation if prof.error_group else 0.0
        z = math.sqrt(1 - abs(rho)) * z_own
        if rho:
            # Knowing is z < threshold, so a shared low z means shared knowledge.
            z += math.copysign(math.sqrt(abs(rho)), rho) * _NORMAL.inv_cdf(_uniform("know-group", prof.world_seed,
                                                           prof.error_group, item.id))
        return _NORMAL.cdf(z) < self.p_knows(item)

    def favourite_wrong_answer(self, item: Item) -> str:
        prof = self.profile
        wrong = plausible_wrong_answers(item)
        shared = (prof.error_group and prof.correlation > 0
                  and _uniform("dist", prof.world_seed, prof.name, item.id) < prof.correlation)
        key = ("dist-group", prof.world_seed, prof.error_group) if shared else ("dist-own", prof.world_seed, prof.name)
        return wrong[stable_hash(*key, item.id) % len(wrong)]

    def sabotage_answer(self, item: Item) -> str:
        """An adversary's wrong answer on ``item``: fixed per item (so it is self-consistent), shared by
        every colluder of the same world, its own for the other profiles."""
        prof = self.profile
        owner = "colluders" if prof.adversary == "colluders" else prof.name
        wrong = plausible_wrong_answers(item)
        return wrong[stable_hash("sabotage", prof.world_seed, owner, item.id) % len(wrong)]

    # -- one sample ------------------------------------------------------------------------------
    def _fresh_answer(self, item: Item, knows: bool, temperature: float, rng: random.Random) -> str:
        prof = self.profile
        t = max(0.0, temperature)
        if knows:
            if rng.random() < prof.slip * min(t, 1.0):
                return rng.choice(plausible_wrong_answers(item))
            return item.gold
        if rng.random() < min(1.0, prof.diversity * t):
            options = plausible_wrong_answers(item) + [item.gold]
            return rng.choice(options)
        return self.favourite_wrong_answer(item)

    def _debate_answer(self, ask: Ask, item: Item, knows: bool, rng: random.Random) -> str:
        prof = self.profile
        own = self._fresh_answer(item, knows, ask.params.temperature, rng)
        previous = ask.info.get("own_previous")
        peers = [a for a in ask.info.get("peer_answers", ()) if a is not None]
        # A persuasively argued answer in what it reads (debate peers, references, feedback); drawn
        # only when one is shown, so honest-only runs keep their draws.
        argued = sorted(a for a in claimed(ask.messages, "persuasion") if a != own)
        if not peers:
            if argued and rng.random() < prof.persuadability * (0.5 if knows else 1.0):
                return argued[0]
            return own
        counts = Counter(peers).most_common()
        majority = counts[0][0] if len(counts) == 1 or counts[0][1] > counts[1][1] else None
        if not knows and item.gold in peers and rng.random() < prof.recognition:
            return item.gold
        if argued and rng.random() < prof.persuadability * (0.5 if knows else 1.0):
            return argued[0]
        adopt = prof.conformity * (0.5 if knows else 1.0)
        if majority is not None and majority != own and rng.random() < adopt:
            return majority
        return own if knows or previous is None else previous

    def _styled(self, ask: Ask, answers: Sequence[str | None]) -> list[bool]:
        """Which candidates carry the style this judge may be biased toward."""
        styled = claimed(ask.messages, "style") if self.profile.style_bias else set()
        return [a is not None and normalize_answer(a) in styled for a in answers]

    def _pairwise_verdict(self, ask: Ask, item: Item, rng: random.Random) -> str:
        a, b = ask.info["answers"]
        a_styled, b_styled = self._styled(ask, (a, b))
        if a_styled != b_styled and rng.random() < self.profile.style_bias:
            return "A" if a_styled else "B"
        a_ok, b_ok = a == item.gold, b == item.gold
        if a_ok != b_ok:
            right = "A" if a_ok else "B"
            return right if rng.random() < self.profile.judge_skill else ("B" if right == "A" else "A")
        return "A" if rng.random() < 0.5 else "B"

    def _listwise_ranking(self, ask: Ask, item: Item, rng: random.Random) -> list[int]:
        # Noise chosen so that a correct candidate outranks a wrong one with P = judge_skill.
        skill = min(max(self.profile.judge_skill, 0.501), 0.999)
        sigma = 1.0 / (math.sqrt(2.0) * _NORMAL.inv_cdf(skill))
        scores = [(a == item.gold) + rng.gauss(0.0, sigma) for a in ask.info["answers"]]
        styled = self._styled(ask, ask.info["answers"])
        if any(styled) and not all(styled) and rng.random() < self.profile.style_bias:
            scores = [s + 100.0 * k for s, k in zip(scores, styled)]  # the styled candidates first
        return sorted(range(len(scores)), key=lambda i: -scores[i])

    def _route(self, ask: Ask, item: Item, rng: random.Random) -> str:
        """A router that reads member descriptions: with P = judge_skill it names a member whose
        description mentions the item's category, otherwise a random one."""
        candidates = list(ask.info.get("candidates", ()))
        if not candidates:
            raise BackendError(f"simulated router {self.profile.name!r} got a route Ask without candidates")
        fitting = [k for k, d in enumerate(ask.info.get("descriptions", ())) if item.category.lower() in d.lower()]
        k = fitting[0] if fitting and rng.random() < self.profile.judge_skill else rng.randrange(len(candidates))
        return f"This question needs {item.category}; member {k + 1} fits best.\n[[{k + 1}]]"

    def _judge_score(self, ask: Ask, item: Item, rng: random.Random) -> str:
        """A 1-10 score of one response: with P = judge_skill the judge sees whether its answer is right
        (high scores for right, low for wrong), otherwise it misjudges; ``format_error`` gives no score."""
        answers = ask.info.get("answers", ())
        right = bool(answers) and answers[0] == item.gold
        seen_right = right if rng.random() < self.profile.judge_skill else not right
        if rng.random() < self.profile.format_error:
            return "This response is hard to evaluate."
        score = rng.randint(7, 10) if seen_right else rng.randint(1, 4)
        return f'{{"score": {score}}}'

    def _fused_answer(self, ask: Ask, item: Item, knows: bool, rng: random.Random) -> str:
        answers = [a for a in ask.info["answers"] if a is not None]
        styled = [a for a, k in zip(answers, self._styled(ask, answers)) if k]
        if styled and len(styled) < len(answers) and rng.random() < self.profile.style_bias:
            return styled[0]
        if item.gold in answers and rng.random() < self.profile.judge_skill:
            return item.gold
        if knows or not answers:
            return self._fresh_answer(item, knows, ask.params.temperature, rng)
        counts = Counter(answers)
        best = max(counts.values())
        return next(a for a in answers if counts[a] == best)  # plurality, best-ranked first

    def reply(self, ask: Ask) -> str:
        item = ask.item
        if item is None:
            raise BackendError(f"simulated agent {self.profile.name!r} got an Ask without its item; "
                               "simulated agents answer protocol Asks only")
        # The item is mixed in so that a constant seed across items still gives independent draws.
        rng = random.Random(stable_hash(ask.seed, self._draw_key, item.id))
        knows = self.knows(item)
        if self.profile.adversary is not None and ask.role not in ("rank_pair", "rank_list", "route"):
            return adversarial_text(self.profile.adversary, self.sabotage_answer(item))
        if ask.role == "rank_pair":
            verdict = self._pairwise_verdict(ask, item, rng)
            if rng.random() < self.profile.format_error:
                return "Both responses have merits; it is hard to say."
            return f"Having compared both responses, Response {verdict} is more accurate.\n[[{verdict}]]"
        if ask.role == "route":
            return self._route(ask, item, rng)
        if ask.role == "judge":
            return self._judge_score(ask, item, rng)
        if ask.role == "rank_list":
            order = self._listwise_ranking(ask, item, rng)
            return "Ranking: " + " > ".join(f"[{i + 1}]" for i in order)
        if ask.role == "fuse":
            answer = self._fused_answer(ask, item, knows, rng)
            lead = "Combining the strongest candidate responses"
        elif ask.role == "debate" and (ask.info.get("peer_answers") or ask.info.get("own_previous")):
            answer = self._debate_answer(ask, item, knows, rng)
            lead = "After weighing the other agents' solutions"
        else:
            answer = self._fresh_answer(item, knows, ask.params.temperature, rng)
            lead = "Let me work through this step by step"
        if rng.random() < self.profile.format_error:
            return f"{lead}, I am not sure how to finish this one."
        return f"{lead}, I get {answer}.\nAnswer: {answer}"

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        return [Sample(text=self.reply(ask)) for ask in asks]


# -- presets -------------------------------------------------------------------------------------

def _profiles(*profiles: AgentProfile) -> dict[str, AgentProfile]:
    return {p.name: p for p in profiles}


# The default judge and fuser fall for the "verified" style half the time (adversaries.judge_targeting);
# honest members never write it, so this changes nothing without an adversary.
DEFAULT_HELPERS = _profiles(AgentProfile("judge", skill=0.5, judge_skill=0.8, style_bias=0.5),
                            AgentProfile("fuser", skill=0.1, judge_skill=0.85, style_bias=0.5))


def random_profiles(n: int, seed: int = 0) -> dict[str, dict[str, AgentProfile]]:
    """``n`` varied agents for scale studies (``sim:random-N``): skills in [0.35, 0.8], about half in
    one of two correlated error groups, the rest independent."""
    rng = random.Random(stable_hash("random-pool", n, seed))
    members = []
    for k in range(n):
        group = rng.choice([None, "g1", "g2"])
        members.append(AgentProfile(f"m{k + 1:02d}", skill=round(rng.uniform(0.35, 0.8), 3), error_group=group,
                                    correlation=round(rng.uniform(0.3, 0.9), 3) if group else 0.0,
                                    conformity=round(rng.uniform(0.1, 0.5), 3)))
    return {"members": _profiles(*members), "helpers": DEFAULT_HELPERS}


#: Named simulated pools: members, the fixed helpers protocols use (never coalition members) and,
#: optionally, one-line member descriptions that routers read.
SIM_PRESETS: dict[str, dict[str, Any]] = {
    # The paper's phenomenon: the individually strongest model (atlas) shares its blind spots and
    # its wrong answers with two siblings, so the system barely misses it; the weakest (delta)
    # tends to know what the siblings do not, and is the one the system can least do without.
    "demo": {
        "members": _profiles(
            AgentProfile("atlas", skill=0.72, error_group="siblings", correlation=0.9),
            AgentProfile("borealis", skill=0.68, error_group="siblings", correlation=0.9),
            AgentProfile("cirrus", skill=0.64, error_group="siblings", correlation=0.9),
            AgentProfile("delta", skill=0.5, error_group="siblings", correlation=-0.8, diversity=0.9),
        ),
        "helpers": DEFAULT_HELPERS,
    },
    # Four agents of equal skill with independent errors: classic wisdom-of-crowds.
    "independent": {
        "members": _profiles(*(AgentProfile(f"agent{i}", skill=0.6) for i in range(1, 5))),
        "helpers": DEFAULT_HELPERS,
    },
    # Specialists: each strong on one reasoning-gym category, weak elsewhere.
    "specialists": {
        "members": _profiles(
            AgentProfile("mathy", skill=0.35, category_skill={"arithmetic": 0.9, "algebra": 0.85}),
            AgentProfile("wordy", skill=0.35, category_skill={"algorithmic": 0.9, "cognition": 0.8}),
            AgentProfile("logician", skill=0.35, category_skill={"logic": 0.9, "games": 0.8}),
        ),
        "helpers": DEFAULT_HELPERS,
        "descriptions": {"mathy": "strong at arithmetic and algebra",
                         "wordy": "strong at algorithmic string tasks and cognition",
                         "logician": "strong at logic puzzles and games"},
    },
    # C-RL's pivotal setting: a careless agent and a careful one with independent errors; the careless
    # one (listed first) scatters its guesses when it does not know. They disagree on most items, and
    # under majority vote with seat-order ties the careless one wins every three-way tie, so wherever
    # it is wrong and the careful one right, the third voter decides.
    "split": {
        "members": _profiles(
            AgentProfile("ana", skill=0.3, diversity=1.4, conformity=0.0, recognition=0.0),
            AgentProfile("ben", skill=0.8, diversity=1.4, conformity=0.0, recognition=0.0),
        ),
        "helpers": DEFAULT_HELPERS,
    },
    # C-RL's dissociation setting: two calculators, reliable on arithmetic and blind on everything else,
    # where they scatter their guesses (low self-consistency). Under SLM-MUX a policy helps this system
    # by being right *and* self-consistent off arithmetic, and by not outvoting them on arithmetic with
    # confident wrong answers: not the same thing as being right as often as possible on its own.
    "calculators": {
        "members": _profiles(
            AgentProfile("abel", skill=0.05, category_skill={"arithmetic": 0.9}, diversity=2.0, conformity=0.0,
                         recognition=0.0),
            AgentProfile("gauss", skill=0.05, category_skill={"arithmetic": 0.85}, diversity=2.0, conformity=0.0,
                         recognition=0.0),
        ),
        "helpers": DEFAULT_HELPERS,
        "descriptions": {"abel": "strong at arithmetic", "gauss": "strong at arithmetic"},
    },
}


def _simulated_adversary(kind: str) -> Callable[[str], Generator]:
    """The factory of a simulated saboteur: the seat keeps its name, so it keeps its seeds."""
    return lambda seat: SimulatedAgent(adversary_profile(kind, seat))


# the built-in adversaries are registered like a user's (register_adversary)
for _kind, _about in ADVERSARIES.items():
    register_adversary(_kind, _simulated_adversary(_kind), _about)
