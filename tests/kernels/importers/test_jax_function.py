"""The JAX-function importer and the registry, statically (nothing is run): what --args and a
file's get_inputs() become, tolerances by dtype, and clear refusals."""

import ast
import re
from pathlib import Path

import pytest

from maxkernel_tui.kernels.derive.plan import plan_derivation
from maxkernel_tui.kernels.importers import ImportOptions, PlainTaskSource
from maxkernel_tui.kernels.importers.jax_function import JaxFunctionImporter, parse_args
from maxkernel_tui.kernels.importers.registry import detecting, offline_importers
from maxkernel_tui.kernels.importers.writer import write_task
from maxkernel_tui.kernels.task import TaskImportError
from tests.support.paths import KERNELBENCH

SOURCE = """import jax
import jax.numpy as jnp


def rms_norm(x, scale, eps):
    r = jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps)
    return x * r * scale


def other(x):
    return x
"""

WITH_INPUTS = """import jax
import jax.numpy as jnp


def scaled(x, w):
    return jnp.tanh(x @ w)


def get_inputs(dtype=jnp.float32):
    rows = 4096
    depth = 1024
    x = jax.random.normal(jax.random.key(0), (rows, depth), dtype=dtype)
    w = jax.random.normal(jax.random.key(1), (depth, depth), dtype=dtype)
    return [x, w], []
"""


def _translate(source: str, **options: object) -> PlainTaskSource:
    return JaxFunctionImporter().translate(Path("mine.py"), source, ImportOptions(**options))


def test_args_become_a_plain_get_inputs_whose_sizes_derive():
    plain = _translate(
        SOURCE, function="rms_norm", args="bf16[8,4096,8192] bf16[8192]", static=("1e-5",)
    )
    # each axis of each array is named by its place, not its value
    assert "    x0_1 = 4096" in plain.reference_py and "    x1_0 = 8192" in plain.reference_py
    assert "computation = rms_norm" in plain.reference_py
    assert "return [x0, x1], [1e-05]" in plain.reference_py
    derivation = plan_derivation(ast.parse(plain.reference_py), "get_inputs")
    # 8x2048x2048 is over the check budget of a tensor: the leading size halves to fit; the
    # two 8192s (x's last axis, the scale) are equal, so they stay equal
    assert derivation.sizes["check"] == {"x0_0": 2, "x0_1": 2048, "x0_2": 2048, "x1_0": 2048}
    assert (plain.atol, plain.rtol) == (1e-2, 1e-2)
    assert (
        "the default for 16-bit float inputs" in plain.tolerance_note and plain.calibrate_tolerance
    )


def test_a_get_inputs_in_the_file_is_used_and_f32_gets_maxkernels_default():
    plain = _translate(WITH_INPUTS)
    assert "computation = scaled" in plain.reference_py and (plain.atol, plain.rtol) == (1e-3, 1e-3)
    given = _translate(WITH_INPUTS, tolerance=(1e-4, 2e-4))
    assert (given.atol, given.rtol) == (1e-4, 2e-4) and "(given)" in given.tolerance_note
    assert not given.calibrate_tolerance and not plain.calibrate_tolerance


@pytest.mark.parametrize(
    ("source", "options", "message"),
    [
        (SOURCE, {"args": "f32[8]"}, "say which function with --function (found rms_norm, other)"),
        (SOURCE, {"function": "nope", "args": "f32[8]"}, "no top-level function 'nope'"),
        (SOURCE, {"function": "other"}, "no get_inputs() in the file: say the inputs with --args"),
        (SOURCE, {"function": "other", "args": "f64[8]"}, "is not DTYPE[D0,D1,...]"),
        (SOURCE, {"function": "other", "args": "f32[0]"}, "has a size that is not positive"),
        (
            SOURCE,
            {"function": "other", "args": "f32[8]", "static": ("x+1",)},
            "not a Python literal",
        ),
        (WITH_INPUTS, {"static": ("1",)}, "--static applies to --args"),
    ],
)
def test_bad_input_gets_a_clear_error(source, options, message):
    with pytest.raises(TaskImportError, match=re.escape(message)):
        _translate(source, **options)


def test_parse_args_reads_each_dtype_and_shape():
    specs = parse_args("bf16[8,4096] f32[] i32[3, 5]")
    assert [(s.dtype, s.shape) for s in specs] == [
        ("bf16", (8, 4096)),
        ("f32", ()),
        ("i32", (3, 5)),
    ]


def test_the_offline_importers_tell_a_pytorch_module_from_a_jax_function():
    found = offline_importers()
    assert [i.kind for i in detecting(Path("a.py"), SOURCE, found)] == ["jax-function"]
    module = (KERNELBENCH / "gemm_relu_divide.py").read_text()
    kinds = [i.kind for i in detecting(KERNELBENCH / "gemm_relu_divide.py", module, found)]
    assert kinds == ["pytorch-module"]
    with pytest.raises(TaskImportError, match="not a source kind tasks import knows"):
        detecting(Path("a.txt"), "hello", found)


def test_the_writer_refuses_to_overwrite_without_force(tmp_path):
    out = tmp_path / "task"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    plain = _translate(WITH_INPUTS)
    with pytest.raises(TaskImportError, match="exists: pass --force"):
        write_task(plain, out, kind="jax-function")
    assert (out / "keep.txt").read_text() == "mine"


def test_the_writer_refuses_a_source_whose_sizes_cannot_be_derived(tmp_path):
    plain = _translate(SOURCE, function="other", args="f32[3]")
    with pytest.raises(TaskImportError, match="heldout equals check"):
        write_task(plain, tmp_path / "task", kind="jax-function")
    assert not (tmp_path / "task").exists()
