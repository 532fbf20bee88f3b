"""Runs the knowledge pack's claims against the installed jax, in a process of its own.

Read from stdin: {"examples": {name: source}, "errors": [id, ...]}. Written to stdout: one JSON
object {"examples": {name: "ok" | problem}, "errors": {id: [lines of each trigger's message]}}.

Each complete example must match a plain-jnp reference in TPU interpret mode (uninitialised
memory NaN, out-of-bounds reads raise) and compile for TPU v5e with libtpu. Each error trigger is
a small wrong kernel whose first error line the errors topic quotes. Run with JAX_PLATFORMS=cpu.
"""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental import topologies
from jax.experimental.pallas import tpu as pltpu
from jax.sharding import Mesh, NamedSharding, PartitionSpec


def _random(seed: int, shape: tuple[int, ...], dtype: Any = jnp.bfloat16) -> jax.Array:
    return jax.random.normal(jax.random.key(seed), shape, jnp.float32).astype(dtype)


# -- references for the complete examples: name -> (inputs, static args, reference, tolerance) --


def _matmul_case() -> tuple:
    x, w = _random(0, (256, 1024)), _random(1, (1024, 384))

    def reference(x, w):
        return jnp.dot(x, w, preferred_element_type=jnp.float32).astype(x.dtype)

    return (x, w), (), reference, 2e-2


def _rmsnorm_case() -> tuple:
    x, scale = (
        _random(2, (2, 64, 512)),
        (_random(3, (512,), jnp.float32) * 0.1 + 1).astype(jnp.bfloat16),
    )

    def reference(x, scale, eps):
        x32 = x.astype(jnp.float32)
        normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
        return normed.astype(x.dtype) * scale

    return (x, scale), (1e-5,), reference, 2e-2


def _page_gather_case() -> tuple:
    pages, table = _random(4, (16, 16, 128)), jnp.array([3, 0, 15, 7, 7, 1], jnp.int32)

    def reference(pages, table):
        return pages[table].reshape(-1, pages.shape[-1])

    return (pages, table), (), reference, 0.0


def _colsum_case() -> tuple:
    x = _random(5, (512, 256), jnp.float32)
    return (x,), (), lambda x: jnp.sum(x, axis=0), 1e-4


def _flash_attention_case() -> tuple:
    q, k, v = (_random(6 + i, (1, 2, 1024, 128)) for i in range(3))

    def reference(q, k, v):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k, preferred_element_type=jnp.float32) / np.sqrt(
            q.shape[-1]
        )
        causal = jnp.tril(jnp.ones(s.shape[-2:], bool))
        p = jax.nn.softmax(jnp.where(causal, s, -jnp.inf), axis=-1)
        return jnp.einsum("bhqk,bhkd->bhqd", p, v.astype(jnp.float32)).astype(q.dtype)

    return (q, k, v), (), reference, 2e-2


def _silu_case() -> tuple:
    x = _random(10, (512, 256))
    return (x,), (), lambda x: jax.nn.silu(x.astype(jnp.float32)).astype(x.dtype), 2e-2


EXAMPLES: dict[str, Callable[[], tuple]] = {
    "matmul": _matmul_case,
    "rmsnorm": _rmsnorm_case,
    "page_gather": _page_gather_case,
    "colsum_dma": _colsum_case,
    "flash_attention": _flash_attention_case,
    "silu_training": _silu_case,
}


def _compile_v5e(fn: Callable, args: tuple) -> None:
    devices = topologies.get_topology_desc("v5e:2x2", "tpu").devices
    sharding = NamedSharding(Mesh(devices[:1], ("x",)), PartitionSpec())
    structs = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding) for a in args]
    jax.jit(fn).lower(*structs).compile()


def check_example(name: str, source: str) -> str:
    if name not in EXAMPLES:
        return f"the probe has no reference for example {name!r}"
    module = types.ModuleType(f"knowledge_example_{name}")
    exec(compile(source, f"<example {name}>", "exec"), module.__dict__)
    dynamic, static, reference, tolerance = EXAMPLES[name]()

    def run(*d: jax.Array) -> jax.Array:
        return module.computation(*d, *static)

    params = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
    try:
        with pltpu.force_tpu_interpret_mode(params):
            got = jax.block_until_ready(jax.jit(run)(*dynamic))
    except Exception as error:
        pltpu.reset_tpu_interpret_mode_state()
        return f"interpret mode: {_first_line(error)}"
    want = reference(*dynamic, *static)
    if got.shape != want.shape:
        return f"shape {got.shape} != reference {want.shape}"
    got32, want32 = np.asarray(got, np.float32), np.asarray(want, np.float32)
    if not np.allclose(got32, want32, atol=tolerance, rtol=tolerance):
        return f"numerics: max |diff| {np.max(np.abs(got32 - want32)):.3g} > {tolerance}"
    try:
        _compile_v5e(run, dynamic)
    except Exception as error:
        return f"TPU v5e compile: {_first_line(error)}"
    return "ok"


# -- error triggers: id -> a function that raises the error the errors topic quotes --


def _lower(fn: Callable, *args: Any) -> None:
    jax.jit(fn).trace(*args).lower(lowering_platforms=("tpu",))


def _copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def _compile_v5e_error(fn: Callable, *args: Any) -> None:
    _compile_v5e(fn, args)


def _grid_copy(
    x: jax.Array, block: tuple, index_map: Callable, grid: tuple, **kwargs: Any
) -> Callable:
    return pl.pallas_call(
        _copy_kernel,
        out_shape=x,
        grid=grid,
        in_specs=[pl.BlockSpec(block, index_map)],
        out_specs=pl.BlockSpec(block, index_map),
        **kwargs,
    )


def _block_not_aligned() -> None:
    x = jnp.zeros((256, 256), jnp.float32)
    _lower(_grid_copy(x, (64, 100), lambda i: (i, 0), (4,)), x)


def _block_rank() -> None:
    x = jnp.zeros((256, 256), jnp.float32)
    call = pl.pallas_call(
        _copy_kernel,
        out_shape=x,
        grid=(2,),
        in_specs=[pl.BlockSpec((128,), lambda i: (i,))],
        out_specs=pl.BlockSpec((128, 256), lambda i: (i, 0)),
    )
    _lower(call, x)


def _index_map_arity() -> None:
    x = jnp.zeros((256, 256), jnp.float32)
    call = pl.pallas_call(
        _copy_kernel,
        out_shape=x,
        grid=(2, 2),
        in_specs=[pl.BlockSpec((128, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((128, 128), lambda i, j: (i, j)),
    )
    _lower(call, x)


def _index_map_results() -> None:
    x = jnp.zeros((256, 256), jnp.float32)
    call = pl.pallas_call(
        _copy_kernel,
        out_shape=x,
        grid=(2,),
        in_specs=[pl.BlockSpec((128, 256), lambda i: (i,))],
        out_specs=pl.BlockSpec((128, 256), lambda i: (i, 0)),
    )
    _lower(call, x)


def _semantics_length() -> None:
    x = jnp.zeros((256, 256), jnp.float32)
    params = pltpu.CompilerParams(dimension_semantics=("parallel",))
    _lower(_grid_copy(x, (128, 128), lambda i, j: (i, j), (2, 2), compiler_params=params), x)


def _kernel_arity() -> None:
    x = jnp.zeros((8, 128), jnp.float32)

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...]

    _lower(pl.pallas_call(kernel, out_shape=x), x)


def _store_dtype() -> None:
    x = jnp.zeros((8, 128), jnp.float32)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...].astype(jnp.bfloat16)

    _lower(pl.pallas_call(kernel, out_shape=x), x)


def _python_if() -> None:
    x = jnp.zeros((8, 128), jnp.float32)

    def kernel(x_ref, o_ref):
        if pl.program_id(0) == 0:
            o_ref[...] = x_ref[...]

    call = pl.pallas_call(
        kernel,
        out_shape=x,
        grid=(1,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
    )
    _lower(call, x)


def _unimplemented() -> None:
    x = jnp.zeros((8, 128), jnp.float32)

    def kernel(x_ref, o_ref):
        o_ref[...] = jax.lax.cumsum(x_ref[...], axis=1)

    _lower(pl.pallas_call(kernel, out_shape=x), x)


def _smem_vector() -> None:
    x = jnp.zeros((8, 128), jnp.float32)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    _lower(pl.pallas_call(kernel, out_shape=x, in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)]), x)


def _any_load() -> None:
    x = jnp.zeros((8, 128), jnp.float32)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    _lower(pl.pallas_call(kernel, out_shape=x, in_specs=[pl.BlockSpec(memory_space=pl.ANY)]), x)


def _scoped_vmem() -> None:
    rows = 5 * 1024 * 1024 // (4 * 1024)  # 5 MiB blocks, 4 of them: 20 MiB > v5e's 16 MiB
    x = jnp.zeros((rows * 4, 1024), jnp.float32)
    _compile_v5e_error(_grid_copy(x, (rows, 1024), lambda i: (i, 0), (4,)), x)


def _physical_vmem() -> None:
    x = jnp.zeros((8, 1024), jnp.float32)

    def kernel(x_ref, o_ref, scratch_ref):
        scratch_ref[0:8, :] = x_ref[...]
        o_ref[...] = scratch_ref[0:8, :]

    rows = 130 * 1024 * 1024 // (4 * 1024)  # a 130 MiB scratch on a 128 MiB VMEM
    call = pl.pallas_call(
        kernel, out_shape=x, scratch_shapes=[pltpu.VMEM((rows, 1024), jnp.float32)]
    )
    _compile_v5e_error(call, x)


def _int8_rows() -> None:
    x = jnp.zeros((64, 256), jnp.int8)
    _compile_v5e_error(_grid_copy(x, (8, 256), lambda i: (i, 0), (8,)), x)


def _unaligned_lanes() -> None:
    x = jnp.zeros((8, 256), jnp.float32)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[:, pl.ds(pl.program_id(0) * 3, 128)]

    call = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        grid=(1,),
        in_specs=[pl.BlockSpec((8, 256), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
    )
    _compile_v5e_error(call, x)


def _floor_divide() -> None:
    x = jnp.zeros((512, 128), jnp.float32)
    _compile_v5e_error(_grid_copy(x, (128, 128), lambda i: (i // 1, 0), (4,)), x)


def _emit_pipeline() -> None:
    def outer(x_hbm, o_hbm):
        def inner(x_ref, o_ref):
            o_ref[...] = x_ref[...] * 2

        spec = pl.BlockSpec((256, 128), lambda i: (i, 0))
        pltpu.emit_pipeline(inner, grid=(2,), in_specs=[spec], out_specs=[spec])(x_hbm, o_hbm)

    x = jnp.zeros((512, 128), jnp.float32)
    any_spec = pl.BlockSpec(memory_space=pl.ANY)
    _compile_v5e_error(
        pl.pallas_call(outer, out_shape=x, in_specs=[any_spec], out_specs=any_spec), x
    )


def _buffer_count() -> None:
    x = jnp.zeros((512, 128), jnp.float32)
    call = pl.pallas_call(
        _copy_kernel,
        out_shape=x,
        grid=(4,),
        in_specs=[pl.BlockSpec((128, 128), lambda i: (i, 0), pipeline_mode=pl.Buffered(3))],
        out_specs=pl.BlockSpec((128, 128), lambda i: (i, 0)),
    )
    _lower(call, x)


def _out_of_bounds() -> None:
    x = jnp.zeros((256, 128), jnp.float32)

    def computation(x):
        return _grid_copy(x, (128, 128), lambda i: (i + 1, 0), (2,))(x)

    with pltpu.force_tpu_interpret_mode(pltpu.InterpretParams(out_of_bounds_reads="raise")):
        jax.block_until_ready(jax.jit(computation)(x))


# Some messages have more than one cause; the errors topic names each, and each must still raise it.
ERRORS: dict[str, tuple[Callable[[], None], ...]] = {
    "block-not-aligned": (_block_not_aligned,),
    "block-rank": (_block_rank,),
    "index-map-arity": (_index_map_arity,),
    "index-map-results": (_index_map_results,),
    "semantics-length": (_semantics_length,),
    "kernel-arity": (_kernel_arity,),
    "store-dtype": (_store_dtype,),
    "python-if": (_python_if,),
    "unimplemented": (_unimplemented,),
    "smem-vector": (_smem_vector,),
    "any-load": (_any_load,),
    "scoped-vmem": (_scoped_vmem,),
    "physical-vmem": (_physical_vmem,),
    "int8-rows": (_int8_rows,),
    "unaligned-lanes": (_unaligned_lanes,),
    "device-kind": (_floor_divide, _emit_pipeline),
    "buffer-count": (_buffer_count,),
    "out-of-bounds": (_out_of_bounds,),
}


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def check_error(error_id: str) -> list[list[str]]:
    """The message of each trigger of `error_id`, as a list of its lines ([] when it raised
    nothing); the test looks for the quoted line among them."""
    if error_id not in ERRORS:
        return [[f"the probe has no trigger for error {error_id!r}"]]
    messages = []
    for trigger in ERRORS[error_id]:
        try:
            trigger()
        except Exception as error:
            pltpu.reset_tpu_interpret_mode_state()
            messages.append(str(error).strip().splitlines() or [type(error).__name__])
        else:
            messages.append([])
    return messages


def main() -> None:
    request = json.load(sys.stdin)
    answer = {
        "examples": {
            name: check_example(name, source) for name, source in request["examples"].items()
        },
        "errors": {error_id: check_error(error_id) for error_id in request["errors"]},
    }
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
