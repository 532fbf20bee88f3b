"""Fixtures of the sandbox's tests: one harness per test file, and the hostile task
(tests/support/hostile_kernels.py) judged with the static rules switched off, so that only the
layer a test names stands in the way."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from maxkernel_tui.kernels.evaluation import harness as harness_module
from maxkernel_tui.kernels.evaluation.harness import Harness
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.task import Task
from tests.support import hostile_kernels as hostile


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    with Harness() as shared:
        yield shared


@pytest.fixture
def task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Task:
    """The hostile task, its kernels judged with the static rules off."""
    monkeypatch.setattr(harness_module, "broken_rules", lambda *args, **kwargs: [])
    return load_task(hostile.write_task(tmp_path / "task"))
