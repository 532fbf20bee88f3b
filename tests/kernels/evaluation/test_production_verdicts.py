"""Verdicts earned at production shapes, through the harness: kernels exact on every check and
held-out shape that cheat only at production shapes are each rejected for their reason, honest
styles are accepted and say `verified at production shapes` (gemm_relu, 41k's problem at shapes
a CPU samples in seconds; kernels from gemm_relu_variants.py)."""

import pytest

from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.report.checks import SMALL_SHAPES_ONLY, VERIFIED_AT_PRODUCTION
from maxkernel_tui.kernels.report.reasons import Reason, TilesFigures
from tests.support.gemm_relu_variants import HONEST, TASK, render

# starts candidate and reference workers; each evaluation runs numerics and production tiles
pytestmark = pytest.mark.slow

OPTIONS = EvalOptions(seeds=1, tile_blocks=4)  # tests turn the sample off by default


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        # the reference's production outputs are cached here, not in the user's cache
        patch.setenv("MAXKERNEL_TUI_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        with Harness() as shared:
            yield shared


@pytest.mark.parametrize(
    ("variant", "check", "reason"),
    [
        # pl.when on the grid's size skips every other depth step at production shapes
        ("skip_k_by_grid_size", "tiles", Reason.TILES_OUTSIDE_TOLERANCE),
        # pl.when on the grid's size leaves odd row blocks to stale memory (the output buffer
        # holds the block before): their values change with the poison (tiles/poison.py)
        ("stale_rows_by_grid_size", "tiles", Reason.TILES_STATE_CARRIED),
        ("half_k_by_size", "production", Reason.DEFENCES_BROKEN),
    ],
)
def test_a_kernel_that_cheats_only_at_production_shapes_is_rejected_for_its_reason(
    harness, tmp_path, variant, check, reason
):
    report = harness.evaluate(
        KernelSource.read(render(variant, tmp_path)), load_task(TASK), OPTIONS
    )
    assert report.verdict == "rejected"
    assert (report.failure.name, report.failure.reason) == (check, reason), report.failure
    if check == "tiles":  # exact where the numerics ran: only production shapes show it
        passed = {c.name for c in report.checks if c.status == "pass"}
        assert {"numerics", "heldout", "production"} <= passed


def test_a_branch_on_the_platform_in_python_sees_only_the_tracers_cpu(harness, tmp_path):
    """`jax.default_backend() == "tpu"` halving the depth steps: no static rule refuses it any
    more. The kernel's Python runs only in the tracer, where jax has the CPU alone, so the one
    program it traces (checked here, compiled for the TPU and timed there) takes every step."""
    report = harness.evaluate(
        KernelSource.read(render("backend_branch", tmp_path)), load_task(TASK), OPTIONS
    )
    assert report.verdict == "accepted", report.failure
    assert report.scope == VERIFIED_AT_PRODUCTION


@pytest.mark.parametrize(
    "variant", [None, "blocks_by_size", "zero_block_fast_path", "padded_fixed_tiles"]
)
def test_honest_kernels_are_accepted_and_verified_at_production_shapes(harness, tmp_path, variant):
    kernel = HONEST if variant is None else render(variant, tmp_path)
    report = harness.evaluate(KernelSource.read(kernel), load_task(TASK), OPTIONS)
    assert report.verdict == "accepted", report.failure
    assert report.scope == VERIFIED_AT_PRODUCTION
    tiles = next(c for c in report.checks if c.name == "tiles")
    assert isinstance(tiles.figures, TilesFigures)
    assert 8 <= tiles.figures.blocks < tiles.figures.of_blocks  # a sample, not the whole grid
    assert any(line.startswith("production tiles (pass): ") for line in report.evidence)
    assert report.verdict_line == f"verdict: ACCEPTED, {VERIFIED_AT_PRODUCTION}"


def test_without_the_sample_a_verdict_says_it_was_checked_at_small_shapes_only(harness):
    report = harness.evaluate(
        KernelSource.read(HONEST), load_task(TASK), EvalOptions(seeds=1, tile_blocks=None)
    )
    assert report.verdict == "accepted" and report.scope == SMALL_SHAPES_ONLY
    assert all(c.name != "tiles" for c in report.checks)
