"""What tracing a derived task's reference told about its coinciding sizes, kept where every
process that loads the task finds it. No jax; nothing of the task runs here.

Sizes of one production value (m = n = 4096 in a GEMM) move together in the static plan
(derive/rules.py): the source does not say whether the reference ties them. The describe
worker traces the reference (tie_probe.py) and answers the groups the derivation may use, the
held-out configuration of which it has traced. Those groups are kept:
- in the user's cache, by the digest of the task's files (`remember`), read by `load_task` in
  the UI and CLI processes, which name the cache (`known_groups(task, cache)`);
- beside the files of a task's snapshot (snapshot.py: an evaluation's, a profile's,
  a trace's) and of a task shipped to a Ray node (`TIES_FILE`, written by us, never copied from
  the task's own folder): the only place a worker looks. A worker names no cache, so it never
  tries to read the user's (its sandbox refuses that), and plans exactly what the harness did.
A task never traced keeps the static plan: every size of a value moves with the others.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from maxkernel_tui.kernels.task import Task

TIES_FILE = ".maxkernel-ties.json"  # beside a snapshot's files; skipped when copying a task
TIES_FORMAT = 1  # of the entries: bump when what they mean changes, so tasks are traced again
Groups = tuple[tuple[str, ...], ...]


def sources_digest(task: Task) -> str:
    """The digest of the files whose content is the task (a traced answer holds for them)."""
    digest = hashlib.sha256(f"ties|{TIES_FORMAT}".encode())
    for path in task.defining_files:
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def known_groups(task: Task, cache: Path | None) -> Groups | None:
    """The traced groups of this task's content: from the file beside a snapshot's copy, else
    from `cache` (the user's, named only by the UI and CLI processes; None in a worker); None
    when it was never traced (or the files changed since)."""
    try:
        digest = sources_digest(task)
    except OSError:
        return None
    places = [task.folder / TIES_FILE] + ([] if cache is None else [_cache_path(cache, digest)])
    for path in places:
        groups = _read(path, digest)
        if groups is not None:
            return groups
    return None


def remember(task: Task, groups: Groups, root: Path) -> None:
    """Keep the groups the describe worker answered for this task's content, in the cache at
    `root` (the catalog's)."""
    path = _cache_path(root, sources_digest(task))
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    temporary.write_text(ties_text(task, groups))
    temporary.replace(path)  # atomic: a killed process never leaves half an entry


def ties_text(task: Task, groups: Groups) -> str:
    """The entry for this task's content: what TIES_FILE holds."""
    return json.dumps({"digest": sources_digest(task), "groups": [list(g) for g in groups]})


def planned_ties(task: Task) -> str:
    """What TIES_FILE holds beside a copy of `task`, for a derived task whose sizes coincide:
    the groups `task` was planned with (none: the static plan); "" for any other task."""
    derivation = task.derivation
    if derivation is None or not derivation.derived or not derivation.coinciding():
        return ""
    return ties_text(task, derivation.groups)


def _read(path: Path, digest: str) -> Groups | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):  # absent, unreadable (a sandboxed worker), or cut short
        return None
    if not isinstance(data, dict) or data.get("digest") != digest:
        return None
    groups = data.get("groups")
    if not isinstance(groups, list) or not all(
        isinstance(g, list) and all(isinstance(n, str) for n in g) for g in groups
    ):
        return None
    return tuple(tuple(g) for g in groups)


def _cache_path(root: Path, digest: str) -> Path:
    return root / "ties" / f"{digest[:32]}.json"
