"""Fixtures of the engine tests: the fast ones run on `bench` (fake tools, no jax); the slow
ones open real sessions (`open_on`). The kernels and answers are in tests/support/engine.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from maxkernel_tui.store.db import Store
from tests.support.cli_runs import env
from tests.support.engine import Bench
from tests.support.sessions import open_on, rmsnorm, settings, store

__all__ = ["env", "open_on", "rmsnorm", "settings", "store"]  # fixtures, shared with the search


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    with Store(tmp_path / "fast.db") as db:
        yield Bench(db, tmp_path / "sessions")
