"""The documentation site builds in strict mode (a broken link, anchor or cross-reference fails it) and its pages
render: the home page has its heading, an API page the functions its docstrings document.

The pages' code blocks and checked claims are tests/test_readme.py's; this file builds the site as `.ci/run` and
`make docs` do."""

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MKDOCS = Path(sys.executable).parent / "mkdocs"


def text_of(page: Path) -> str:
    """A built page's visible text (tags dropped, entities decoded, whitespace runs as one space)."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page.read_text())).split())


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    if not MKDOCS.is_file() and shutil.which("mkdocs") is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[dev]' brings it)")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([str(MKDOCS if MKDOCS.is_file() else "mkdocs"), "build", "--strict", "--site-dir",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def test_the_home_page_renders(site):
    page = site / "index.html"
    assert re.search(r"<h1[^>]*>\s*coalition-gym", page.read_text())
    text = text_of(page)
    assert "Two commands" in text and "make demo" in text and "compositional strength" in text


def test_an_api_page_renders_the_docstrings(site):
    page = site / "api" / "envs" / "index.html"
    text = text_of(page)
    source = page.read_text()
    for documented in ("system.System", "system.System.build", "system.SystemSpec", "runner.run_episodes"):
        assert f'id="coalition_gym.envs.{documented}"' in source, documented  # a heading of its own
    assert "run_episodes" in text and "SystemSpec" in text
    assert ":class:" not in text  # Sphinx roles show as code alone (docs/hooks/sphinx_roles.py)


def test_every_page_of_the_nav_is_built(site):
    import yaml

    def pages(nav):
        for entry in nav:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            yield from pages(value) if isinstance(value, list) else [value]

    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    for source in pages(config["nav"]):
        built = site / ("index.html" if source == "index.md" else source.removesuffix(".md") + "/index.html")
        if source.endswith("/index.md"):
            built = site / source.removesuffix("index.md") / "index.html"
        assert built.is_file(), source
