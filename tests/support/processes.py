"""What tests read about live processes, from /proc: which are below a pid, whether one still
runs, how much CPU it has used."""

import os
from pathlib import Path


def children(pid: int) -> set[int]:
    return {p for p, parent in _parents().items() if parent == pid}


def descendants(pid: int) -> set[int]:
    """The live processes below `pid` (children, grandchildren, ...), from /proc."""
    parents = _parents()
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        below = [p for p, pp in parents.items() if pp == parent]
        found.update(below)
        todo.extend(below)
    return found


def _parents() -> dict[int, int]:
    """pid -> parent pid of every live process, from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    return parents


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended; only its exit status is left


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
