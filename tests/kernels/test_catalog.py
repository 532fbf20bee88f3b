"""Task descriptions come from isolated worker processes and are cached by content."""

import shutil
import textwrap

import pytest

from maxkernel_tui.kernels.catalog import describe_tasks
from maxkernel_tui.kernels.description import TensorSpec
from maxkernel_tui.kernels.loader import load_task, load_tasks
from tests.support.paths import ADAPTED_TASKS

pytestmark = pytest.mark.slow  # describe workers (jax processes) and TPU compiles


def make_task(root, name, reference):
    folder = root / name
    folder.mkdir()
    (folder / "kernel_task.yaml").write_text(f"task_id: {name}\ndescription: test task\n")
    (folder / "reference.py").write_text(textwrap.dedent(reference))
    return load_task(folder)


GOOD = """
    import jax.numpy as jnp

    def get_inputs():
        return (jnp.ones((256, 512), jnp.bfloat16),), ()

    def computation(x):
        return x @ x.T
"""

GOOD_FLAT = textwrap.dedent(GOOD)


def test_describes_shapes_and_xla_cost_of_adapted_tasks(tmp_path):
    tasks, _ = load_tasks(ADAPTED_TASKS)
    described = describe_tasks(tasks, tmp_path, with_cost=True)
    add = described["1_Vector_Add"]
    assert add.configs["bench"].to_json() == {
        "inputs": [{"shape": [4096], "dtype": "float32"}] * 2,
        "static": [2.0],
        "outputs": [{"shape": [4096], "dtype": "float32"}],
    }
    assert add.cost.target == "v5e" and add.cost.did_not_fit == []
    # (a + b) * 2 on 4096 floats: 2 flops per element, 3 arrays of 16 KiB moved.
    assert add.cost.flops == 2 * 4096
    assert add.cost.bytes_accessed == 3 * 4096 * 4
    multi = described["2_Softmax_Multi"]
    assert list(multi.configs) == ["bench.0", "bench.1"]
    assert multi.configs["bench.1"].outputs == [TensorSpec([64, 512], "bfloat16")]


def test_cache_is_reused_and_invalidated_by_edits(tmp_path):
    task = make_task(tmp_path, "mm", GOOD)
    computed = []
    first = describe_tasks([task], tmp_path / "cache", on_progress=lambda t, a: computed.append(t))
    again = describe_tasks([task], tmp_path / "cache", on_progress=lambda t, a: computed.append(t))
    assert computed == ["mm"] and first == again
    assert first["mm"].cost.flops == 2 * 256 * 256 * 512

    task.reference_path.write_text(textwrap.dedent(GOOD).replace("(256, 512)", "(128, 512)"))
    edited = describe_tasks([task], tmp_path / "cache", on_progress=lambda t, a: computed.append(t))
    assert computed == ["mm", "mm"]
    assert edited["mm"].configs["bench"].outputs[0].shape == [128, 128]


def test_crashing_and_hanging_tasks_are_reported_and_the_rest_go_on(tmp_path):
    crash = make_task(
        tmp_path, "crash", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n" + GOOD_FLAT
    )
    hang = make_task(tmp_path, "hang", "while True:\n    pass\n" + GOOD_FLAT)
    good = make_task(tmp_path, "good", GOOD)
    described = describe_tasks(
        [crash, hang, good], tmp_path / "cache", with_cost=False, workers=1, timeout=5
    )
    assert "worker died (killed by SIGSEGV)" in described["crash"].error
    assert "timed out after 5 s" in described["hang"].error
    assert described["good"].configs["bench"].outputs[0].shape == [256, 256]


def test_task_code_never_sees_credentials(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "secret-key")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/secret.json")
    leaky = make_task(
        tmp_path,
        "leaky",
        "import os\n"
        "assert not [k for k in os.environ if 'KEY' in k or 'CREDENTIALS' in k], "
        "sorted(os.environ)\n" + GOOD_FLAT,
    )
    described = describe_tasks([leaky], tmp_path / "cache", with_cost=False)
    assert described["leaky"].error is None, described["leaky"]


def test_a_reference_too_large_for_v5e_moves_to_a_larger_generation(tmp_path):
    big = make_task(
        tmp_path,
        "big",
        """
        import jax.numpy as jnp

        def get_inputs():
            return (jnp.zeros((5, 1024, 1024, 1024), jnp.bfloat16),), ()

        def computation(x):
            return x * 2
    """,
    )
    cost = describe_tasks([big], tmp_path / "cache")["big"].cost
    assert cost.target == "v6e"
    assert cost.did_not_fit[0].target == "v5e"
    assert "exceeds available HBM" in cost.did_not_fit[0].reason


def test_a_task_error_reaches_the_caller_as_a_description_error(tmp_path):
    shutil.copytree(ADAPTED_TASKS / "1_Vector_Add", tmp_path / "bad")
    (tmp_path / "bad" / "reference.py").write_text(
        "def get_inputs():\n    return 1\n\ndef computation(x):\n    return x\n"
    )
    described = describe_tasks([load_task(tmp_path / "bad")], tmp_path / "cache")
    assert "must return (dynamic_args, static_args)" in described["1_Vector_Add"].error
    assert str(tmp_path / "bad" / "reference.py") in described["1_Vector_Add"].error
