"""Diffs of a proposal against what it would replace: unified text and a one-line summary."""

from __future__ import annotations

import difflib


def unified(old: str, new: str, old_name: str = "current", new_name: str = "proposed") -> str:
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), old_name, new_name
        )
    )


def summary(old: str, new: str) -> str:
    """ "+18 −6" (lines added and removed); "new" when there was nothing before."""
    if not old:
        return f"new, {len(new.splitlines())} lines"
    added = removed = 0
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return f"+{added} −{removed}"
