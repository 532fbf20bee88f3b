"""A kernel's tunables: the block of module-level integer constants after a `# Tunables` comment.

The implementer declares them there; the autotuner reads and rewrites only those lines, so the
rest of the file (and the engineer's edits) stay exactly as they were.
"""

from __future__ import annotations

import re

_NAME_VALUE = re.compile(r"^([A-Z][A-Z0-9_]*)\s*=\s*(\d+)\s*(#.*)?$")


def _block(lines: list[str]) -> list[int]:
    """Indices of the tunable lines: after the first `# Tunables` comment (more comment lines
    may follow it), up to the first line that is not `NAME = int`."""
    start = next(
        (i for i, line in enumerate(lines) if line.lstrip().lower().startswith("# tunables")), None
    )
    if start is None:
        return []
    index = start + 1
    while index < len(lines) and lines[index].startswith("#"):
        index += 1
    found = []
    while index < len(lines) and _NAME_VALUE.match(lines[index]):
        found.append(index)
        index += 1
    return found


def find_tunables(source: str) -> dict[str, int]:
    lines = source.splitlines()
    return {m[1]: int(m[2]) for m in (_NAME_VALUE.match(lines[i]) for i in _block(lines)) if m}


def set_tunables(source: str, values: dict[str, int]) -> str:
    """`source` with the named tunables set; a name that is not declared is an error."""
    lines = source.splitlines(keepends=True)
    block = _block([line.rstrip("\n") for line in lines])
    declared = {_NAME_VALUE.match(lines[i].rstrip("\n"))[1]: i for i in block}  # type: ignore[index]
    unknown = set(values) - set(declared)
    if unknown:
        raise KeyError(f"not declared as tunables: {', '.join(sorted(unknown))}")
    for name, value in values.items():
        match = _NAME_VALUE.match(lines[declared[name]].rstrip("\n"))
        comment = f"  {match[3]}" if match and match[3] else ""
        lines[declared[name]] = f"{name} = {int(value)}{comment}\n"
    return "".join(lines)
