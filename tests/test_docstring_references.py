"""Docstrings cannot rot: every Sphinx-style cross-reference in the package's docstrings (``:mod:``, ``:class:``,
``:func:``, ``:meth:``, ``:attr:``, ``:data:``, ``:exc:``) names something that exists.

A reference resolves as Python would read it from the module that holds the docstring: leading dots are relative
imports (``.x``: a module of the same package, ``..x``: of the parent), a dotted name is imported and its
attributes followed, a bare name is looked up in the module, then in the class whose docstring it is in. An
attribute a class sets on its instances (``self.name = ...``) counts as the class's.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from types import ModuleType
from typing import Any

import coalition_gym

ROLE = re.compile(r":(mod|class|func|meth|attr|data|exc|obj):`~?([^`<>]+?)`")


def _follow(obj: Any, names: list[str]) -> bool:
    for name in names:
        if inspect.isclass(obj) and name not in dir(obj) and not _sets(obj, name):
            return False
        if not inspect.isclass(obj):
            if not hasattr(obj, name):
                return False
        obj = getattr(obj, name, None)
    return True


def _sets(cls: type, name: str) -> bool:
    """Whether ``cls`` (or a base of it) sets ``self.<name>`` in its source."""
    for klass in cls.__mro__:
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        if re.search(rf"self\.{re.escape(name)}\b\s*(:[^=]+)?=", source) or re.search(
                rf"self\.(\w+, )*{re.escape(name)}(, self\.\w+)*\s*=", source):
            return True
    return False


def _absolute(target: str, module: ModuleType) -> str:
    dots = len(target) - len(target.lstrip("."))
    package = module.__name__.split(".")
    if not (module.__file__ or "").endswith("__init__.py"):
        package = package[:-1]
    package = package[:len(package) - (dots - 1)] if dots > 1 else package
    rest = target.lstrip(".")
    return ".".join(package + ([rest] if rest else []))


def _imported(path: str) -> bool:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        return _follow(obj, parts[cut:])
    return False


def resolves(target: str, module: ModuleType, owner: type | None) -> bool:
    target = target.strip().removesuffix("()")
    if target.startswith("."):
        return _imported(_absolute(target, module))
    first, *rest = target.split(".")
    if first in vars(module):
        return _follow(vars(module)[first], rest)
    if owner is not None and (hasattr(owner, first) or _sets(owner, first)):
        return _follow(getattr(owner, first, None), rest) if rest and hasattr(owner, first) else not rest
    return "." in target and _imported(target)


def documented(module: ModuleType) -> list[tuple[str | None, type | None]]:
    """The module's docstring, and those of its own classes (with their methods and properties) and functions."""
    docs: list[tuple[str | None, type | None]] = [(module.__doc__, None)]
    for obj in vars(module).values():
        if getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(obj):
            docs.append((obj.__doc__, None))
        elif inspect.isclass(obj):
            docs.append((obj.__doc__, obj))
            for member in vars(obj).values():
                function = getattr(member, "__func__", member)
                if inspect.isfunction(function) or isinstance(member, property):
                    docs.append((function.__doc__, obj))
    return docs


def test_every_docstring_cross_reference_names_something_that_exists():
    broken = []
    for info in pkgutil.walk_packages(coalition_gym.__path__, "coalition_gym."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra not installed (vllm): its module's references are not read
            continue
        for doc, owner in documented(module):
            for role, target in ROLE.findall(doc or ""):
                if not resolves(target, module, owner):
                    broken.append(f"{module.__name__}{'.' + owner.__name__ if owner else ''}: :{role}:`{target}`")
    assert broken == [], "\n".join(sorted(set(broken)))
