"""The one walk over a jaxpr (perf/jaxpr_walk.py): the pallas_calls of a program through calls,
conds and scans, with how often each runs and the branches it sits under, and a kernel body's
equations with the multipliers of its loops and the branches of its `pl.when`s."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from maxkernel_tui.kernels.perf.jaxpr_walk import pallas_calls, walk
from maxkernel_tui.kernels.perf.primitive_names import (
    AXIS_REDUCTIONS,
    CUMULATIVE_REDUCTIONS,
    REDUCTIONS,
)

X = jax.ShapeDtypeStruct((8, 128), jnp.float32)


def _copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def _double(x):
    return pl.pallas_call(_copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def _square_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * x_ref[...]


def _square(x):
    return pl.pallas_call(_square_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def test_a_pallas_call_in_a_scan_of_three_inside_a_cond_runs_three_times_conditionally():
    def program(x):
        def looped(x):
            return jax.lax.scan(lambda c, _: (_double(c), None), x, None, length=3)[0]

        return jax.lax.cond(x.sum() > 0, looped, lambda x: x, x)

    (site,) = pallas_calls(jax.make_jaxpr(jax.jit(program))(X).jaxpr)
    assert site.times == 3
    assert site.exact
    assert site.conditional and len(site.branches) == 1
    # the cond's true branch is its second (branches are ordered by index: false first)
    assert site.branches[0][1] == 1
    assert site.within[0] in ("jit", "pjit") and site.within[1:] == ("cond", "scan")


def test_under_a_while_loop_the_count_is_not_exact():
    def program(x):
        return jax.lax.while_loop(lambda c: c.sum() < 100.0, _double, x)

    (site,) = pallas_calls(jax.make_jaxpr(program)(X).jaxpr)
    assert site.times == 1 and not site.exact and not site.conditional


def test_two_pallas_calls_come_in_program_order_unconditional_and_once():
    def program(x):
        return _square(_double(x) + 1.0)

    sites = pallas_calls(jax.make_jaxpr(program)(X).jaxpr)
    kernels = [site.eqn.params["jaxpr"].debug_info.func_name for site in sites]
    assert kernels == ["_copy_kernel", "_square_kernel"]
    assert [(s.times, s.conditional, s.within) for s in sites] == [(1, False, ())] * 2


def _looping_kernel(x_ref, w_ref, o_ref):
    def step(i, acc):
        return acc + jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    total = jax.lax.fori_loop(0, 4, step, jnp.zeros(o_ref.shape, jnp.float32))

    @pl.when(pl.program_id(0) == 0)
    def _first():
        o_ref[...] = jnp.exp(total)

    @pl.when(pl.program_id(0) != 0)
    def _rest():
        o_ref[...] = total


def test_a_kernel_body_walk_multiplies_fori_loops_and_marks_pl_when_branches():
    def program(x, w):
        return pl.pallas_call(
            _looping_kernel,
            grid=(2,),
            in_specs=[
                pl.BlockSpec((8, 128), lambda i: (0, 0)),
                pl.BlockSpec((128, 128), lambda i: (0, 0)),
            ],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
        )(x, w)

    w = jax.ShapeDtypeStruct((128, 128), jnp.float32)
    (call,) = pallas_calls(jax.make_jaxpr(program)(X, w).jaxpr)
    body = list(walk(call.eqn.params["jaxpr"]))
    (dot,) = [s for s in body if s.name == "dot_general"]
    assert dot.times == 4 and not dot.conditional  # a static fori_loop is a scan of 4
    (exp,) = [s for s in body if s.name == "exp"]
    assert exp.times == 1 and exp.conditional
    conds = [s for s in body if s.name == "cond"]
    assert len(conds) == 2
    # the exp sits in one branch of the first pl.when, and nothing of the second's
    assert exp.branches[0][0] == conds[0].number
    assert all(s.branches[0][0] == conds[1].number for s in body if s.number > conds[1].number)
    # the walk numbers every equation once, depth first
    assert [s.number for s in body] == list(range(len(body)))


def test_the_reductions_vocabulary_holds_its_kinds():
    assert AXIS_REDUCTIONS | CUMULATIVE_REDUCTIONS <= REDUCTIONS
    assert {"reduce_sum", "argmax", "reduce_or", "cumsum", "sort", "top_k"} <= REDUCTIONS
    assert not AXIS_REDUCTIONS & CUMULATIVE_REDUCTIONS
