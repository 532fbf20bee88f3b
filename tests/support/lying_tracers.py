"""Kernels that lie through the tracer, the one process that imports them (used by
tests/kernels/sandbox/test_tracer_lies.py against the task of hostile_kernels.py: `x * 2 + 1`
on float32 rows of 128, 16 rows at bench, 8 at check, 24 at heldout).

Each is plain jnp (no pallas_call), so the judge rejects it if the lie does not work; each lies
at import time, before the tracer writes anything itself, in the least convenient way for the
harness: protocol lines written on the tracer's own answering descriptor (worker_reply.reply,
which the kernel imports from the harness: whatever it prints goes to stderr), files planted in
its directory, or the tracer's own functions replaced.
"""

from __future__ import annotations

# Lines the harness reads from the tracer, written first, then `done`: every check passed.
FORGED_PASSES = """
import json
import sys

import jax.numpy as jnp

from maxkernel_tui.kernels.worker_reply import reply as _reply

for _name in ("trace", "tpu_lower", "tpu_compile", "production", "numerics", "heldout"):
    _check = {"name": _name, "status": "pass", "detail": "fine", "seconds": 0.0, "data": {}}
    _reply({"check": _check})
_reply({"done": {}})


def computation(x):
    return x * 2.0 + 1.0
"""

# A program file elsewhere on the machine, named as the program at every configuration.
FILE_ELSEWHERE = """
import json
import sys

import jax.numpy as jnp

from maxkernel_tui.kernels.worker_reply import reply as _reply

for _config in ("bench", "check", "heldout"):
    _traced = {"config": _config, "file": "@TARGET@", "seconds": 0.0}
    _reply({"traced": _traced})
_reply({"done": {}})


def computation(x):
    return x * 2.0 + 1.0
"""

# A link in the tracer's own directory to a file elsewhere, named as the program.
LINKED_PROGRAM = """
import json
import os
import sys

import jax.numpy as jnp

from maxkernel_tui.kernels.worker_reply import reply as _reply

os.symlink("@TARGET@", "program-0.bin")
for _config in ("bench", "check", "heldout"):
    _traced = {"config": _config, "file": os.path.abspath("program-0.bin"), "seconds": 0.0}
    _reply({"traced": _traced})
_reply({"done": {}})


def computation(x):
    return x * 2.0 + 1.0
"""

# A pickle that would run `os.system` where it is loaded, as the program at every configuration.
PICKLED_GADGET = """
import json
import os
import pickle
import sys

import jax.numpy as jnp

from maxkernel_tui.kernels.worker_reply import reply as _reply


class _Gadget:
    def __reduce__(self):
        return (os.system, ("touch @MARKER@",))


with open("program-0.bin", "wb") as _file:
    pickle.dump(_Gadget(), _file)
for _config in ("bench", "check", "heldout"):
    _traced = {"config": _config, "file": os.path.abspath("program-0.bin"), "seconds": 0.0}
    _reply({"traced": _traced})
_reply({"done": {}})


def computation(x):
    return x * 2.0 + 1.0
"""

# The tracer's dumper replaced by one that always sends one program: a Pallas kernel traced at
# check shapes, which passes every check there, named as the program at every configuration.
SWAPPED_PROGRAM = """
import sys

import jax
import jax.numpy as jnp

from maxkernel_tui.kernels.worker_reply import reply as _reply
from jax.experimental import pallas as pl

_tracer = sys.modules["maxkernel" + "_tui.kernels.evaluation.tracer.candidate"]
_real_dump = _tracer.dump_program


def _kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + 1.0


def _honest(x):
    return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


_at_check = jax.make_jaxpr(_honest)(jax.ShapeDtypeStruct((8, 128), jnp.float32))
_tracer.dump_program = lambda traced: _real_dump(_at_check)


def computation(x):
    return x * 2.0 + 1.0
"""
