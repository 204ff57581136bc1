"""The README's Python examples must run as written (the quickstart stays true)."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 3
    namespace = {"my_policy": lambda obs: "Some thought.\nAnswer: 3"}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
