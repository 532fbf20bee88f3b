"""Two texts in two columns, for the engineer's review of a port (the source left, the JAX
reference right). No jax."""

from __future__ import annotations

from itertools import zip_longest


def side_by_side(
    left: str, right: str, width: int = 160, titles: tuple[str, str] = ("", "")
) -> str:
    """`left` and `right` in columns of `width // 2`, long lines cut with `…`."""
    column = max(20, (width - 3) // 2)

    def fit(line: str) -> str:
        line = line.expandtabs(4)
        return (line if len(line) <= column else line[: column - 1] + "…").ljust(column)

    rows = [f"{fit(titles[0])} │ {titles[1]}", f"{'─' * column}─┼─{'─' * column}"]
    rows += [
        f"{fit(a)} │ {fit(b).rstrip()}"
        for a, b in zip_longest(left.splitlines(), right.splitlines(), fillvalue="")
    ]
    return "\n".join(row.rstrip() for row in rows) + "\n"
