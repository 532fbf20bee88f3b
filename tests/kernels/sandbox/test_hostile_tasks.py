"""A hostile task folder against the other tasks evaluated or described beside it: its
reference's module patches `jax.numpy` for every later importer, and plants files in the
compilation cache where other tasks' evaluations would load them. Each task's code runs in a
process of its own, writing only its own part of the cache (evaluation/reference/processes.py,
workers.run_requests), so an honest task's verdict or description cannot be bought by another
folder. The patch attack is also run with the reference processes shared, to show it is real:
there the wrong kernel is accepted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from maxkernel_tui.kernels.catalog import describe_tasks
from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.reference.processes import ReferenceWorkers
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.snapshot import folder_digest
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.kernels.workers import (
    LineWorker,
    jax_worker_env,
    python_module_argv,
    sandbox_policy,
)
from tests.support import hostile_kernels as hostile

pytestmark = pytest.mark.slow  # candidate and reference jax worker processes

QUICK = EvalOptions(seeds=1, timeout=120)

# The sandbox tests' small task (rows x 128 float32 at three sizes), with other computations
# and module-level code after its imports.
_IMPORTS = "import jax.numpy as jnp\n"
_COMPUTATION = "return x * 2.0 + 1.0"
assert _IMPORTS in hostile.TASK_REFERENCE and _COMPUTATION in hostile.TASK_REFERENCE


def _reference(computation: str, at_import: str = "") -> str:
    return hostile.TASK_REFERENCE.replace(_IMPORTS, _IMPORTS + at_import, 1).replace(
        _COMPUTATION, computation
    )


VICTIM_REFERENCE = _reference("return jnp.tanh(x) * 2.0")

# At import: tanh becomes the identity for every module imported after it in this process.
PATCHING_REFERENCE = _reference(
    "return x * 2.0", "jnp.tanh = lambda value: value\njax.numpy.tanh = jnp.tanh\n"
)

# At import, where it may write the compilation cache (not in a candidate's process, which only
# reads it): files planted beside its own part, in the victim's part and at the top, and, to
# show the code ran, in its own part. Every error is swallowed: only the sandbox stands in the way.
PLANTING_REFERENCE = _reference(
    "return x * 2.0",
    """

def _plant(path):
    try:
        __import__("o" + "s").makedirs(path, exist_ok=True)
        with open(path + "/planted", "w") as _file:
            _file.write("a compiled program for another task")
    except Exception:
        pass


_environ = __import__("o" + "s").environ
_own = _environ.get("JAX_COMPILATION_CACHE_DIR", "")
if _own and _environ.get("JAX_COMPILATION_CACHE_MAX_SIZE") != "-1":
    _parts = _own.rstrip("/").rsplit("/", 1)[0]
    _plant(_own)
    _plant(_parts)
    _plant(_parts + "/@VICTIM@")
    _plant(_parts.rsplit("/", 1)[0])
""",
)

KERNEL = """
import jax
from jax.experimental import pallas as pl


def _kernel(x_ref, o_ref):
    o_ref[...] = @BODY@


def computation(x):
    return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
"""
HONEST_VICTIM = KERNEL.replace("@BODY@", "jax.numpy.tanh(x_ref[...]) * 2.0")
WRONG_VICTIM = KERNEL.replace("@BODY@", "x_ref[...] * 2.0")  # what the patched reference says


def _task(folder: Path, task_id: str, reference: str) -> Task:
    folder.mkdir(parents=True)
    (folder / "kernel_task.yaml").write_text(f"task_id: {task_id}\natol: 1e-5\nrtol: 1e-5\n")
    (folder / "reference.py").write_text(reference)
    return load_task(folder)


@pytest.fixture
def xla_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "xla"
    monkeypatch.setenv("MAXKERNEL_TUI_XLA_CACHE", str(cache))
    return cache


@pytest.fixture
def victim(tmp_path: Path) -> Task:
    return _task(tmp_path / "victim", "victim_tanh", VICTIM_REFERENCE)


@pytest.fixture
def patching(tmp_path: Path) -> Task:
    return _task(tmp_path / "patching", "hostile_patch", PATCHING_REFERENCE)


@pytest.fixture
def planting(tmp_path: Path, victim: Task) -> Task:
    reference = PLANTING_REFERENCE.replace("@VICTIM@", folder_digest(victim.folder))
    return _task(tmp_path / "planting", "hostile_plant", reference)


@pytest.fixture
def harness() -> Iterator[Harness]:
    with Harness() as fresh:
        yield fresh


def _evaluate(harness: Harness, source: str, task: Task, tmp_path: Path, name: str) -> str:
    kernel = tmp_path / "kernels" / f"{name}.py"
    kernel.parent.mkdir(exist_ok=True)
    kernel.write_text(source)
    report = harness.evaluate(KernelSource.read(kernel), task, QUICK)
    return report.verdict


def test_a_task_cannot_patch_the_reference_of_a_task_evaluated_after_it(
    harness, victim, patching, xla_cache, tmp_path
):
    assert _evaluate(harness, WRONG_VICTIM, patching, tmp_path, "hostile") == "accepted"
    assert _evaluate(harness, WRONG_VICTIM, victim, tmp_path, "wrong") == "rejected"
    assert _evaluate(harness, HONEST_VICTIM, victim, tmp_path, "honest") == "accepted"


def test_the_patch_attack_is_real_where_tasks_share_a_reference_process(
    harness, victim, patching, xla_cache, tmp_path, monkeypatch
):
    shared = ReferenceWorkers.worker
    monkeypatch.setattr(ReferenceWorkers, "worker", lambda self, _digest: shared(self, "one"))
    assert _evaluate(harness, WRONG_VICTIM, patching, tmp_path, "hostile") == "accepted"
    assert _evaluate(harness, WRONG_VICTIM, victim, tmp_path, "wrong") == "accepted"


def test_a_task_writes_only_its_own_part_of_the_compilation_cache(
    harness, victim, planting, xla_cache, tmp_path
):
    _evaluate(harness, HONEST_VICTIM, victim, tmp_path, "honest")
    _evaluate(harness, WRONG_VICTIM, planting, tmp_path, "hostile")
    planted = sorted(p.relative_to(xla_cache) for p in xla_cache.rglob("planted"))
    own = Path("tasks", folder_digest(planting.folder), "planted")
    assert planted == [own]  # it ran, and wrote where it may: nowhere else
    victim_part = xla_cache / "tasks" / folder_digest(victim.folder)
    assert any(victim_part.iterdir()), "the victim's reference cached no compile"


@pytest.fixture
def retyping(tmp_path: Path) -> Task:
    """A task whose module makes tanh return bfloat16 for every later importer."""
    reference = PATCHING_REFERENCE.replace(
        "jnp.tanh = lambda value: value", "jnp.tanh = lambda value: value.astype(jnp.bfloat16)"
    )
    return _task(tmp_path / "patching", "hostile_patch", reference)


def test_a_task_described_first_cannot_change_the_next_ones_description(tmp_path, victim, retyping):
    """One describe worker at a time, the hostile folder first."""
    patching = retyping
    described = describe_tasks([patching, victim], tmp_path / "cache", with_cost=False, workers=1)
    assert described["hostile_patch"].error is None
    outputs = described["victim_tanh"].configs["bench"].outputs
    assert [spec.dtype for spec in outputs] == ["float32"]


def test_the_describe_attack_is_real_in_one_shared_process(tmp_path, victim, retyping):
    worker = LineWorker(
        python_module_argv("maxkernel_tui.kernels.describe", "--no-cost"),
        jax_worker_env(),
        sandbox=sandbox_policy(readable=(tmp_path,)),
    )
    try:
        answers = [worker.ask(str(task.folder), 300) for task in (retyping, victim)]
    finally:
        worker.close()
    assert answers[1]["configs"]["bench"]["outputs"][0]["dtype"] == "bfloat16"
