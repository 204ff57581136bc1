"""The import layers, at module granularity: a module never imports from a layer above its own (lazy imports
included), no two modules import each other through any chain, and every module has a layer.

A module's layer is that of the longest prefix naming it in LAYERS (``envs.protocols`` places every protocol
module; ``envs`` only the modules no longer prefix names). Low to high: leaves (types, errors, the version) ->
result files, settings, learners, prompt text, failure counts and run records -> the sandbox -> scorers ->
tasks -> agents -> protocols -> the runner and registration -> the system, executors and seated episodes ->
the environments and their contract checks -> valuation -> training (with its contract checks) -> reports
(the demo among them) -> integrations -> cli. So a scorer never needs a task, a backend never needs the
protocol machinery, a protocol never needs the runner, the environments never need valuation or training,
and valuation never needs training. The package root re-exports the public API and sits above everything: a
module inside the package importing from it (``from coalition_gym import x``) is a breach.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "coalition_gym"
LAYERS = [
    {"types", "errors", "version"},
    {"result_files", "settings_check", "learners", "plugins", "prompts", "failures", "records"},
    {"sandbox"},
    {"scorers"},
    {"tasks"},
    {"agents"},
    {"envs.spaces", "envs.dispatch", "envs.protocols"},
    {"envs.registration", "envs.dev_scores", "envs.runner"},
    {"envs.system", "envs.executors", "envs.seated"},
    {"envs"},  # the environments (gym_env, pz_env, vector_env, wrappers) and the package's __init__
    {"valuation"},
    {"training"},
    {"reports"},
    {"integrations"},  # environments as services (cgym serve, verifiers): above reports, below the cli
    {"cli"},
]
ROOT = len(LAYERS)  # the package root, above everything


def layer_of(module: str) -> int | None:
    """The layer of ``coalition_gym.<module>`` (``.__init__`` stripped), by the longest matching prefix."""
    parts = module.split(".")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if parts == ["coalition_gym"]:
        return ROOT
    name = ".".join(parts[1:])
    best: tuple[int, int] | None = None
    for k, group in enumerate(LAYERS):
        for prefix in group:
            if (name == prefix or name.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), k)
    return None if best is None else best[1]


def _type_checking_only(tree: ast.AST) -> set[int]:
    """Nodes under ``if TYPE_CHECKING:`` (annotations only: no run-time import, so no arrow)."""
    return {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
            and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"
            for n in ast.walk(node)}


def imports(path: Path) -> list[tuple[str, int]]:
    """(target module, line) for every package import in ``path``, lazy ones included; ``from pkg import name``
    counts ``pkg.name`` when that is a module, else ``pkg`` (``from coalition_gym import x``: the root)."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    tree = ast.parse(path.read_text())
    skip = _type_checking_only(tree)
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[:-1]  # the module's package (for __init__, the package itself)
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target != "coalition_gym" and not target.startswith("coalition_gym."):
                continue
            for alias in node.names:
                sub = PACKAGE.parent / Path(*f"{target}.{alias.name}".split("."))
                named = sub.with_suffix(".py").exists() or (sub / "__init__.py").exists()
                out.append((f"{target}.{alias.name}" if named else target, node.lineno))
        elif isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.startswith("coalition_gym")]
    return out


def test_no_module_imports_from_a_layer_above_its_own():
    breaches = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        mine = layer_of(module)
        assert mine is not None, f"{module} has no layer (see test_every_module_has_a_layer)"
        for target, line in imports(path):
            theirs = layer_of(target)
            if theirs is not None and theirs > mine:
                breaches.append(f"{module}:{line} imports {target}")
    assert breaches == []


def test_the_rule_sees_a_breach():
    assert layer_of("coalition_gym.agents.zoo") < layer_of("coalition_gym.envs.protocols")
    assert layer_of("coalition_gym.prompts") < layer_of("coalition_gym.agents.zoo")


def test_the_version_is_a_leaf_and_matches_the_distribution():
    import pytest

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    from coalition_gym.version import __version__

    assert imports(PACKAGE / "version.py") == []
    assert tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]["version"] == __version__


def _runtime_imports(path: Path, module: str, modules: set[str], type_only: bool = False) -> set[str]:
    """The package modules ``path`` imports at run time, lazy imports included and ``if TYPE_CHECKING:``
    blocks excluded unless ``type_only``; ``from pkg import name`` counts ``pkg.name`` when that is a module."""
    tree = ast.parse(path.read_text())
    skip = set() if type_only else _type_checking_only(tree)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if not base.startswith("coalition_gym"):
                continue
            subs = {f"{base}.{a.name}" for a in node.names} & modules
            found |= subs or {base}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("coalition_gym")}
    resolved = set()
    for target in found:
        while target not in modules and "." in target:
            target = target.rsplit(".", 1)[0]
        if target in modules and target != module:
            resolved.add(target)
    return resolved


def import_graph(type_only: bool = False) -> dict[str, set[str]]:
    """module -> the package modules it imports (lazy imports too; ``if TYPE_CHECKING:`` ones when ``type_only``)."""
    paths = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return {m: _runtime_imports(p, m, set(paths), type_only) for m, p in paths.items()}


def import_cycles() -> list[list[str]]:
    """Strongly connected groups of package modules in the run-time import graph (lazy imports too)."""
    graph = import_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycle_between_modules_lazy_imports_included():
    import sys

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 5000))
    assert import_cycles() == []


def test_no_two_modules_import_each_other_type_only_imports_included():
    graph = import_graph(type_only=True)
    mutual = sorted({tuple(sorted((a, b))) for a, targets in graph.items() for b in targets if a in graph.get(b, ())})
    assert mutual == []


def test_every_module_has_a_layer():
    """A new top-level module must be placed in LAYERS, or the layer rule would skip it (the package root,
    which re-exports the public API, sits above everything)."""
    unplaced = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if layer_of(module) is None:
            unplaced.append(module)
    assert unplaced == []


#: run in a fresh interpreter: the package's modules below training imported without the package root (which
#: imports everything), their module-level registries snapshotted, then every module from training up imported
_FILLED_ON_IMPORT = """
import importlib, json, sys, types
sys.path.insert(0, {tests!r})
from test_layers import LAYERS, PACKAGE, layer_of, package_modules, registries
top = next(k for k, group in enumerate(LAYERS) if "training" in group)
root = types.ModuleType("coalition_gym")
root.__path__ = [str(PACKAGE)]
sys.modules["coalition_gym"] = root
names = sorted((layer_of(n), n) for n in package_modules())
def load(which):
    for name in which:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional extra not installed
            pass
lower = [n for k, n in names if k < top]
load(lower)
before = registries(sys.modules, lower)
load([n for k, n in names if k >= top])
after = registries(sys.modules, lower)
print(json.dumps(sorted(k for k in after if after[k] != before.get(k))))
"""


def package_modules() -> list[str]:
    """Every module of the package by its import name (packages without ``.__init__``), the root and
    ``__main__`` modules left out."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__main__" or parts == ("coalition_gym", "__init__"):
            continue
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def registries(modules: dict, names: list[str]) -> dict[str, list[str]]:
    """``module.NAME`` -> its entries, for every module-level dict, list or set of the modules ``names``."""
    out = {}
    for name in names:
        module = modules.get(name)
        for attr, value in vars(module).items() if module is not None else ():
            if isinstance(value, (dict, list, set)) and not attr.startswith("__"):
                out[f"{name}.{attr}"] = sorted(repr(v) for v in value)
    return out


def test_registries_see_an_entry_added():
    import types

    module = types.ModuleType("m")
    module.HOOKS = []
    before = registries({"m": module}, ["m"])
    module.HOOKS.append("a hint")
    assert registries({"m": module}, ["m"]) != before == {"m.HOOKS": []}


@pytest.mark.slow
def test_no_higher_layer_fills_a_lower_ones_registries_on_import():
    """Importing training, reports, integrations and the cli adds nothing to a module-level registry below
    training (the envs layer once held a list of name hints that training filled in on import)."""
    import json
    import subprocess
    import sys

    script = _FILLED_ON_IMPORT.format(tests=str(Path(__file__).parent))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
