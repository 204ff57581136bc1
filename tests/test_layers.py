"""The import layers: a module never imports from a layer above its own (lazy imports included).

types, errors -> redaction, settings_check, learners -> scorers -> tasks -> agents -> envs -> failures, records
-> valuation, training, testing -> demo -> cli. So a scorer never needs a task, a backend never needs the
protocol machinery, and the environments never need valuation or training.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "coalition_gym"
LAYERS = [{"types", "errors", "version"}, {"redaction", "settings_check", "learners", "plugins"}, {"scorers"}, {"tasks"}, {"agents"}, {"envs"},
          {"failures", "records"}, {"valuation", "training", "testing"}, {"demo"}, {"cli"}]


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else ""
    return next((k for k, group in enumerate(LAYERS) if name in group), None)


def imports(path: Path) -> list[tuple[str, int]]:
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = module.split(".")[:-1]  # the module's package (for __init__, the package itself)
            base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
            out.append((".".join(base + ([node.module] if node.module else [])), node.lineno))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("coalition_gym."):
            out.append((node.module, node.lineno))
        elif isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.startswith("coalition_gym.")]
    return out


def test_no_module_imports_from_a_layer_above_its_own():
    breaches = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        mine = layer_of(module)
        if mine is None:
            continue
        for target, line in imports(path):
            theirs = layer_of(target)
            if theirs is not None and theirs > mine:
                breaches.append(f"{module}:{line} imports {target}")
    assert breaches == []


def test_the_rule_sees_a_breach():
    assert layer_of("coalition_gym.agents.zoo") < layer_of("coalition_gym.envs.protocols")
    assert layer_of("coalition_gym.tasks.prompts") < layer_of("coalition_gym.agents.zoo")


def test_the_version_is_a_leaf_and_matches_the_distribution():
    import pytest

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    from coalition_gym.version import __version__

    assert imports(PACKAGE / "version.py") == []
    assert tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]["version"] == __version__
