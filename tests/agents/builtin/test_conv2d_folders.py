"""The 2-D convolution families on folders the built-in suite does not hold: MaxKernel's adapted
18k, 22k and 46k (sizes in a dict at module level or inside get_inputs, a shape tuple kept as a
dict entry, the group count a static arg) and a task of our own in a third style (named
integers, the image the last argument, 8 groups). benchmarks/folder_coverage.py plans each,
evaluates it with the real harness and must call every one accepted."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.paths import BENCHMARKS, ISSUE40_CONV2D

pytestmark = pytest.mark.slow  # plans and evaluates four tasks: minutes on a busy machine


def test_every_conv2d_folder_is_planned_and_accepted():
    folders = sorted(p.name for p in ISSUE40_CONV2D.iterdir() if p.is_dir())
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "folder_coverage.py"), str(ISSUE40_CONV2D)],
        capture_output=True,
        text=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        timeout=3600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    accepted = {row.split("|")[1].strip() for row in rows if "| accepted |" in row}
    assert accepted == set(folders)
