"""Shared fixtures. jax runs on the CPU in tests unless the caller chose a platform."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Tests compile for TPU in this process while worker processes do too; libtpu refuses a second
# process unless told ("multi-process lockfile").
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
# Evaluations in tests skip the sampled production tiles (production inputs and a cached XLA
# reference at production shape: tens of seconds a task) unless a test asks for them with
# EvalOptions(tile_blocks=...): tests/kernels/evaluation/test_production_verdicts.py does.
os.environ.setdefault("MAXKERNEL_TUI_TILE_BLOCKS", "off")

import fcntl

import pytest

from maxkernel_tui.kernels.catalog import describe_tasks
from maxkernel_tui.kernels.loader import builtin_suite_dir, builtin_training_dir, load_tasks


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with heavy tests first, then those with other slow tests, then the rest, each file
    kept whole and in place within its group: xdist (--dist loadfile) then starts the
    minutes-long files early instead of ending the run on one process while the other idles."""

    def group(item: pytest.Item) -> int:
        if item.get_closest_marker("heavy"):
            return 0
        return 1 if item.get_closest_marker("slow") else 2

    by_file: dict[str, int] = {}
    for item in items:
        file = item.nodeid.split("::")[0]
        by_file[file] = min(by_file.get(file, 2), group(item))
    items.sort(key=lambda item: by_file[item.nodeid.split("::")[0]])  # stable


@pytest.fixture(scope="session")
def suite_tasks():
    tasks, errors = load_tasks(builtin_suite_dir())
    assert errors == []
    return tasks


@pytest.fixture(scope="session")
def training_tasks():
    tasks, errors = load_tasks(builtin_training_dir())
    assert errors == []
    return tasks


@pytest.fixture(scope="session")
def suite_cache(tmp_path_factory):
    """A cache directory private to this test run, shared by its xdist processes (their base
    temp dirs are siblings), so the suite is described once per run, not once per process."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = tmp_path_factory.getbasetemp().parent / "suite-cache"
        shared.mkdir(exist_ok=True)
        return shared
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="session", autouse=True)
def xla_cache(suite_cache):
    """One jax compilation cache for the run's workers (and the CLI processes tests start,
    which inherit it), so a test never reads the user's cache nor one of an earlier run."""
    os.environ["MAXKERNEL_TUI_XLA_CACHE"] = str(suite_cache / "xla")
    return suite_cache / "xla"


@pytest.fixture(scope="session")
def suite_descriptions(suite_tasks, training_tasks, suite_cache):
    """Every built-in task described once per run, in worker processes: shapes of every
    configuration and the reference compiled ahead of time for TPU (v5e first). The lock makes
    a second xdist process wait for the first and then read its cache."""
    with (suite_cache / "describe.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        tasks = suite_tasks + training_tasks  # what `tasks` and the picker list
        return describe_tasks(tasks, suite_cache, with_cost=True, workers=2)
