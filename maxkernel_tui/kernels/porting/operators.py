"""The operator table: each PyTorch function (`torch.X`, `F.X`, `tensor.X()`) the translator
knows, its signature, and the JAX code it becomes. No jax.

Functions and methods share one table: a method call passes its tensor as the first argument.
Helpers named in `Op.helpers` are copied from `jax_ops` into the reference.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from maxkernel_tui.kernels.porting.signatures import Bound, Signature, bind
from maxkernel_tui.kernels.porting.values import Expr, fail


@dataclass(frozen=True)
class Args:
    """A call's arguments bound to an operator's signature."""

    bound: Bound[Expr]
    what: str
    line: int | None

    def code(self, name: str) -> str:
        if name in self.bound.given:
            return self.bound.given[name].code
        return repr(self.bound.defaults[name])

    def value(self, name: str) -> object:
        """The argument's value at translation time; an error if it is a tensor."""
        if name not in self.bound.given:
            return self.bound.defaults[name]
        expr = self.bound.given[name]
        if not expr.is_static:
            raise fail(self.line, f"{self.what}: `{name}` must be a constant, not {expr.code}")
        return expr.value

    def is_tensor(self, name: str) -> bool:
        return name in self.bound.given and not self.bound.given[name].is_static


Emit = Callable[[Args], str]


@dataclass(frozen=True)
class Op:
    signature: Signature
    emit: Emit
    helpers: tuple[str, ...] = ()
    aliases: tuple[tuple[str, str], ...] = ()  # keyword -> parameter name (`axis` -> `dim`)


_DIM_ALIASES = (("axis", "dim"), ("keepdims", "keepdim"))
X = "input"


def _unary(jax_fn: str) -> Op:
    return Op(Signature.of(X), lambda a: f"{jax_fn}({a.code(X)})")


def _binary(jax_fn: str) -> Op:
    return Op(Signature.of(X, "other"), lambda a: f"{jax_fn}({a.code(X)}, {a.code('other')})")


def _dim_code(a: Args) -> str:
    dim = a.value("dim")
    return repr(tuple(dim) if isinstance(dim, list) else dim)


def _reduction(jax_fn: str) -> Op:
    def emit(a: Args) -> str:
        return f"{jax_fn}({a.code(X)}, axis={_dim_code(a)}, keepdims={a.value('keepdim')!r})"

    return Op(Signature.of(X, ("dim", None), ("keepdim", False)), emit, aliases=_DIM_ALIASES)


def _extremum(name: str) -> Op:
    """`torch.max`/`min`: over all (no dim), along a dim (values and indices), or element-wise
    against another tensor."""

    def emit(a: Args) -> str:
        if a.is_tensor("dim"):
            return f"jnp.{name}imum({a.code(X)}, {a.code('dim')})"
        if a.value("dim") is None:
            return f"jnp.{name}({a.code(X)})"
        return f"{name}_along({a.code(X)}, {_dim_code(a)}, {a.value('keepdim')!r})"

    return Op(
        Signature.of(X, ("dim", None), ("keepdim", False)),
        emit,
        helpers=(f"{name}_along",),
        aliases=(*_DIM_ALIASES, ("other", "dim")),
    )


def _arg_extremum(name: str) -> Op:
    def emit(a: Args) -> str:
        return f"jnp.{name}({a.code(X)}, axis={_dim_code(a)}, keepdims={a.value('keepdim')!r})"

    return Op(Signature.of(X, ("dim", None), ("keepdim", False)), emit, aliases=_DIM_ALIASES)


def _spread(name: str) -> Op:
    """`torch.var`/`std`: Bessel-corrected unless `unbiased=False` or `correction=` says."""

    def emit(a: Args) -> str:
        correction = a.value("correction")
        if correction is None:
            correction = 1 if a.value("unbiased") else 0
        var = f"variance({a.code(X)}, {_dim_code(a)}, {correction!r}, {a.value('keepdim')!r})"
        return var if name == "var" else f"jnp.sqrt({var})"

    signature = Signature.of(
        X, ("dim", None), ("unbiased", True), ("keepdim", False), ("correction", None)
    )
    return Op(signature, emit, helpers=("variance",), aliases=_DIM_ALIASES)


def _softmax(jax_fn: str) -> Op:
    def emit(a: Args) -> str:
        if a.value("dim") is None:
            raise fail(a.line, f"{a.what}: give `dim` (PyTorch's implicit dim is deprecated)")
        return f"{jax_fn}({a.code(X)}, axis={_dim_code(a)})"

    return Op(Signature.of(X, ("dim", None), ("dtype", None)), emit, aliases=_DIM_ALIASES)


def _clamp(a: Args) -> str:
    low, high = a.code("min"), a.code("max")
    return f"jnp.clip({a.code(X)}, {low}, {high})"


def _arith(symbol: str) -> Op:
    def emit(a: Args) -> str:
        other = a.code("other")
        if symbol in "+-" and a.value("alpha") != 1:
            other = f"({other} * {a.code('alpha')})"
        return f"({a.code(X)} {symbol} {other})"

    names = (X, "other", ("alpha", 1)) if symbol in "+-" else (X, "other")
    return Op(Signature.of(*names), emit)


def _gelu(a: Args) -> str:
    approximate = a.value("approximate")
    if approximate not in ("none", "tanh"):
        raise fail(a.line, f"{a.what}: approximate must be 'none' or 'tanh', not {approximate!r}")
    return f"jax.nn.gelu({a.code(X)}, approximate={approximate == 'tanh'})"


def _conv(n: int) -> Op:
    def emit(a: Args) -> str:
        return (
            f"conv_nd({a.code(X)}, {a.code('weight')}, {a.code('bias')}, stride={a.code('stride')}"
            f", padding={a.code('padding')}, dilation={a.code('dilation')}, "
            f"groups={a.code('groups')})"
        )

    signature = Signature.of(
        X, "weight", ("bias", None), ("stride", 1), ("padding", 0), ("dilation", 1), ("groups", 1)
    )
    return Op(signature, emit, helpers=("conv_nd",))


def _conv_transpose(n: int) -> Op:
    def emit(a: Args) -> str:
        return (
            f"conv_transpose_nd({a.code(X)}, {a.code('weight')}, {a.code('bias')}, "
            f"stride={a.code('stride')}, padding={a.code('padding')}, "
            f"output_padding={a.code('output_padding')}, dilation={a.code('dilation')}, "
            f"groups={a.code('groups')})"
        )

    signature = Signature.of(
        X,
        "weight",
        ("bias", None),
        ("stride", 1),
        ("padding", 0),
        ("output_padding", 0),
        ("groups", 1),
        ("dilation", 1),
    )
    return Op(signature, emit, helpers=("conv_transpose_nd",))


def _no_ceil_mode(a: Args) -> None:
    if a.value("ceil_mode"):
        raise fail(a.line, f"{a.what}: ceil_mode=True is not supported")


def _max_pool(n: int) -> Op:
    def emit(a: Args) -> str:
        _no_ceil_mode(a)
        if a.value("return_indices"):
            raise fail(a.line, f"{a.what}: return_indices=True is not supported")
        return (
            f"max_pool_nd({a.code(X)}, {n}, {a.code('kernel_size')}, stride={a.code('stride')}, "
            f"padding={a.code('padding')}, dilation={a.code('dilation')})"
        )

    signature = Signature.of(
        X,
        "kernel_size",
        ("stride", None),
        ("padding", 0),
        ("dilation", 1),
        ("ceil_mode", False),
        ("return_indices", False),
    )
    return Op(signature, emit, helpers=("max_pool_nd",))


def _avg_pool(n: int) -> Op:
    def emit(a: Args) -> str:
        _no_ceil_mode(a)
        if a.value("divisor_override") is not None:
            raise fail(a.line, f"{a.what}: divisor_override is not supported")
        return (
            f"avg_pool_nd({a.code(X)}, {n}, {a.code('kernel_size')}, stride={a.code('stride')}, "
            f"padding={a.code('padding')}, count_include_pad={a.code('count_include_pad')})"
        )

    signature = Signature.of(
        X,
        "kernel_size",
        ("stride", None),
        ("padding", 0),
        ("ceil_mode", False),
        ("count_include_pad", True),
        ("divisor_override", None),
    )
    return Op(signature, emit, helpers=("avg_pool_nd",))


def _adaptive_pool(n: int, reduce: str) -> Op:
    def emit(a: Args) -> str:
        return f"adaptive_pool_nd({a.code(X)}, {n}, {a.code('output_size')}, {reduce})"

    return Op(Signature.of(X, "output_size"), emit, helpers=("adaptive_pool_nd",))


def _norm(helper: str, *params: str | tuple[str, object]) -> Op:
    names = [p if isinstance(p, str) else p[0] for p in params]

    def emit(a: Args) -> str:
        used = [n for n in names if n not in ("running_mean", "running_var", "momentum")]
        return f"{helper}({a.code(X)}, " + ", ".join(a.code(n) for n in used) + ")"

    return Op(Signature.of(X, *params), emit, helpers=(helper,))


def _instance_norm(a: Args) -> str:
    if a.is_tensor("running_mean") or not a.value("use_input_stats"):
        raise fail(a.line, f"{a.what}: running statistics are not supported")
    return f"instance_norm({a.code(X)}, {a.code('weight')}, {a.code('bias')}, {a.code('eps')})"


def _batch_norm(a: Args) -> str:
    """Batch statistics in training mode (PyTorch's default for a module), else the running
    ones."""
    x, w, b, eps = a.code(X), a.code("weight"), a.code("bias"), a.code("eps")
    if a.value("training"):
        return f"batch_norm_train({x}, {w}, {b}, {eps})"
    mean, var = a.code("running_mean"), a.code("running_var")
    return f"batch_norm_eval({x}, {mean}, {var}, {w}, {b}, {eps})"


def _identity(a: Args) -> str:
    return a.code(X)


def _dims_code(args: Sequence[Expr], what: str, line: int | None) -> str:
    """The shape or permutation of `view(2, -1)`, `view((2, -1))` or `view(shape)`, as code."""
    if len(args) == 1:
        return args[0].code
    if not args:
        raise fail(line, f"{what} needs its sizes")
    return "(" + ", ".join(e.code for e in args) + ")"


# Methods whose arguments are a variable list (`x.view(a, b)`) are emitted from the raw list.
VarargsEmit = Callable[[Expr, Sequence[Expr], str, int | None], str]
VARARGS: dict[str, VarargsEmit] = {
    "view": lambda x, args, what, line: f"{x.code}.reshape({_dims_code(args, what, line)})",
    "reshape": lambda x, args, what, line: f"{x.code}.reshape({_dims_code(args, what, line)})",
    "permute": lambda x, args, what, line: (
        f"jnp.transpose({x.code}, {_dims_code(args, what, line)})"
    ),
}


OPS: dict[str, Op] = {
    # activations
    "relu": _unary("jax.nn.relu"),
    "relu6": _unary("jax.nn.relu6"),
    "sigmoid": _unary("jax.nn.sigmoid"),
    "tanh": _unary("jnp.tanh"),
    "silu": _unary("jax.nn.silu"),
    "hardswish": _unary("jax.nn.hard_swish"),
    "hardsigmoid": _unary("jax.nn.hard_sigmoid"),
    "selu": _unary("jax.nn.selu"),
    "logsigmoid": _unary("jax.nn.log_sigmoid"),
    "softsign": _unary("jax.nn.soft_sign"),
    "mish": Op(Signature.of(X), lambda a: f"mish({a.code(X)})", helpers=("mish",)),
    "gelu": Op(Signature.of(X, ("approximate", "none")), _gelu),
    "elu": Op(
        Signature.of(X, ("alpha", 1.0)), lambda a: f"jax.nn.elu({a.code(X)}, {a.code('alpha')})"
    ),
    "leaky_relu": Op(
        Signature.of(X, ("negative_slope", 0.01)),
        lambda a: f"jax.nn.leaky_relu({a.code(X)}, {a.code('negative_slope')})",
    ),
    "hardtanh": Op(
        Signature.of(X, ("min_val", -1.0), ("max_val", 1.0)),
        lambda a: f"jnp.clip({a.code(X)}, {a.code('min_val')}, {a.code('max_val')})",
    ),
    "softplus": Op(
        Signature.of(X, ("beta", 1.0), ("threshold", 20.0)),
        lambda a: f"softplus({a.code(X)}, {a.code('beta')}, {a.code('threshold')})",
        helpers=("softplus",),
    ),
    "softmax": _softmax("jax.nn.softmax"),
    "log_softmax": _softmax("jax.nn.log_softmax"),
    # reductions
    "logsumexp": Op(
        Signature.of(X, "dim", ("keepdim", False)),
        lambda a: (
            f"jax.nn.logsumexp({a.code(X)}, axis={_dim_code(a)}, keepdims={a.value('keepdim')!r})"
        ),
        aliases=_DIM_ALIASES,
    ),
    "sum": _reduction("jnp.sum"),
    "mean": _reduction("jnp.mean"),
    "prod": _reduction("jnp.prod"),
    "amax": _reduction("jnp.max"),
    "amin": _reduction("jnp.min"),
    "max": _extremum("max"),
    "min": _extremum("min"),
    "argmax": _arg_extremum("argmax"),
    "argmin": _arg_extremum("argmin"),
    "var": _spread("var"),
    "std": _spread("std"),
    "cumsum": Op(
        Signature.of(X, "dim"),
        lambda a: f"jnp.cumsum({a.code(X)}, axis={_dim_code(a)})",
        aliases=_DIM_ALIASES,
    ),
    "cumprod": Op(
        Signature.of(X, "dim"),
        lambda a: f"jnp.cumprod({a.code(X)}, axis={_dim_code(a)})",
        aliases=_DIM_ALIASES,
    ),
    # element-wise
    "clamp": Op(Signature.of(X, ("min", None), ("max", None)), _clamp),
    "clip": Op(Signature.of(X, ("min", None), ("max", None)), _clamp),
    "clamp_min": Op(Signature.of(X, "min"), lambda a: f"jnp.maximum({a.code(X)}, {a.code('min')})"),
    "clamp_max": Op(Signature.of(X, "max"), lambda a: f"jnp.minimum({a.code(X)}, {a.code('max')})"),
    "exp": _unary("jnp.exp"),
    "log": _unary("jnp.log"),
    "log1p": _unary("jnp.log1p"),
    "abs": _unary("jnp.abs"),
    "sqrt": _unary("jnp.sqrt"),
    "rsqrt": _unary("jax.lax.rsqrt"),
    "neg": _unary("jnp.negative"),
    "reciprocal": _unary("jnp.reciprocal"),
    "square": _unary("jnp.square"),
    "erf": _unary("jax.scipy.special.erf"),
    "sin": _unary("jnp.sin"),
    "cos": _unary("jnp.cos"),
    "sign": _unary("jnp.sign"),
    "floor": _unary("jnp.floor"),
    "ceil": _unary("jnp.ceil"),
    "pow": Op(
        Signature.of(X, "exponent"), lambda a: f"jnp.power({a.code(X)}, {a.code('exponent')})"
    ),
    "add": _arith("+"),
    "sub": _arith("-"),
    "mul": _arith("*"),
    "div": _arith("/"),
    "maximum": _binary("jnp.maximum"),
    "minimum": _binary("jnp.minimum"),
    "where": Op(
        Signature.of("condition", X, "other"),
        lambda a: f"jnp.where({a.code('condition')}, {a.code(X)}, {a.code('other')})",
    ),
    # matrix products
    "matmul": _binary("jnp.matmul"),
    "mm": _binary("jnp.matmul"),
    "bmm": _binary("jnp.matmul"),
    "tril": Op(
        Signature.of(X, ("diagonal", 0)), lambda a: f"jnp.tril({a.code(X)}, {a.code('diagonal')})"
    ),
    "triu": Op(
        Signature.of(X, ("diagonal", 0)), lambda a: f"jnp.triu({a.code(X)}, {a.code('diagonal')})"
    ),
    # layers as functions
    "linear": Op(
        Signature.of(X, "weight", ("bias", None)),
        lambda a: f"linear({a.code(X)}, {a.code('weight')}, {a.code('bias')})",
        helpers=("linear",),
    ),
    **{f"conv{n}d": _conv(n) for n in (1, 2, 3)},
    **{f"conv_transpose{n}d": _conv_transpose(n) for n in (1, 2, 3)},
    **{f"max_pool{n}d": _max_pool(n) for n in (1, 2, 3)},
    **{f"avg_pool{n}d": _avg_pool(n) for n in (1, 2, 3)},
    **{f"adaptive_avg_pool{n}d": _adaptive_pool(n, "jnp.mean") for n in (1, 2, 3)},
    **{f"adaptive_max_pool{n}d": _adaptive_pool(n, "jnp.max") for n in (1, 2, 3)},
    "group_norm": _norm(
        "group_norm", "num_groups", ("weight", None), ("bias", None), ("eps", 1e-5)
    ),
    "layer_norm": _norm(
        "layer_norm", "normalized_shape", ("weight", None), ("bias", None), ("eps", 1e-5)
    ),
    "batch_norm": Op(
        Signature.of(
            X,
            "running_mean",
            "running_var",
            ("weight", None),
            ("bias", None),
            ("training", False),
            ("momentum", 0.1),
            ("eps", 1e-5),
        ),
        _batch_norm,
        helpers=("batch_norm_train", "batch_norm_eval"),
    ),
    "rms_norm": _norm("rms_norm", "normalized_shape", ("weight", None), ("eps", None)),
    "instance_norm": Op(
        Signature.of(
            X,
            ("running_mean", None),
            ("running_var", None),
            ("weight", None),
            ("bias", None),
            ("use_input_stats", True),
            ("momentum", 0.1),
            ("eps", 1e-5),
        ),
        _instance_norm,
        helpers=("instance_norm",),
    ),
    **{
        name: Op(Signature.of(X, ("p", 0.5), ("training", True), ("inplace", False)), _identity)
        for name in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout")
    },
    # shapes
    "flatten": Op(
        Signature.of(X, ("start_dim", 0), ("end_dim", -1)),
        lambda a: f"flatten({a.code(X)}, {a.code('start_dim')}, {a.code('end_dim')})",
        helpers=("flatten",),
    ),
    "transpose": Op(
        Signature.of(X, "dim0", "dim1"),
        lambda a: f"jnp.swapaxes({a.code(X)}, {a.code('dim0')}, {a.code('dim1')})",
    ),
    "t": Op(Signature.of(X), lambda a: f"{a.code(X)}.T"),
    "unsqueeze": Op(
        Signature.of(X, "dim"), lambda a: f"jnp.expand_dims({a.code(X)}, {a.code('dim')})"
    ),
    "squeeze": Op(
        Signature.of(X, ("dim", None)),
        lambda a: f"squeeze({a.code(X)}, {a.code('dim')})",
        helpers=("squeeze",),
    ),
    "size": Op(
        Signature.of(X, ("dim", None)),
        lambda a: (
            f"{a.code(X)}.shape"
            if a.value("dim") is None
            else f"{a.code(X)}.shape[{a.code('dim')}]"
        ),
    ),
    "contiguous": Op(Signature.of(X), _identity),
    "float": Op(Signature.of(X), _identity),
    "cat": Op(
        Signature.of("tensors", ("dim", 0)),
        lambda a: f"jnp.concatenate({a.code('tensors')}, axis={a.code('dim')})",
        aliases=_DIM_ALIASES,
    ),
    "stack": Op(
        Signature.of("tensors", ("dim", 0)),
        lambda a: f"jnp.stack({a.code('tensors')}, axis={a.code('dim')})",
        aliases=_DIM_ALIASES,
    ),
}


def emit_op(
    name: str, args: Sequence[Expr], kwargs: dict[str, Expr], line: int | None
) -> tuple[str, tuple[str, ...]]:
    """The JAX code of operator `name` applied to `args`, and the helpers it needs."""
    op = OPS[name]
    what = f"`{name}`"
    bound = bind(op.signature, args, kwargs, what, line, dict(op.aliases))
    return op.emit(Args(bound, what, line)), op.helpers
