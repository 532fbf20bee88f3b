"""The loop closes on the engineer's own task folders with the cache where a new user has it:
under the home directory (no MAXKERNEL_TUI_CACHE_DIR), which every worker's sandbox refuses,
so the ties describing a derived task traced live where no worker may read them. Through the
real CLI with the built-in agent, on MaxKernel's plain format and JAXBench's native one:
`profile` succeeds; Auto profiles and scores every accepted kernel and ends on its limit, not on
an error; a beam search ends with a scored best. Small limits: these test the loop, not the
agent's tuning. (The compilation cache is the run's shared one, outside the home: speed only.)"""

import json
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.support.cli_runs import command, finished, user_env
from tests.support.paths import KERNELS
from tests.support.task_folders import write_jaxbench_rmsnorm, write_plain

# The CLI, the agent's jax worker and the real harness, sessions of a minute or more each.
pytestmark = [pytest.mark.slow, pytest.mark.heavy]

# JAXBench's `workload(x, scale)`, with the epsilon its CONFIG fixes.
JAXBENCH_RMSNORM_KERNEL = """
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(x_ref, scale_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * scale_ref[...]


def workload(x, scale):
    hidden = x.shape[-1]
    rows = x.size // hidden
    tile = 256 if rows % 256 == 0 else rows
    out = pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((rows, hidden), x.dtype),
        grid=(rows // tile,),
        in_specs=[
            pl.BlockSpec((tile, hidden), lambda i: (i, 0)),
            pl.BlockSpec((1, hidden), lambda i: (0, 0)),
        ],
        out_specs=pl.BlockSpec((tile, hidden), lambda i: (i, 0)),
    )(x.reshape(rows, hidden), scale.reshape(1, hidden))
    return out.reshape(x.shape)
"""


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = finished(command(*args), env, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _folders(tmp_path: Path) -> list[Path]:
    """A plain GEMM whose batch and out_features coincide, and a JAXBench RMSNorm whose
    sequence and width do: both derived, both traced."""
    return [
        write_plain(tmp_path / "tasks", "41k_Gemm_Add_ReLU"),
        write_jaxbench_rmsnorm(tmp_path / "jaxbench"),
    ]


def _scores(out: str) -> dict[str, float | None]:
    """Each accepted kernel version with the score its profile gave (None: not scored); the
    profiler step follows the evaluations of the kernel it profiles."""
    scores: dict[str, float | None] = {}
    current = None
    for line in out.splitlines():
        if accepted := re.fullmatch(r"  evaluation of (v\d+): ACCEPTED", line):
            current = accepted.group(1)
            scores.setdefault(current, None)
        elif current and (scored := re.match(r"  profile: ([\d.]+) \(estimated speedup", line)):
            scores[current] = float(scored.group(1))
    return scores


def _ties_under_home(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "home" / ".cache" / "maxkernel-tui" / "ties").glob("*.json"))


def test_profile_succeeds_on_plain_and_jaxbench_folders(tmp_path):
    env = user_env(tmp_path, None)
    jaxbench_kernel = tmp_path / "rmsnorm_kernel.py"
    jaxbench_kernel.write_text(textwrap.dedent(JAXBENCH_RMSNORM_KERNEL))
    gemm, rmsnorm = _folders(tmp_path)
    cases = [
        (gemm, KERNELS / "honest" / "41k_Gemm_Add_ReLU.py"),
        (write_plain(tmp_path / "tasks", "12p_RMSNorm"), KERNELS / "honest" / "12p_RMSNorm.py"),
        (rmsnorm, jaxbench_kernel),
    ]
    for folder, kernel in cases:
        done = _cli(env, "profile", str(kernel), "--task", str(folder), "--json")
        summary = json.loads(done.stdout)
        assert summary["estimates"][0]["seconds"] > 0 and summary["kernels"], folder.name
        assert summary["trace"]["config"] == "check", folder.name  # run at the derived shapes
    assert len(_ties_under_home(tmp_path)) == 2  # the two coinciding tasks were traced


@pytest.mark.parametrize("which", [0, 1], ids=["plain", "jaxbench"])
def test_auto_profiles_and_scores_every_accepted_kernel(tmp_path, which):
    env = user_env(tmp_path, None)
    folder = _folders(tmp_path)[which]
    run = _cli(
        env,
        *("run", "--task", str(folder), "--mode", "auto", "--provider", "builtin"),
        *("--max-iterations", "2", "--tune-candidates", "0"),
    )
    out = run.stdout
    scores = _scores(out)
    assert scores and all(s is not None and s > 0 for s in scores.values()), (scores, out[-3000:])
    ended = re.search(r"^session ended: (.*)$", out, re.M)
    assert ended is not None and ended.group(1).startswith("max iterations"), out[-3000:]
    assert re.search(r"best kernel v\d+, [\d.]+ \(estimated speedup", ended.group(1))
    assert _ties_under_home(tmp_path)


@pytest.mark.parametrize("which", [0, 1], ids=["plain", "jaxbench"])
def test_a_beam_search_ends_with_a_scored_best(tmp_path, which):
    env = user_env(tmp_path, None)
    folder = _folders(tmp_path)[which]
    search = _cli(
        env,
        *("search", "--task", str(folder), "--algorithm", "beam", "--provider", "builtin"),
        *("--width", "1", "--depth", "1", "--branches", "1", "--max-evals", "3"),
    )
    text = search.stdout + search.stderr
    assert "no score yet" not in text and "score: none" not in text, text[-3000:]
    best = re.search(r"^best: #\d+ \(kernel v\d+\) .*, ([\d.]+) \(estimated speedup", text, re.M)
    assert best is not None and float(best.group(1)) > 0, text[-3000:]
    nodes = re.findall(r"^◆ node #\d+ accepted (\S+)", text, re.M)
    assert nodes and all(score.endswith("×") for score in nodes), nodes
