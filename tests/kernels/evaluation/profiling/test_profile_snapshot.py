"""A profile reads a snapshot of its task, as an evaluation does. On a derived plain folder whose
coinciding sizes were traced, with the user's cache under the home directory (the default
layout, which every worker's sandbox refuses), the sandboxed tracer plans exactly what the
harness planned and the profile succeeds: no worker tries to read the cache."""

from pathlib import Path

import pytest

from maxkernel_tui.config import cache_dir
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.catalog import describe_tasks
from maxkernel_tui.kernels.config_names import BENCH, HELDOUT
from maxkernel_tui.kernels.evaluation.profiling.profile import profile_kernel
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.evaluation.tracer.carried import ProgramRefused, checked_program
from maxkernel_tui.kernels.evaluation.tracer.tracing import trace_source
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.snapshot import snapshot_task
from tests.support.paths import KERNELS
from tests.support.task_folders import write_plain

pytestmark = pytest.mark.slow  # describe, tracer and profile workers: jax, TPU compiles

KERNEL = KERNELS / "honest" / "41k_Gemm_Add_ReLU.py"


@pytest.fixture
def home_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's cache where a new user has it: under a home directory of the test's own."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MAXKERNEL_TUI_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_dir().is_relative_to(tmp_path / "home")
    return cache_dir()


def test_a_traced_plain_folder_profiles_with_the_cache_under_home(tmp_path, home_cache):
    folder = write_plain(tmp_path / "tasks", "41k_Gemm_Add_ReLU")  # batch = out_features
    static = load_task(folder)
    describe_tasks([static], home_cache, with_cost=False, workers=1)  # leaves the traced ties
    task = load_task(folder, cache=home_cache)  # as the harness plans it
    assert task.derivation.groups != static.derivation.groups
    assert task.derivation.sizes[HELDOUT] != static.derivation.sizes[HELDOUT]

    (tmp_path / "copies").mkdir()
    snapshot = snapshot_task(task, tmp_path / "copies")
    traced = trace_source(KERNEL.read_text(), snapshot, 300, [BENCH, HELDOUT])
    program = tmp_path / "heldout.bin"
    program.write_bytes(traced[HELDOUT])
    reference = runtime.load_reference(task)
    # the tracer's held-out program has the harness's shapes, not the static plan's
    checked_program(program, task, reference, HELDOUT, "held-out shapes")
    with pytest.raises(ProgramRefused):
        checked_program(program, static, runtime.load_reference(static), HELDOUT, "static")

    summary = profile_kernel(
        KernelSource.read(KERNEL), task, targets=("v5e",), trace_root=tmp_path / "traces"
    )
    assert summary.problems == []
    assert [e.target for e in summary.estimates] == ["v5e"] and summary.estimates[0].seconds > 0
    assert summary.trace is not None and summary.trace.top_events
