"""Static rules: each known way of reaching outside the kernel is named, clean code passes."""

import textwrap

import pytest

from maxkernel_tui.kernels.evaluation.static_checks import static_problems

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


@pytest.mark.parametrize(
    ("snippet", "phrase"),
    [
        ("import time\nt = time.perf_counter()", "touches clocks (`import time` at line"),
        ("import os\nk = os.environ['GEMINI_API_KEY']", "reaches the environment or the process"),
        ("from os import environ", "reaches the environment or the process"),
        ("import importlib\nm = importlib.import_module('reference')", "uses the import system"),
        ("from reference import computation as ref", "imports the reference"),
        ("import maxkernel_tui.kernels.evaluation.compare", "imports the harness"),
        ("from . import helper", "imports from its own folder"),
        ("m = __import__('o' + 's')", "imports modules dynamically (`__import__` at line"),
        ("e = getattr(m, 'env' + 'iron')", "looks up attributes by computed name"),
        ("e = getattr(m, 'environ')", "reaches `environ` through getattr"),
        ("exec('x = 1')", "executes generated code"),
        ("jax.block_until_ready = lambda x: x", "touches the timing path"),
        ("import jax\njax.numpy.exp = abs", "patches a library attribute (`jax.numpy.exp` at line"),
        ("import numpy as np\nnp.random.seed = None", "patches a library attribute"),
        (
            "cache = {}\ndef f():\n    global cache\nf()",
            "keeps state across calls (`global` at line",
        ),
        ("x = jax.pure_callback(f, y)", "calls back into Python from device code"),
        ("jax.config.update('jax_enable_x64', True)", "changes jax configuration"),
        ("g = f.__globals__", "uses interpreter internals (`__globals__`"),
        ("b = __builtins__", "uses interpreter internals"),
        ("import ctypes", "calls native code"),
        ("import requests", "imports a module outside the allowed set"),
        ("def computation(:", "does not parse"),
    ],
)
def test_each_escape_is_named(snippet, phrase):
    source = textwrap.dedent(CLEAN) + "\n" + snippet + "\n"
    problems = static_problems(source)
    assert any(phrase in p for p in problems), problems


def test_missing_computation():
    assert static_problems("import jax\n") == ["does not define a top-level `computation`"]


def test_problems_name_their_line():
    assert static_problems("import jax\nimport time\ndef computation(x):\n    return x\n") == [
        "touches clocks (`import time` at line 2; allowed: collections, dataclasses, enum, "
        "functools, itertools, jax, jaxlib, math, ml_dtypes, numpy, operator, typing)"
    ]


PLATFORM_BRANCHES = [
    'half = jax.default_backend() == "tpu"',
    'half = jax.devices()[0].platform == "tpu"',
    "half = len(jax.local_devices()) > 1",
    'half = "TPU" in jax.devices()[0].device_kind',
    'half = "TPU" in str(x.device)',
    'half = "TPU" in str(x.sharding)',
    "from jax import default_backend",
    "from jax.extend.backend import get_backend",
    'half = getattr(jax, "default_backend")() == "tpu"',
    'half = hasattr(jax, "devices")',
    "info = pltpu.get_tpu_info()",
    "y = jax.lax.platform_dependent(x, tpu=lambda x: x, default=lambda x: x)",
]


@pytest.mark.parametrize("line", PLATFORM_BRANCHES)
def test_a_kernel_may_not_observe_the_platform_it_runs_on(line):
    source = textwrap.dedent(CLEAN).replace('    block = getattr(x, "shape")[0]\n', f"    {line}\n")
    problems = static_problems(source)
    assert any("observes the platform it runs on" in p and "line 13" in p for p in problems), (
        problems
    )


def test_names_that_merely_look_like_platform_queries_pass():
    """A local called `platform` or `devices` is not a query; only attributes, imports and
    lookups by name are."""
    source = textwrap.dedent(CLEAN).replace(
        '    block = getattr(x, "shape")[0]\n', "    platform = devices = 2\n"
    )
    assert static_problems(source) == []
