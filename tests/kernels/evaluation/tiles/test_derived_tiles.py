"""An expert whose fixed tiles are larger than the sizes a task derives for `check` and
`heldout` (JAXBench's native GEMM folder, blocks of 8192 rows over a derived
check of 2048 and held-out of 4096): those configurations cannot run its tiling (a grid of zero
steps, nothing written), so on a derived task they are not judged by numerics and the verdict is
earned at production tiles. A kernel that hides behind such tiles and is wrong at production is
still rejected there; with no production tiles nothing judges it, and it is not accepted; on a
task of our own format, whose check is declared, a tiling that does not fit it is the kernel's
own failure, as before."""

import pytest

from maxkernel_tui.kernels.config_names import CHECK, HELDOUT
from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.report.checks import (
    ACCEPTED,
    REJECTED,
    TILES,
    VERIFIED_AT_PRODUCTION,
)
from maxkernel_tui.kernels.report.reasons import NotJudged, Reason, TilesFigures
from tests.support.maxkernel_dataset import write_jaxbench_tiled_gemm
from tests.support.tiled_gemm_tasks import write_declared_gemm, write_tiled_candidate

# jax worker processes, TPU compiles, sampled production tiles in interpret mode
pytestmark = pytest.mark.slow

SIZES = (8192, 256, 8192)  # derived: check M = N = 2048, held-out 4096
TILES_MKN = (8192, 128, 128)  # block_m, block_n, block_k: one row block (12 MiB of VMEM)
TILED = EvalOptions(seeds=1, tile_blocks=2)  # tests turn the sample off by default


def _unfit(config: str, size: int, where: str) -> str:
    return (
        f"{config}: not run — the kernel's tiles (block 8192 along axis 0 of output 0 of "
        f"_kernel) do not fit the derived {config} shapes ({size}); {where}"
    )


def test_an_expert_whose_tiles_exceed_the_derived_sizes_is_judged_at_production_tiles(tmp_path):
    task = load_task(write_jaxbench_tiled_gemm(tmp_path / "tasks", SIZES, TILES_MKN))
    assert task.derived
    wrong = write_tiled_candidate(tmp_path / "wrong.py", SIZES, TILES_MKN, wrong=True)
    with Harness() as harness:
        expert = harness.evaluate(KernelSource.read(task.expert_path), task, TILED)
        hiding = harness.evaluate(KernelSource.read(wrong), task, TILED)
        untiled = harness.evaluate(
            KernelSource.read(task.expert_path), task, EvalOptions(seeds=1, tile_blocks=None)
        )
        refusing = write_tiled_candidate(tmp_path / "refusing.py", SIZES, TILES_MKN, refusing=True)
        refused = harness.evaluate(KernelSource.read(refusing), task, TILED)
        # the tester's pass after an acceptance: an edge case at check's sizes does not fit either
        edge = ("edge_check", dict(task.derivation.sizes[CHECK]))
        edges = EvalOptions(seeds=1, extra_configs=(edge,), edges_only=True)
        edge_pass = harness.evaluate(KernelSource.read(task.expert_path), task, edges)
    assert expert.verdict == ACCEPTED, expert.failure
    assert expert.scope == VERIFIED_AT_PRODUCTION
    where = "its numerics are judged at production tiles only"
    assert _unfit(CHECK, 2048, where) in expert.evidence, expert.evidence
    assert _unfit(HELDOUT, 4096, where) in expert.evidence, expert.evidence
    # nothing claims a numerics run, and the task's notes are notes, not checks that never ran
    assert not any("fresh seed" in line for line in expert.evidence), expert.evidence
    assert not any(line.startswith("note: not run") for line in expert.evidence), expert.evidence
    tiles = next(c for c in expert.checks if c.name == TILES)
    assert tiles.status == "pass" and isinstance(tiles.figures, TilesFigures), tiles
    assert tiles.figures.blocks >= 2, tiles
    # a tiling that refuses to be traced at sizes it does not divide (as splash attention does):
    # the production program's blocks, taken to the derived sizes, say why; judged at production
    assert refused.verdict == ACCEPTED, refused.failure
    assert refused.scope == VERIFIED_AT_PRODUCTION
    refusal = "and the kernel refused to be traced there: "
    assert any(line.startswith(_unfit(CHECK, 2048, "")[:-2]) for line in refused.evidence)
    refusals = [line for line in refused.evidence if refusal in line]
    assert len(refusals) == 2 and "does not tile by 8192x128" in refusals[0], refused.evidence
    # the edge pass skips its case and says why; joined, the acceptance stands
    joined = expert.with_edge_pass(edge_pass)
    assert joined.verdict == ACCEPTED, joined.failure
    by_full = "its numerics are judged at production shapes by the full evaluation"
    assert _unfit("edge_check", 2048, by_full) in joined.evidence, joined.evidence
    # wrong at every size, right where nothing runs: the production tiles find it
    assert hiding.verdict == REJECTED
    assert hiding.failure is not None and hiding.failure.name == TILES, hiding.failure
    assert hiding.failure.reason == Reason.TILES_OUTSIDE_TOLERANCE
    # nothing compared its outputs anywhere: not accepted, and the reason is not wrong numerics
    assert untiled.verdict == REJECTED
    assert untiled.failure is not None and untiled.failure.reason == Reason.NOT_JUDGED
    assert isinstance(untiled.failure.figures, NotJudged)
    assert untiled.failure.figures.configs == ("check", "heldout")


def test_a_tiling_that_misses_a_declared_check_is_still_the_kernels_failure(tmp_path):
    configs = {"bench": SIZES, CHECK: (2048, 256, 2048), HELDOUT: (4096, 256, 4096)}
    task = load_task(write_declared_gemm(tmp_path / "tasks", configs))
    assert not task.derived
    kernel = write_tiled_candidate(tmp_path / "kernel.py", SIZES, TILES_MKN)
    with Harness() as harness:
        report = harness.evaluate(KernelSource.read(kernel), task, TILED)
    assert report.verdict == REJECTED
    assert report.failure is not None and report.failure.name == "numerics", report.failure
    assert report.failure.reason == Reason.NON_FINITE, report.failure
