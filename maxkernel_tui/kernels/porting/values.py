"""What the translator knows about a module before emitting JAX: sizes, tensors to generate,
parameters and translated expressions. No jax.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from enum import StrEnum

from maxkernel_tui.kernels.task import TaskImportError


class _NotStatic:
    def __repr__(self) -> str:
        return "NOT_STATIC"


NOT_STATIC = _NotStatic()  # an expression whose value is known only when the reference runs


def fail(line: int | None, problem: str) -> TaskImportError:
    """The error for `problem` at `line` of the module (the importer adds the file's name)."""
    return TaskImportError(f"line {line}: {problem}" if line else problem)


@dataclass(frozen=True)
class Dim:
    """An integer size of the module and the code that computes it from the size constants
    (`in_channels`, `(out_channels * 2)`): shapes keep the names so derived sizes flow through."""

    value: int
    expr: str


def static(value: object) -> object:
    """`value` with every `Dim` replaced by its integer: hyperparameters become literals."""
    if isinstance(value, Dim):
        return value.value
    if isinstance(value, tuple | list):
        return type(value)(static(v) for v in value)
    return value


def shape_code(value: object) -> str:
    """A size or a sequence of sizes as code over the size constants."""
    if isinstance(value, Dim):
        return value.expr
    if isinstance(value, int) and not isinstance(value, bool):
        return repr(value)
    if isinstance(value, tuple | list):
        inner = ", ".join(shape_code(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    raise TaskImportError(f"{value!r} is not a size")


def sizes_of(value: object) -> tuple[object, ...]:
    """A shape given as one size or as a sequence of sizes, as a tuple."""
    return tuple(value) if isinstance(value, tuple | list) else (value,)


class InitKind(StrEnum):
    UNIFORM = "uniform"
    NORMAL = "normal"
    ONES = "ones"
    ZEROS = "zeros"


@dataclass(frozen=True)
class Init:
    """How a tensor's values are drawn: U(-bound, bound) (U(0, 1) without a bound), N(0, 1),
    ones or zeros; then times `scale` plus `offset` (`torch.randn(n) * 0.02`)."""

    kind: InitKind
    bound: str | None = None  # code over the size constants
    scale: float = 1.0
    offset: float = 0.0
    around: float | None = None  # the constant PyTorch starts it at, when drawn near it instead


NEAR_SPREAD = 0.1  # of the draw around a learned parameter's starting constant


def near_constant(init: Init) -> Init:
    """A learned parameter PyTorch starts at a constant (a norm's ones and zeros,
    `nn.Parameter(torch.ones(n))`), drawn around that constant instead, by N(0, 1) x NEAR_SPREAD:
    a kernel that ignores the parameter then gets wrong numerics, where at ones or zeros it
    would pass. Other inits are returned as they are."""
    if init.kind not in (InitKind.ONES, InitKind.ZEROS):
        return init
    constant = (init.scale if init.kind == InitKind.ONES else 0.0) + init.offset
    return Init(InitKind.NORMAL, scale=NEAR_SPREAD, offset=constant, around=constant)


@dataclass(frozen=True)
class TensorInit:
    """A tensor `torch.randn(...)` / `torch.rand(...)` / `ones` / `zeros` makes."""

    shape: tuple[object, ...]  # Dim or int per axis
    init: Init


@dataclass(frozen=True)
class Tensor:
    """An input of the generated reference: a forward argument or a parameter of the module.
    `torch_path` is the parameter's name in `Model.state_dict()` (None for forward arguments)."""

    name: str
    shape: tuple[object, ...]
    init: Init
    torch_path: str | None = None


@dataclass(frozen=True)
class Expr:
    """A translated expression: JAX code, and its Python value when known at translation time."""

    code: str
    value: object = NOT_STATIC

    @property
    def is_static(self) -> bool:
        return self.value is not NOT_STATIC


def literal(value: object) -> Expr:
    return Expr(repr(value), value)


@dataclass(frozen=True)
class Statement:
    """One statement of the translated forward: its line in the module, its JAX code, and the
    variables it assigns as (name in the module, name in the reference)."""

    line: int
    code: str
    assigned: tuple[tuple[str, str], ...] = ()
    returned: bool = False


@dataclass
class Translation:
    """A module translated: the sizes, the inputs (forward arguments first, then parameters),
    the body of `computation` and the helpers it calls."""

    name: str
    constants: dict[str, tuple[int, str]]  # size name -> (production value, defining code)
    inputs: list[Tensor]
    body: list[Statement]
    helpers: set[str] = field(default_factory=set)
    operators: list[str] = field(default_factory=list)  # in forward order, for the description


def line_of(node: ast.AST) -> int | None:
    return getattr(node, "lineno", None)
