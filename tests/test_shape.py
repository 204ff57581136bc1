"""The package's shape: no public function, method or constructor takes more than 8 parameters, and no function
(public or not, nested ones included) is longer than 80 lines.

Long parameter lists are how a bundle (protocol, pool, task, coalition, seats, styles, dev scores ...) ends up
passed by hand; that bundle is a :class:`~coalition_gym.envs.system.System`, and run settings are small
option dataclasses (a backend's: ``HFOptions``, ``OpenAIOptions`` ...). Counted: every parameter but a
method's ``self``/``cls``; ``*args`` and ``**kwargs`` count one each. Public: the name does not start with
``_``, and neither does its class's; a public class's explicit ``__init__`` counts as its constructor (a
dataclass's generated one is its fields, not counted).
"""

from __future__ import annotations

import ast
from pathlib import Path

import coalition_gym

MAX_PARAMETERS = 8
MAX_LINES = 80  # a function's lines, from its ``def`` to its last line (a longer one does several jobs)
PACKAGE = Path(coalition_gym.__file__).parent


def parameter_count(fn: ast.FunctionDef | ast.AsyncFunctionDef, is_method: bool) -> int:
    args = fn.args
    named = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    if is_method and named and named[0].arg in ("self", "cls"):
        named = named[1:]
    return len(named) + (args.vararg is not None) + (args.kwarg is not None)


def public_functions(tree: ast.Module):
    """(qualified name, node, is_method) for module-level functions and methods of module-level classes."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node, False
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    static = any(getattr(d, "id", None) == "staticmethod" for d in item.decorator_list)
                    yield f"{node.name}.{item.name}", item, not static


def offenders(limit: int = MAX_PARAMETERS) -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for name, fn, is_method in public_functions(tree):
            if fn.name.startswith("_") and fn.name != "__init__":
                continue
            n = parameter_count(fn, is_method)
            if n > limit:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{fn.lineno} {name} takes {n} parameters")
    return found


def test_no_public_function_takes_more_than_eight_parameters():
    bad = offenders()
    assert not bad, (f"{len(bad)} public functions take more than {MAX_PARAMETERS} parameters (pass a System and "
                     "an options dataclass instead):\n" + "\n".join(bad))


def test_the_counter_counts_what_it_says():
    tree = ast.parse("def f(a, b=1, *c, d, **e): pass\n"
                     "class K:\n    def m(self, a, *, b): pass\n    @staticmethod\n    def s(x, y): pass\n"
                     "    def __init__(self, a, *, b, **c): pass\n")
    counts = {name: parameter_count(fn, method) for name, fn, method in public_functions(tree)}
    assert counts == {"f": 5, "K.m": 2, "K.s": 2, "K.__init__": 3}


def test_constructors_count():
    """A generator's settings are its options object, not a dozen keywords (OpenAIGenerator took 14)."""
    tree = ast.parse("class Wide:\n    def __init__(self, a, b, c, d, e, f, g, h, i): pass\n"
                     "class _Private:\n    def __init__(self, a, b, c, d, e, f, g, h, i): pass\n")
    wide = [(name, parameter_count(fn, method)) for name, fn, method in public_functions(tree)]
    assert wide == [("Wide.__init__", 9)]  # the private class's is not listed


def function_lengths(tree: ast.Module) -> list[tuple[str, int, int]]:
    """(qualified name, first line, lines) of every function in ``tree``, nested ones and methods included; a
    function counts from its ``def`` line to its last, docstring and comments included."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                found.append((name, child.lineno, child.end_lineno - child.lineno + 1))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def long_functions(limit: int = MAX_LINES) -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        found += [f"{path.relative_to(PACKAGE.parent)}:{line} {name} is {n} lines"
                  for name, line, n in function_lengths(tree) if n > limit]
    return found


def test_no_function_is_longer_than_eighty_lines():
    bad = long_functions()
    assert not bad, (f"{len(bad)} functions are longer than {MAX_LINES} lines (split them into functions that "
                     "each do one job):\n" + "\n".join(bad))


def test_the_line_counter_counts_what_it_says():
    source = ("def f():\n    x = 1\n\n    def g():\n        return x\n    return g\n"
              "class K:\n    def m(self):\n        pass\n")
    assert function_lengths(ast.parse(source)) == [("f", 1, 6), ("f.g", 4, 2), ("K.m", 8, 2)]
