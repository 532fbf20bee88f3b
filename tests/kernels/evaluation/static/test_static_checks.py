"""Static rules: what would change the verdict's meaning is named with its line; jax's own
idioms and the routes the sandbox contains pass; clean code passes."""

import textwrap

import pytest

from maxkernel_tui.kernels.evaluation.static.checks import broken_rules, static_problems
from maxkernel_tui.kernels.report.reasons import StaticRule
from tests.support.jaxbench_experts import expert_source

CLEAN = """
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

def _kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2

@functools.partial(jax.jit, static_argnums=1)
def computation(x, factor):
    block = getattr(x, "shape")[0]
    return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
"""


def test_clean_kernel_passes():
    assert static_problems(textwrap.dedent(CLEAN)) == []


# What the rules still refuse: what would change the verdict's meaning even though the OS
# contains it (the judge refuses both in the carried program too).
@pytest.mark.parametrize(
    ("snippet", "phrase"),
    [
        ("x = jax.pure_callback(f, y)", "calls back into Python from device code"),
        ("from jax.experimental import io_callback", "calls back into Python from device code"),
        ("jax.debug.callback(f, y)", "calls back into Python from device code"),
        (
            "y = jax.lax.platform_dependent(x, tpu=f, default=g)",
            "branches on the platform it runs on (`.platform_dependent` at line",
        ),
        ("from jax.lax import platform_dependent", "branches on the platform it runs on"),
        ("def computation(:", "does not parse"),
    ],
)
def test_each_refusal_is_named(snippet, phrase):
    source = textwrap.dedent(CLEAN) + "\n" + snippet + "\n"
    problems = static_problems(source)
    assert any(phrase in p for p in problems), problems


# Routes the rules used to refuse: the OS sandbox and the tracer/judge split contain each (shown
# with the rules off in tests/kernels/sandbox/), so none is refused here any more.
CONTAINED_ELSEWHERE = [
    "import time\nt = time.perf_counter()",
    "import os\nk = os.environ.get('GEMINI_API_KEY')",
    "m = __import__('o' + 's')",
    "e = getattr(m, 'env' + 'iron')",
    "g = f.__globals__",
    "import numpy as np\nnp.save('/tmp/x', np.zeros(2))",
    "jax.block_until_ready = lambda x: x",
    "jax.config.update('jax_enable_x64', True)",
    "cache = {}\ndef f():\n    global cache\nf()",
    "from jax._src import core",
    'half = jax.default_backend() == "tpu"',
    'half = "TPU" in str(x.sharding)',
    "info = pltpu.get_tpu_info()",
]


@pytest.mark.parametrize("snippet", CONTAINED_ELSEWHERE)
def test_routes_the_sandbox_contains_are_not_refused(snippet):
    assert static_problems(textwrap.dedent(CLEAN) + "\n" + snippet + "\n") == []


def test_jaxbench_expert_idioms_pass():
    """JAXBench's splash and GQA experts (jax's own Pallas ops) were refused for
    `object.__setattr__` in a frozen dataclass's `__post_init__` and for `jax.sharding`."""
    assert static_problems(expert_source(), "optimized.py", ("workload", "computation")) == []


def test_missing_computation():
    assert static_problems("import jax\n") == ["does not define a top-level `computation`"]


def test_problems_name_their_line():
    source = "import jax\ndef computation(x):\n    return jax.pure_callback(f, x, x)\n"
    assert static_problems(source) == [
        "calls back into Python from device code (`.pure_callback` at line 3): the host, not "
        "the kernel, would compute the outputs"
    ]


def test_each_problem_names_the_rule_it_breaks():
    source = "import jax\ndef compute(x):\n    return jax.pure_callback(f, x, x)\n"
    rules = [broken.rule for broken in broken_rules(source)]
    assert rules == [StaticRule.NO_ENTRY_POINT, StaticRule.HOST_CALLBACK]
    assert [b.rule for b in broken_rules("def computation(:\n")] == [StaticRule.DOES_NOT_PARSE]


def test_names_that_merely_look_like_refused_ones_pass():
    """A local called `callback` or `platform_dependent` is not a call back or a branch; only
    attributes and imports are."""
    source = textwrap.dedent(CLEAN).replace(
        '    block = getattr(x, "shape")[0]\n', "    callback = platform_dependent = 2\n"
    )
    assert static_problems(source) == []
