"""MkDocs hook: the package's docstrings cite names with Sphinx roles (``:class:`System```), which
mkdocstrings renders as a literal ``:class:`` before the code span. Show the code span alone.
The references themselves are checked by tests/test_docstring_references.py, not by the site."""

import re

ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc|obj):(?=<code>)")


def on_page_content(html: str, **_: object) -> str:
    return ROLE.sub("", html)
