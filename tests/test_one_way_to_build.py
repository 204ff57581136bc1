"""One way to build a System: ``System.build(SystemSpec(...))`` wherever a user might copy from.

The dataclass constructor is what ``build``, ``replace`` and ``with_seats`` call; only ``envs/system.py`` and the
tests of the constructor itself (``tests/envs/test_system.py``) call it by hand: not the package, the examples, the
benchmarks or the other tests."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: a call of the constructor: ``System(`` not preceded by a name character or a dot (``SeatedSystem(`` and
#: ``x.System(`` are other things; ``System.build(`` is the way)
CONSTRUCTOR_CALL = re.compile(r"(?<![\w.])System\(")
#: where users copy from (the README's and the docs' code blocks: tests/test_readme.py)
SCANNED = ("coalition_gym", "examples", "benchmarks", "tests")
#: the module itself, the constructor's own tests, and the two checks that spell the call out
ALLOWED = {"coalition_gym/envs/system.py", "tests/envs/test_system.py", "tests/test_one_way_to_build.py",
           "tests/test_readme.py"}


def constructor_calls(root: Path) -> list[str]:
    """``path:line`` of every constructor call in the Python files of the scanned folders under ``root``."""
    paths = [p for folder in SCANNED for p in sorted((root / folder).rglob("*.py"))]
    found = []
    for path in paths:
        rel = path.relative_to(root).as_posix()
        if rel in ALLOWED:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if CONSTRUCTOR_CALL.search(line):
                found.append(f"{rel}:{number}")
    return found


def test_no_system_is_built_by_hand_outside_the_system_module_and_its_tests():
    assert constructor_calls(ROOT) == [], "build it with System.build(SystemSpec(...))"


def test_the_scan_sees_a_hand_built_system_and_nothing_else(tmp_path):
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "mine.py").write_text("s = System(p, t, pool)\nok = System.build(spec)\n"
                                                   "seated = SeatedSystem(x)\nother = lib.System(y)\n")
    assert constructor_calls(tmp_path) == ["examples/mine.py:1"]


def test_from_backends_is_gone_a_mapping_of_backends_is_a_pool():
    from coalition_gym import System

    assert not hasattr(System, "from_backends")
