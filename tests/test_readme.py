"""The README's Python examples run as written: each block on its own (a reader copies one) and all in
order; the zoo table is the shipped zoo's (the same on every machine); no link leaves the repository."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_there_are_examples():
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("k", range(len(BLOCKS)))
def test_each_python_block_runs_on_its_own(k, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # blocks that write (a cache under runs/) write here
    exec(compile(BLOCKS[k], f"README.md block {k + 1}", "exec"), {"__name__": "readme"})


def test_the_blocks_run_in_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "readme"}
    for k, block in enumerate(BLOCKS):
        exec(compile(block, f"README.md block {k + 1}", "exec"), namespace)


def test_no_link_leaves_the_repository():
    text = README.read_text()
    assert "../" not in text
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target


def test_the_zoo_table_is_the_shipped_zoo():
    from coalition_gym.agents.zoo import ensure_zoo

    build = ensure_zoo("default")
    assert build.source == "shipped"  # the same table on every machine, with or without a local build
    table = build.table()
    rows = {line.split("|")[1].strip(): line.split("|")[5:8] for line in table.splitlines()[2:]}
    readme_rows = {line.split("|")[1].strip(): line.split("|")[5:8]
                   for line in README.read_text().splitlines() if line.startswith("| ") and "394,464" in line
                   or line.startswith(("| polymath", "| sprout"))}
    assert readme_rows == rows  # accuracy columns (training seconds vary from build to build)
