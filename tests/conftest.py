"""Shared test helpers: a scripted generator, a tiny in-memory task, and a headless browser for the HTML pages."""

from __future__ import annotations

from typing import Callable, Sequence

import pytest

try:  # one intra-op thread: on a shared 2-core machine torch's default threads fight and crawl
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover - torch is a core dependency
    pass

import shutil
from pathlib import Path

from coalition_gym.agents.base import Generator
from coalition_gym.scorers.kinds import AnswerKind
from coalition_gym.scorers.result import ScoreResult
from coalition_gym.tasks.base import Task
from coalition_gym.types import Ask, Item, Sample

TESTS = Path(__file__).resolve().parent  # tests/ (the suite mirrors the package in subfolders)
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"


class Scripted(Generator):
    """Replies with ``reply(ask)``; records every batch it receives."""

    def __init__(self, reply: Callable[[Ask], str], identity: str = "scripted"):
        self.reply = reply
        self.identity = identity
        self.calls: list[list[Ask]] = []

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        self.calls.append(list(asks))
        return [Sample(text=self.reply(a)) for a in asks]


class Recorder(Scripted):
    """Passes batches to ``inner`` and records them."""

    def __init__(self, inner: Generator):
        super().__init__(lambda ask: "")
        self.inner = inner

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        self.calls.append(list(asks))
        return self.inner.generate(asks)


class Equal(AnswerKind):
    """The final-answer line, right when it equals the gold exactly."""

    name = "equal_test"

    def score(self, answer: str, item: Item) -> ScoreResult:
        return ScoreResult(float(answer == item.gold), True)


class ListTask(Task):
    """Exact-match task over fixed items."""

    name = "list"
    category = "test"
    answer_kind = Equal()

    def __init__(self, golds: Sequence[str] = ("7", "8", "9")):
        self._items = [Item(id=f"q{i}", question=f"Question {i}?", gold=g, category="test")
                       for i, g in enumerate(golds)]

    def items(self, split: str = "test") -> list[Item]:
        self.check_split(split)
        return self._items



def answer_text(answer: str | None) -> str:
    return "I am not sure about this one." if answer is None else f"Some reasoning.\nAnswer: {answer}"


@pytest.fixture
def task() -> ListTask:
    return ListTask()


#: the system's Chromium and its driver (Debian: chromium chromium-driver; .ci/run installs both)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium through Selenium, its console log kept (tests read errors from it); skips without it."""
    if not (CHROMIUM and DRIVER):
        pytest.skip("needs chromium and chromedriver (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1200,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield driver
    driver.quit()
