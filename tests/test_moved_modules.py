"""Modules that moved keep their old import path for one release: importing it warns and gives the new module
itself (so attribute lookups, monkeypatching and ``is`` checks see one module)."""

import importlib
import sys

import pytest

MOVED = {
    "coalition_gym.redaction": "coalition_gym.result_files",
    "coalition_gym.scorers.sandbox": "coalition_gym.sandbox.launcher",
    "coalition_gym.scorers.split": "coalition_gym.sandbox.two_process",
    "coalition_gym.tasks.prompts": "coalition_gym.prompts",
    "coalition_gym.envs.protocols.helpers": "coalition_gym.envs.protocols.utils",
    "coalition_gym.valuation.report": "coalition_gym.reports.leaderboard",
    "coalition_gym.valuation.tables": "coalition_gym.reports.tables",
    "coalition_gym.valuation.html": "coalition_gym.reports.html",
    "coalition_gym.valuation.compare": "coalition_gym.reports.compare",
    "coalition_gym.valuation.sweep": "coalition_gym.reports.sweep",
    "coalition_gym.valuation.robustness": "coalition_gym.reports.robustness",
    "coalition_gym.valuation.robustness_report": "coalition_gym.reports.robustness_files",
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_warns_and_is_the_new_module(old, monkeypatch):
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {MOVED[old]}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])


def test_no_module_of_the_package_uses_an_old_path():
    from pathlib import Path

    package = Path(importlib.import_module("coalition_gym").__file__).parent
    users = [str(p.relative_to(package)) for p in package.rglob("*.py")
             for old in MOVED if old in p.read_text() and "_compat import moved" not in p.read_text()]
    assert users == []
