"""The Ray executor against real clusters on 127.0.0.1, started with Ray's own CLI: one of two
nodes with token authentication, one of a single node without it. A beam search with the
built-in agent spreads its evaluations over both nodes and writes a best kernel that `eval`
accepts; a canary credential of the driver reaches no node; a cluster without token auth is
refused with the reason; killing one node's raylet mid-search still ends with every search node
judged or marked and no evaluation stored twice. The clusters are stopped by the process groups
this module started (never `ray stop`)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray")

from maxkernel_tui.kernels.executors.cli_cluster import CliCluster
from maxkernel_tui.store.db import Store
from tests.support.waiting import wait_for

# two Ray clusters and real harnesses on their nodes; `-m "not ray"` leaves them out
pytestmark = [pytest.mark.slow, pytest.mark.ray]

TASK = Path(__file__).parents[2] / "data" / "ray_tasks" / "1r_Scaled_Add"
CANARY = "mkt-canary-5f1c0e29d4b7"
# A lost node is noticed in about a second and a half rather than Ray's default fifteen.
FAST_HEALTH = json.dumps({"health_check_period_ms": 500, "health_check_failure_threshold": 3})


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if "KEY" not in k and "TOKEN" not in k}


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    where = Path(tempfile.mkdtemp(prefix="mkray-", dir="/tmp"))  # short: Ray's socket paths
    yield where
    shutil.rmtree(where, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(root: Path) -> Iterator[CliCluster]:
    """Two nodes with token auth; stopped by the process groups it started."""
    with CliCluster(root / "a", nodes=2, system_config=FAST_HEALTH) as started:
        yield started


@pytest.fixture
def open_cluster(root: Path) -> Iterator[CliCluster]:
    """One node without token auth."""
    base = CliCluster(root / "b", nodes=1, auth=False)
    try:
        yield base.start(_base_env())
    finally:
        base.stop()


def _cli_env(cluster: CliCluster, tmp_path: Path, suite_cache: Path) -> dict[str, str]:
    env = _base_env()
    env.update(cluster.driver_env())
    env.update(
        MAXKERNEL_TUI_DATA_DIR=str(tmp_path / "data"),
        MAXKERNEL_TUI_CACHE_DIR=str(suite_cache),
        MAXKERNEL_TUI_CONFIG=str(tmp_path / "none.toml"),
        JAX_PLATFORMS="cpu",
        MKT_TEST_API_TOKEN=CANARY,  # a credential of the driver's: no node may see it
    )
    return env


def _search(cluster: CliCluster, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "maxkernel_tui.cli",
        "search",
        "--task",
        str(TASK),
        "--algorithm",
        "beam",
        "--width",
        "2",
        "--branches",
        "2",
        "--depth",
        "1",
        "--provider",
        "builtin",
        # the task's seed is at its roofline plus dispatch: expanded all the same (a floor above 1)
        "--headroom-floor",
        "2",
        "--ray",
        cluster.address,
        "--json",
        *extra,
    ]


def _events(stdout: str, kind: str) -> list[dict]:
    return [e for line in stdout.splitlines() if (e := json.loads(line))["kind"] == kind]


def _no_duplicate_evaluations(data_dir: Path) -> None:
    """Each evaluation step stored once, and each kernel version evaluated once."""
    with Store(data_dir / "sessions.db") as store:
        session = store.list_sessions()[0].session
        stored = [e.payload for e in store.events(session.id) if e.kind == "evaluation"]
        per_version = {p["version_id"]: len(store.evaluations(p["version_id"])) for p in stored}
    refs = [p["ref"] for p in stored]
    assert refs and len(refs) == len(set(refs)), Counter(refs)
    assert set(per_version.values()) == {1}, per_version


def test_a_beam_search_spreads_over_both_nodes_and_leaks_no_driver_secret(
    cluster, tmp_path, suite_cache
) -> None:
    env = _cli_env(cluster, tmp_path, suite_cache)
    best = tmp_path / "best.py"
    done = subprocess.run(
        _search(cluster, "--out", str(best)), env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    evaluations = _events(done.stdout, "evaluation")
    spread = {e["executor_node"] for e in evaluations}
    assert len(spread) == 2 and "local" not in spread, spread
    assert all(e["report"]["executor_node"] == e["executor_node"] for e in evaluations)
    # the nodes' workers run in the same OS sandbox as local ones
    sandbox = [c for e in evaluations for c in e["report"]["checks"] if c["name"] == "sandbox"]
    assert sandbox and all("ran confined" in c["detail"] for c in sandbox), sandbox
    _no_duplicate_evaluations(tmp_path / "data")
    accepted = subprocess.run(
        [sys.executable, "-m", "maxkernel_tui.cli", "eval", str(best), "--task", str(TASK)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert accepted.returncode == 0, accepted.stdout[-2000:]
    logs = [p for p in (cluster.root / "t").rglob("*") if p.is_file()]
    assert logs, "the cluster wrote no logs to look in"
    leaked = [str(p) for p in logs if CANARY.encode() in p.read_bytes()]
    assert not leaked, leaked
    assert CANARY not in done.stdout and CANARY not in done.stderr


def test_a_node_whose_raylet_is_killed_mid_evaluation_loses_nothing(
    cluster, tmp_path, suite_cache
) -> None:
    """Round 1's two evaluations run one per node; node 1's raylet is killed once both have
    started: its evaluation is retried on node 0 and every search node ends judged."""
    env = _cli_env(cluster, tmp_path, suite_cache)
    raylet = cluster.started[1].raylet_pid()
    assert raylet is not None
    search = subprocess.Popen(
        _search(cluster), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert search.stdout is not None
    events, testing = [], set()
    for line in search.stdout:
        events.append(json.loads(line))
        step = events[-1].get("step", "")
        if events[-1]["kind"] == "step_started" and step.endswith("/implement/test"):
            testing.add(step)
            if len(testing - {"n0/implement/test"}) == 2:  # both of round 1's are in flight
                os.kill(raylet, signal.SIGKILL)
                break
    out, err = search.communicate(timeout=900)
    assert search.returncode == 0, err[-3000:]
    events += [json.loads(line) for line in out.splitlines()]
    wait_for(lambda: cluster.started[1].raylet_pid() is None, 10, what="the raylet is gone")
    round_one = [e for e in events if e["kind"] == "evaluation" and e["step"] != "n0/implement"]
    assert len(round_one) == 2 and len({e["executor_node"] for e in round_one}) == 1, round_one
    final = {e["node"]: e["status"] for e in events if e["kind"] == "search_node"}
    assert len(final) == 3 and set(final.values()) <= {"accepted", "rejected", "merged"}, final
    _no_duplicate_evaluations(tmp_path / "data")


def test_a_cluster_without_token_auth_is_refused_with_the_reason(
    open_cluster, tmp_path, suite_cache
) -> None:
    env = _cli_env(open_cluster, tmp_path, suite_cache)
    done = subprocess.run(
        _search(open_cluster), env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "without token authentication: refused" in done.stderr
    assert "--ray-insecure" in done.stderr
    assert done.stdout == ""  # refused before a session is stored or any model is called
    with Store(tmp_path / "data" / "sessions.db") as store:
        assert store.list_sessions() == []
