"""The `nn` layers the translator knows: their constructor signatures, the parameters they own
with PyTorch's default initialisation, and the operator each applies. No jax.

PyTorch initialises linear and conv weights with `kaiming_uniform_(a=sqrt(5))` and their biases
from U(-1/sqrt(fan_in), 1/sqrt(fan_in)); the weight's bound works out to the same
1/sqrt(fan_in). fan_in is `weight.size(1)` times the kernel's size: in_channels / groups for a
conv, out_channels / groups for a transposed conv. Norm layers start at weight ones and bias
zeros in PyTorch; here they are drawn around those values instead (`values.near_constant`), so
that a kernel ignoring the affine parameters gets wrong numerics rather than passing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from maxkernel_tui.kernels.porting.operators import OPS
from maxkernel_tui.kernels.porting.signatures import Signature, bind
from maxkernel_tui.kernels.porting.values import (
    Dim,
    Init,
    InitKind,
    fail,
    near_constant,
    shape_code,
    sizes_of,
    static,
)

NORM_WEIGHT, NORM_BIAS = near_constant(Init(InitKind.ONES)), near_constant(Init(InitKind.ZEROS))


@dataclass(frozen=True)
class ParamSlot:
    """A parameter a layer owns: the operator argument it fills (`weight`), its shape and init."""

    arg: str
    shape: tuple[object, ...]
    init: Init


@dataclass(frozen=True)
class Layer:
    """A constructed layer: `op(x, **arguments, **{slot.arg: parameter})`."""

    kind: str  # "Conv2d", ...
    op: str
    arguments: dict[str, object]  # constants, as literals in the reference
    params: tuple[ParamSlot, ...] = ()


LayerBuild = Callable[[dict[str, object], int | None], Layer]


@dataclass(frozen=True)
class Sequential:
    layers: tuple[Layer, ...]


def _fan_in_bound(fan_in: str) -> Init:
    return Init(InitKind.UNIFORM, bound=f"1 / math.sqrt({fan_in})")


def _linear(b: dict[str, object], line: int | None) -> Layer:
    fan_in = shape_code(b["in_features"])
    params = [ParamSlot("weight", (b["out_features"], b["in_features"]), _fan_in_bound(fan_in))]
    if b["bias"]:
        params.append(ParamSlot("bias", (b["out_features"],), _fan_in_bound(fan_in)))
    return Layer("Linear", "linear", {}, tuple(params))


def _divided(size: object, groups: int) -> object:
    if groups == 1:
        return size
    if isinstance(size, Dim):
        return Dim(size.value // groups, f"{size.expr} // {groups}")
    return static(size) // groups  # type: ignore[operator]


def _conv(n: int, transposed: bool) -> LayerBuild:
    def build(b: dict[str, object], line: int | None) -> Layer:
        if b["padding_mode"] != "zeros":
            raise fail(line, f"padding_mode={b['padding_mode']!r} is not supported (only 'zeros')")
        kernel = static(b["kernel_size"])
        kernel_sizes = cast(
            tuple[int, ...], tuple(kernel) if isinstance(kernel, tuple | list) else (kernel,) * n
        )
        volume = 1
        for size in kernel_sizes:
            volume *= size
        groups = int(static(b["groups"]))  # type: ignore[call-overload]
        cin, cout = b["in_channels"], b["out_channels"]
        weight_shape = (
            (cin, _divided(cout, groups)) if transposed else (cout, _divided(cin, groups))
        )
        fan_in = f"{shape_code(weight_shape[1])} * {volume}"
        init = _fan_in_bound(fan_in)
        params = [ParamSlot("weight", (*weight_shape, *kernel_sizes), init)]
        if b["bias"]:
            params.append(ParamSlot("bias", (cout,), init))
        names = ["stride", "padding", "dilation", "groups"]
        names += ["output_padding"] if transposed else []
        op = f"conv_transpose{n}d" if transposed else f"conv{n}d"
        kind = f"ConvTranspose{n}d" if transposed else f"Conv{n}d"
        return Layer(kind, op, {k: static(b[k]) for k in names}, tuple(params))

    return build


def _batch_norm(b: dict[str, object], line: int | None) -> Layer:
    params = _affine(b["affine"], (b["num_features"],))
    return Layer(
        "BatchNorm",
        "batch_norm",
        {"eps": static(b["eps"]), "training": True, "running_mean": None, "running_var": None},
        params,
    )


def _instance_norm(b: dict[str, object], line: int | None) -> Layer:
    params = _affine(b["affine"], (b["num_features"],))
    return Layer("InstanceNorm", "instance_norm", {"eps": static(b["eps"])}, params)


def _group_norm(b: dict[str, object], line: int | None) -> Layer:
    params = _affine(b["affine"], (b["num_channels"],))
    arguments = {"num_groups": static(b["num_groups"]), "eps": static(b["eps"])}
    return Layer("GroupNorm", "group_norm", arguments, params)


def _layer_norm(b: dict[str, object], line: int | None) -> Layer:
    shape = sizes_of(b["normalized_shape"])
    params: tuple[ParamSlot, ...] = ()
    if b["elementwise_affine"]:
        params = (ParamSlot("weight", shape, NORM_WEIGHT),)
        if b["bias"]:
            params += (ParamSlot("bias", shape, NORM_BIAS),)
    arguments = {"normalized_shape": static(shape), "eps": static(b["eps"])}
    return Layer("LayerNorm", "layer_norm", arguments, params)


def _rms_norm(b: dict[str, object], line: int | None) -> Layer:
    shape = sizes_of(b["normalized_shape"])
    params = (ParamSlot("weight", shape, NORM_WEIGHT),) if b["elementwise_affine"] else ()
    arguments = {"normalized_shape": static(shape), "eps": static(b["eps"])}
    return Layer("RMSNorm", "rms_norm", arguments, params)


def _affine(affine: object, shape: tuple[object, ...]) -> tuple[ParamSlot, ...]:
    if not affine:
        return ()
    return (ParamSlot("weight", shape, NORM_WEIGHT), ParamSlot("bias", shape, NORM_BIAS))


_CONV = (
    "in_channels",
    "out_channels",
    "kernel_size",
    ("stride", 1),
    ("padding", 0),
    ("dilation", 1),
    ("groups", 1),
    ("bias", True),
    ("padding_mode", "zeros"),
)
_CONV_T = (
    "in_channels",
    "out_channels",
    "kernel_size",
    ("stride", 1),
    ("padding", 0),
    ("output_padding", 0),
    ("groups", 1),
    ("bias", True),
    ("dilation", 1),
    ("padding_mode", "zeros"),
)
_NORM = ("num_features", ("eps", 1e-5), ("momentum", 0.1))

_WITH_PARAMS: dict[str, tuple[Signature, LayerBuild]] = {
    "Linear": (Signature.of("in_features", "out_features", ("bias", True)), _linear),
    **{f"Conv{n}d": (Signature.of(*_CONV), _conv(n, False)) for n in (1, 2, 3)},
    **{f"ConvTranspose{n}d": (Signature.of(*_CONV_T), _conv(n, True)) for n in (1, 2, 3)},
    **{
        f"BatchNorm{n}d": (
            Signature.of(*_NORM, ("affine", True), ("track_running_stats", True)),
            _batch_norm,
        )
        for n in (1, 2, 3)
    },
    **{
        f"InstanceNorm{n}d": (
            Signature.of(*_NORM, ("affine", False), ("track_running_stats", False)),
            _instance_norm,
        )
        for n in (1, 2, 3)
    },
    "GroupNorm": (
        Signature.of("num_groups", "num_channels", ("eps", 1e-5), ("affine", True)),
        _group_norm,
    ),
    "LayerNorm": (
        Signature.of(
            "normalized_shape", ("eps", 1e-5), ("elementwise_affine", True), ("bias", True)
        ),
        _layer_norm,
    ),
    "RMSNorm": (
        Signature.of("normalized_shape", ("eps", None), ("elementwise_affine", True)),
        _rms_norm,
    ),
}

# Layers without parameters: the operator they apply; their constructor takes the operator's
# arguments after the input (plus `inplace`), except where listed.
_STATELESS: dict[str, str] = {
    "ReLU": "relu",
    "ReLU6": "relu6",
    "GELU": "gelu",
    "SiLU": "silu",
    "Mish": "mish",
    "Tanh": "tanh",
    "Sigmoid": "sigmoid",
    "Hardswish": "hardswish",
    "Hardsigmoid": "hardsigmoid",
    "Hardtanh": "hardtanh",
    "LeakyReLU": "leaky_relu",
    "Softplus": "softplus",
    "ELU": "elu",
    "SELU": "selu",
    "Softsign": "softsign",
    "LogSigmoid": "logsigmoid",
    "Softmax": "softmax",
    "LogSoftmax": "log_softmax",
    "Dropout": "dropout",
    "Dropout1d": "dropout",
    "Dropout2d": "dropout",
    "Dropout3d": "dropout",
    "AlphaDropout": "dropout",
    "Identity": "contiguous",
    "Flatten": "flatten",
    **{f"MaxPool{n}d": f"max_pool{n}d" for n in (1, 2, 3)},
    **{f"AvgPool{n}d": f"avg_pool{n}d" for n in (1, 2, 3)},
    **{f"AdaptiveAvgPool{n}d": f"adaptive_avg_pool{n}d" for n in (1, 2, 3)},
    **{f"AdaptiveMaxPool{n}d": f"adaptive_max_pool{n}d" for n in (1, 2, 3)},
}
_CONSTRUCTOR_OVERRIDES: dict[str, Signature] = {
    "Flatten": Signature.of(("start_dim", 1), ("end_dim", -1)),
    "Softmax": Signature.of(("dim", None)),
    "LogSoftmax": Signature.of(("dim", None)),
    "Identity": Signature(()),
    **{
        name: Signature.of(("p", 0.5), ("inplace", False))
        for name in _STATELESS
        if "Dropout" in name
    },
}


def build_layer(
    kind: str, args: Sequence[object], kwargs: dict[str, object], line: int | None
) -> Layer:
    """The layer `nn.<kind>(*args, **kwargs)` constructs; a clear error for any other kind."""
    what = f"nn.{kind}"
    if kind in _WITH_PARAMS:
        signature, build = _WITH_PARAMS[kind]
        bound = bind(signature, args, kwargs, what, line)
        return build({**bound.defaults, **bound.given}, line)
    if kind in _STATELESS:
        op = _STATELESS[kind]
        signature = _CONSTRUCTOR_OVERRIDES.get(kind) or Signature(
            OPS[op].signature.without_first().params + (("inplace", False),)
        )
        bound = bind(signature, args, kwargs, what, line)
        arguments = {k: static(v) for k, v in bound.given.items() if k not in ("inplace",)}
        if kind == "Flatten":
            arguments = {"start_dim": 1, "end_dim": -1, **arguments}
        if "Dropout" in kind:
            arguments = {"training": False}
        return Layer(kind, op, arguments)
    raise fail(line, f"layer nn.{kind} is not supported by the translator")
