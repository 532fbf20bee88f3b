"""`maxkernel-tui profile` on a tiled GEMM and a row-wise norm: every figure there and labelled."""

import json

import pytest

from tests.support.cli import cli
from tests.support.paths import KERNELS


@pytest.mark.slow  # worker processes: jax, TPU compiles
@pytest.mark.parametrize(("kernel", "task"), [("8p_GEMM", "8p"), ("12p_RMSNorm", "12p")])
def test_profile_reports_labelled_figures_for_v5e_and_v6e(kernel, task, tmp_path):
    done = cli(
        "profile",
        str(KERNELS / "honest" / f"{kernel}.py"),
        "--task",
        task,
        "--tpu",
        "v5e",
        "--tpu",
        "v6e",
        "--json",
        cache=tmp_path,
    )
    summary = json.loads(done.stdout)
    assert [e["target"] for e in summary["estimates"]] == ["v5e", "v6e"]
    for e in summary["estimates"]:
        assert e["kind"] == "estimated"
        assert e["vmem_bytes"] > 0 and e["hbm_bytes"] > 0 and e["seconds"] > 0
        assert e["bound"] in ("memory", "compute") and 0 < e["roofline_share"] <= 1.0
        # both speedups over XLA, each with its MXU passes: as written (f32 and bf16 references
        # at XLA's default, one pass) and at what the tolerance needs (found by the profile)
        written, needed = e["vs_xla"]["as_written"], e["vs_xla"]["tolerance"]
        assert (written["baseline"], written["passes"]) == ("as-written", 1)
        assert needed["baseline"] == "tolerance" and needed["passes"] in (1, 3)
        assert written["basis"] == needed["basis"] == "estimated"
        assert written["where"] == needed["where"] == e["target"] and needed["speedup"] > 0
    for cost in summary["reference_costs"].values():
        assert cost["kind"] == "estimated" and cost["flops"] > 0
    assert (
        summary["trace"]["kind"] == "host-side trace of a CPU interpret-mode run, not device time"
    )
    assert any(tmp_path.joinpath("traces").rglob("*.xplane.pb"))  # kept for xprof


@pytest.mark.slow  # worker processes: jax, TPU compiles
def test_profile_text_for_agents_and_people(tmp_path):
    text = cli(
        "profile", str(KERNELS / "honest" / "12p_RMSNorm.py"), "--task", "12p", cache=tmp_path
    ).stdout
    assert (
        "v5e (estimated):" in text
        and "memory-bound" in text
        and "% of roofline (estimated)" in text
    )
    # RMSNorm has no matmul: XLA needs no more than its one pass for the tolerance
    assert "XLA@1-pass (tolerance) · " in text and "XLA@1-pass (as written) (est., v5e)" in text
    assert "open it: xprof --logdir" in text and "ssh -L 8791:localhost:8791" in text


def test_profile_refuses_a_kernel_that_breaks_the_static_rules(tmp_path):
    done = cli(
        "profile",
        str(KERNELS / "cheats" / "cached_results.py"),
        "--task",
        "12p",
        cache=tmp_path,
        check=False,
    )
    assert done.returncode == 1
    assert "breaks the static rules: branches on the platform it runs on" in done.stderr
    assert "calls back into Python from device code" in done.stderr
