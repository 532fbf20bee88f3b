"""The `jax_api` tool's worker: looks a symbol up in the installed jax. Imports jax.

    python -m maxkernel_tui.kernels.worker_main maxkernel_tui.agents.tools.jax_api_worker

One JSON line in (`{"name": "pl.BlockSpec"}`), one out (`{"text": ...}` or `{"error": ...}`).
A name is resolved from jax's own modules only (`jax`, `jnp`, `lax`, `pl`, `pltpu` and dotted
paths below them), one public attribute or submodule at a time; what it reaches must be defined
in jax, so a model cannot walk from jax to `os` or to anything else the process could touch.
Nothing found is called: the answer is read with `inspect`.
"""

from __future__ import annotations

import difflib
import enum
import importlib
import inspect
import json
import re
import sys
from types import ModuleType
from typing import Any

import jax

from maxkernel_tui.kernels.worker_reply import reply
from maxkernel_tui.kernels.workers import READY

ALIASES = {
    "jax": "jax",
    "jnp": "jax.numpy",
    "lax": "jax.lax",
    "pl": "jax.experimental.pallas",
    "pltpu": "jax.experimental.pallas.tpu",
}
_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_OWN = ("jax", "jaxlib")
DOC_CHARS = 2500
MEMBERS = 60


class LookupProblem(Exception):
    """The name cannot be answered; the message says why, for the model."""


def resolve(name: str) -> tuple[str, Any]:
    """(the full dotted path, the object) that `name` names in the installed jax."""
    name = name.strip()
    if not _DOTTED.match(name):
        raise LookupProblem(f"{name!r} is not a dotted Python name (e.g. pl.BlockSpec)")
    parts = name.split(".")
    if any(part.startswith("_") for part in parts):
        raise LookupProblem("private names (starting with _) are not part of jax's API")
    root = ALIASES.get(parts[0])
    if root is None:
        raise LookupProblem(
            f"{parts[0]!r} is not a jax module here; start from {', '.join(ALIASES)} "
            "(pl = jax.experimental.pallas, pltpu = jax.experimental.pallas.tpu)"
        )
    found: Any = importlib.import_module(root)
    path = root
    for part in parts[1:]:
        found = _step(found, path, part)
        path = f"{path}.{part}"
        if not _defined_in_jax(found):
            raise LookupProblem(f"{path} is not defined in jax (it comes from elsewhere)")
    return path, found


def _step(parent: Any, path: str, part: str) -> Any:
    if hasattr(parent, part):
        return getattr(parent, part)
    if isinstance(parent, ModuleType):
        try:
            return importlib.import_module(f"{parent.__name__}.{part}")
        except ImportError:
            pass
    public = [n for n in dir(parent) if not n.startswith("_")]
    close = difflib.get_close_matches(part, public, n=5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise LookupProblem(f"{path} has no {part!r} in jax {jax.__version__}{hint}")


def _defined_in_jax(value: Any) -> bool:
    if isinstance(value, ModuleType):
        origin = value.__name__
    elif inspect.isclass(value) or inspect.isroutine(value):
        origin = getattr(value, "__module__", "") or ""
    else:
        origin = type(value).__module__
    return origin.split(".")[0] in _OWN


def describe(name: str) -> str:
    """What the model reads about `name`: kind, signature, where it is defined, its docstring,
    and a class's or module's public members."""
    path, value = resolve(name)
    kind = _kind(value)
    lines = [f"{name} = {path} ({kind}) in jax {jax.__version__}"]
    if (signature := _signature(value)) is not None:
        lines.append(f"signature: {path.rsplit('.', 1)[-1]}{signature}")
    if not (inspect.isclass(value) or inspect.isroutine(value) or isinstance(value, ModuleType)):
        lines.append(f"value: {value!r}"[:300])
        if isinstance(value, enum.Enum):
            names = ", ".join(member.name for member in type(value))
            lines.append(f"{type(value).__name__} has the values: {names}")
    if (where := _location(value)) is not None:
        lines.append(f"defined in: {where}")
    doc = inspect.getdoc(value) or "(no docstring)"
    lines.append("doc:\n" + (doc if len(doc) <= DOC_CHARS else doc[:DOC_CHARS] + " [...]"))
    if inspect.isclass(value) or isinstance(value, ModuleType):
        members = [m for m in dir(value) if not m.startswith("_")]
        shown = ", ".join(members[:MEMBERS]) + (" ..." if len(members) > MEMBERS else "")
        lines.append(f"public members: {shown}")
    return "\n".join(lines)


def _kind(value: Any) -> str:
    if isinstance(value, ModuleType):
        return "module"
    if inspect.isclass(value):
        return "class"
    if inspect.isroutine(value):
        return "function"
    return f"a {type(value).__name__} value"


def _signature(value: Any) -> str | None:
    if not callable(value) or isinstance(value, ModuleType):
        return None
    try:
        return str(inspect.signature(value))
    except (TypeError, ValueError):
        return None


def _location(value: Any) -> str | None:
    target: Any = value
    if not (inspect.isclass(value) or inspect.isroutine(value) or isinstance(value, ModuleType)):
        target = type(value)  # a value (pltpu.VMEM): where its type is defined
    try:
        target = inspect.unwrap(target)
        file = inspect.getsourcefile(target)
        line = 1 if isinstance(target, ModuleType) else inspect.getsourcelines(target)[1]
    except (TypeError, OSError):
        return None
    if file is None:
        return None
    marker = "site-packages/"
    shown = file.split(marker, 1)[1] if marker in file else file
    return f"{shown}:{line}"


def answer(line: str) -> dict[str, str]:
    try:
        request = json.loads(line)
        return {"text": describe(str(request["name"]))}
    except LookupProblem as problem:
        return {"error": str(problem)}
    except Exception as error:  # an odd object inspect cannot read: say so, keep serving
        return {"error": f"cannot describe it: {type(error).__name__}: {error}"[:500]}


def main() -> None:
    reply(READY)
    for line in sys.stdin:
        if line.strip():
            reply(answer(line))


if __name__ == "__main__":
    main()
