"""A new adversary: ``echo_last``, a member that copies the answer of the last peer whose reply it was shown
and otherwise answers with a fixed wrong number. It never sees a gold answer (no adversary does): it can
only exploit what the protocol shows it. How much does it cost each protocol when it takes a seat?

An adversary is a name and a factory from the seat's name to a ``Generator``; ``register_adversary`` makes
it usable by ``cgym robustness --adversary NAME`` and ``reports.robustness`` and lists it in ``cgym pools``.

    python examples/custom_adversary.py
    cgym --import examples/custom_adversary.py robustness --adversary echo_last --protocols majority_vote,debate \\
        --pool sim:demo --items 60 --out runs/echo
"""

from __future__ import annotations

import re

from coalition_gym import Generator, Sample, System, SystemSpec, make_task, register_adversary
from coalition_gym.agents import load_pool
from coalition_gym.reports.robustness import RobustnessOptions, robustness

_ANSWER = re.compile(r"Answer:\s*([^\n]+)")


class EchoLast(Generator):
    """Repeats the last ``Answer: ...`` line in its prompt (a peer's, in later rounds of a debate), else -1."""

    def generate(self, asks):
        samples = []
        for ask in asks:
            shown = [m.content for m in ask.messages if m.role == "user"]
            found = _ANSWER.findall(shown[-1]) if shown else []
            # the question's own instruction ends in "Answer: <answer>": skip that template
            peers = [a.strip() for a in found if a.strip() != "<answer>"]
            samples.append(Sample(text=f"Answer: {peers[-1] if peers else -1}"))
        return samples


register_adversary("echo_last", lambda seat: EchoLast(), "copies the last peer answer it was shown, else -1")

if __name__ == "__main__":
    pool, task = load_pool("sim:demo"), make_task("rg/basic_arithmetic", size=60)
    systems = [System.build(SystemSpec(name, task, pool, split="test")) for name in ("majority_vote", "debate")]
    report = robustness(systems, "echo_last", RobustnessOptions(n_boot=500))
    for row in report.ranking():
        effect = row.estimates["effect"]
        print(f"{row.protocol:14s} honest {row.estimates['honest']['value']:.3f}  with echo_last "
              f"{row.estimates['adversarial']['value']:.3f}  effect {effect['value']:+.3f} "
              f"[{effect['ci'][0]:+.3f}, {effect['ci'][1]:+.3f}]")
