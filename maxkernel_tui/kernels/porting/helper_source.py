"""The source text of `jax_ops` helpers, for copying into generated references. No jax.

`jax_ops.py` is read as text and parsed, never imported, so the translator runs without jax.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

_HELPERS = Path(__file__).with_name("jax_ops.py")


@functools.cache
def _definitions() -> tuple[str, dict[str, ast.FunctionDef | ast.ClassDef]]:
    text = _HELPERS.read_text(encoding="utf-8")
    tree = ast.parse(text)
    defs = {
        node.name: node for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)
    }
    return text, defs


def helper_names() -> frozenset[str]:
    """Every helper a translation may call."""
    return frozenset(_definitions()[1])


def import_lines() -> str:
    """The imports every helper relies on, as `jax_ops.py` states them."""
    text, _ = _definitions()
    tree = ast.parse(text)
    return "\n".join(
        ast.get_source_segment(text, node) or ""
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
    )


def helpers_source(names: set[str]) -> str:
    """The definitions of `names` and of every helper they call, in the file's order."""
    text, defs = _definitions()
    wanted: set[str] = set()
    pending = list(names)
    while pending:
        name = pending.pop()
        if name in wanted:
            continue
        if name not in defs:
            raise KeyError(f"no helper {name!r} in {_HELPERS.name}")
        wanted.add(name)
        used = {n.id for n in ast.walk(defs[name]) if isinstance(n, ast.Name)}
        pending.extend(used & set(defs))
    return "\n\n\n".join(
        ast.get_source_segment(text, node) or "" for name, node in defs.items() if name in wanted
    )
