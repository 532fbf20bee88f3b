"""The compilation cache's task parts: a worker that writes the cache names the one task whose
part it writes, a part's name is never a path, and the parts together stay within the cache's
budget, the least recently written going first."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from maxkernel_tui.kernels.sandbox.policy import SandboxPolicy, XlaCache
from maxkernel_tui.kernels.workers import prune_task_parts


def test_a_worker_that_writes_the_cache_names_its_task():
    with pytest.raises(ValueError, match="xla_scope"):
        SandboxPolicy(writable=(), xla_cache=XlaCache.SHARED)
    assert SandboxPolicy(writable=(), xla_cache=XlaCache.SHARED, xla_scope="ab12").xla_scope


@pytest.mark.parametrize("scope", ["../victim", "a/b", ".", "..", "x" * 65, "a b"])
def test_a_part_is_named_never_pathed(scope):
    with pytest.raises(ValueError, match="not a task digest"):
        SandboxPolicy(writable=(), xla_cache=XlaCache.SHARED, xla_scope=scope)


def test_a_policy_with_a_part_crosses_to_the_worker_intact():
    policy = SandboxPolicy(writable=("/w",), xla_cache=XlaCache.READ, xla_scope="f00d")
    variable, text = next(iter(policy.to_env().items()))
    assert SandboxPolicy.from_env({variable: text}) == policy


def _part(base: Path, name: str, size: int, written: float) -> Path:
    part = base / "tasks" / name
    part.mkdir(parents=True)
    entry = part / "entry-cache"
    entry.write_bytes(b"x" * size)
    os.utime(entry, (written, written))
    return part


def test_the_parts_stay_within_the_budget_least_recently_written_first(tmp_path):
    old = _part(tmp_path, "old", 600, 1_000)
    middle = _part(tmp_path, "middle", 300, 2_000)
    new = _part(tmp_path, "new", 500, 3_000)
    prune_task_parts.__wrapped__(tmp_path, budget=1000)
    assert (new.exists(), middle.exists(), old.exists()) == (True, True, False)


def test_the_newest_part_stays_even_over_the_budget(tmp_path):
    only = _part(tmp_path, "only", 5000, 1_000)
    prune_task_parts.__wrapped__(tmp_path, budget=1000)
    assert only.exists()
