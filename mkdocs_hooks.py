"""mkdocs hooks for the API reference (mkdocs.yml ``hooks:``).

The docstrings cross-reference with Sphinx roles (``:func:`name```), which read well in ``help()``
and in the source; mkdocstrings renders them as literal text before the code span, so the role
prefix is dropped from the rendered page, leaving the name as code.
"""
from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:func|meth|class|data|attr|mod|exc|obj):(?=<code>)")


def on_page_content(html: str, **kwargs: Any) -> str:
    return _ROLE.sub("", html)
