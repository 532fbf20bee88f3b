"""Binding a call's arguments to a PyTorch signature, as Python would. No jax."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from maxkernel_tui.kernels.porting.values import fail

T = TypeVar("T")


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()


@dataclass(frozen=True)
class Signature:
    """Parameter names in order with their defaults (`REQUIRED` for none)."""

    params: tuple[tuple[str, object], ...]

    @staticmethod
    def of(*params: str | tuple[str, object]) -> Signature:
        return Signature(tuple((p, REQUIRED) if isinstance(p, str) else p for p in params))

    def without_first(self) -> Signature:
        return Signature(self.params[1:])


@dataclass(frozen=True)
class Bound(Generic[T]):
    """Arguments by parameter name; defaults appear as `default` values (not of type T)."""

    given: dict[str, T]
    defaults: dict[str, object]

    def has(self, name: str) -> bool:
        return name in self.given


def bind(
    signature: Signature,
    args: Sequence[T],
    kwargs: Mapping[str, T],
    what: str,
    line: int | None,
    aliases: Mapping[str, str] | None = None,
) -> Bound[T]:
    """`args` and `kwargs` by parameter name; a clear error for too many, unknown or missing."""
    names = [name for name, _ in signature.params]
    if len(args) > len(names):
        raise fail(line, f"{what} takes at most {len(names)} arguments, {len(args)} given")
    given = dict(zip(names, args))
    for key, value in kwargs.items():
        key = (aliases or {}).get(key, key)
        if key not in names:
            raise fail(line, f"{what} has no argument {key!r} (it takes {', '.join(names)})")
        if key in given:
            raise fail(line, f"{what} got {key!r} twice")
        given[key] = value
    missing = [n for n, d in signature.params if d is REQUIRED and n not in given]
    if missing:
        raise fail(line, f"{what} needs {', '.join(missing)}")
    defaults = {n: d for n, d in signature.params if n not in given}
    return Bound(given, defaults)
