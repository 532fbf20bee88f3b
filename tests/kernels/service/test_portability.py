"""The portability matrix through the real harness and libtpu: an 8p GEMM tuned for v6e (28 MiB
of double-buffered blocks) is refused by v5e's compiler for its scoped VMEM, in the compiler's
own words, and compiles for v6e; every generation gets the model's VMEM and time."""

from __future__ import annotations

import pytest

from maxkernel_tui.kernels.loader import find_task
from maxkernel_tui.kernels.service.portability import GENERATIONS, portability
from maxkernel_tui.kernels.service.service import EvaluationService, KernelSource
from maxkernel_tui.kernels.service.setup import EvalOptions, EvaluationSetup
from tests.support.paths import KERNELS

pytestmark = pytest.mark.slow  # a TPU compile per generation, in worker processes


def test_an_8p_gemm_tuned_for_v6e_fails_v5e_scoped_vmem_and_compiles_for_v6e(
    suite_tasks, tmp_path
) -> None:
    task = find_task("8p", suite_tasks)
    setup = EvaluationSetup.local(EvalOptions(target="v6e", seeds=1))
    service = EvaluationService(setup, task, tmp_path / "traces")
    kernel = KernelSource.read(KERNELS / "portability" / "8p_GEMM_tuned_v6e.py")
    try:
        rows = {row.target: row for row in portability(service, kernel, tmp_path / "traces")}
    finally:
        service.close()
    assert tuple(rows) == GENERATIONS
    v5e, v6e = rows["v5e"], rows["v6e"]
    assert v5e.compiles is False, v5e
    assert "vmem" in v5e.reason.lower() and "scoped" in v5e.reason.lower(), v5e.reason
    assert v6e.compiles is True and v6e.reason == "", v6e
    for row in rows.values():  # the model's figures beside each compile
        assert row.vmem_bytes and row.seconds and row.vs_xla, row
        assert "estimated" in row.basis
    assert rows["v6e"].vmem_bytes == rows["v5e"].vmem_bytes > 16 * 2**20
