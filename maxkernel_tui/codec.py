"""One codec for the dataclasses that cross a process or the store: `encode` makes the JSON value
of a dataclass from its fields and their type hints, `decode` makes the dataclass again. A class
says where its JSON differs from its fields (a `Shape`: renamed keys, fields left out when None,
an error written alone, ...) in its class statement (`class X(JsonData, shape=Shape(...))`).
Each class's plan is made once, on first use, so a worker protocol's line costs one loop over the
fields. No jax, nothing of the package: every layer may import it.

Decoding shapes values, it does not police them: a `str`, `int`, `bool` or `Literal` field takes
what the JSON holds (a `float` field turns a JSON integer into a float). A key that names no
field is an error unless the class's shape says `Unknown.IGNORE`; a missing key takes the field's
default (an error without one), and so does a null for a field that cannot be None.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Generic, Self, TypeVar

T = TypeVar("T")
Convert = Callable[[Any], Any]


class CodecError(ValueError):
    """JSON that is not the value of the type it is read as."""


class Unknown(enum.Enum):
    """What a key that names no field means when decoding."""

    ERROR = "error"  # a typo, or another version of the type
    IGNORE = "ignore"  # stored data keeps keys since retired, or labels for its readers


@dataclasses.dataclass(frozen=True, eq=False)
class Shape:
    """Where a class's JSON differs from its fields, one option each (field names, not keys)."""

    keys: Mapping[str, str] = dataclasses.field(default_factory=dict)  # field: its JSON key
    old_keys: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)  # also read
    omit_none: bool | tuple[str, ...] = ()  # left out when None (True: every field)
    omit_empty: tuple[str, ...] = ()  # left out when empty
    # When this field is not None the object is written as it alone (beside the fields
    # `beside`): a failure has no results. When None, it is left out.
    alone: str | None = None
    beside: tuple[str, ...] = ()
    # Properties written too (after the field `derived_after`, else last) and ignored when read.
    derived: tuple[str, ...] = ()
    derived_after: str | None = None
    pairs: tuple[str, ...] = ()  # dict fields written as [key, value] pairs (keys not strings)
    skip: tuple[str, ...] = ()  # never written nor read (callbacks): they keep their default
    unknown: Unknown = Unknown.ERROR


PLAIN = Shape()


class JsonData:
    """A dataclass's `to_json` and `from_json`, by the codec; `shape=` in the class statement
    gives its Shape."""

    __codec__: ClassVar[Shape] = PLAIN

    def __init_subclass__(cls, shape: Shape | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if shape is not None:
            cls.__codec__ = shape

    def to_json(self) -> dict[str, Any]:
        return encode_object(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        return decode_object(cls, data)


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    name: str
    key: str
    encoder: Convert | None  # None: the value is its own JSON
    decoder: Convert | None
    required: bool
    default: Callable[[], Any] | None  # for a null where the field cannot be None
    omit_none: bool
    omit_empty: bool
    old_keys: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    shape: Shape
    fields: tuple[_Field, ...]
    alone_fields: tuple[_Field, ...]  # what is written when `shape.alone` is set
    head: tuple[_Field, ...]  # the fields written before the derived properties (all, without)
    tail: tuple[_Field, ...]  # and after them
    known: frozenset[str]  # keys read, or written and ignored when read


_PLANS: dict[type, _Plan] = {}
_MISSING = object()
_TYPES: dict[Any, tuple[Convert | None, Convert | None]] = {}


def encode(value: Any) -> Any:
    """The JSON value of `value`: a dataclass by its plan; lists, tuples and dicts of them
    element by element; an enum by its value; a Path as text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _own_encoder(value) if _own_form(type(value)) else encode_object(value)
    return _plain(value)


def decode(kind: type[T], data: Any) -> T:
    """`data` (parsed JSON) read as `kind`: a dataclass, or any type the fields may have
    (`dict[str, Cost]`, `list[Run]`, ...)."""
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return (
            typing.cast(T, _own_decoder(kind)(data))
            if _own_form(kind)
            else decode_object(kind, data)
        )
    decoder = _converters(kind)[1]
    return data if decoder is None else typing.cast(T, decoder(data))


def encode_object(obj: Any) -> dict[str, Any]:
    plan = _plan(type(obj))
    shape = plan.shape
    if shape.alone is not None and getattr(obj, shape.alone) is not None:
        return _write(obj, plan.alone_fields, {})
    out = _write(obj, plan.head, {})
    if shape.derived:
        for name in shape.derived:
            out[shape.keys.get(name, name)] = _plain(getattr(obj, name))
        _write(obj, plan.tail, out)
    return out


def _write(obj: Any, fields: tuple[_Field, ...], out: dict[str, Any]) -> dict[str, Any]:
    for field in fields:
        value = getattr(obj, field.name)
        if value is None:
            if field.omit_none:
                continue
        elif field.omit_empty and not value:
            continue
        elif field.encoder is not None:
            value = field.encoder(value)
        out[field.key] = value
    return out


def decode_object(kind: type[T], data: Any, fixed: Mapping[str, Any] | None = None) -> T:
    """`data` read as the dataclass `kind`; `fixed`: fields whose values the caller knows (a
    tag said them)."""
    plan = _plan(kind)
    if not isinstance(data, dict | Mapping):  # dict first: an ABC's check is slower
        raise CodecError(f"{kind.__name__}: expected an object, got {_brief(data)}")
    values: dict[str, Any] = {}
    found = 0
    for field in plan.fields:
        value = data.get(field.key, _MISSING)
        if value is _MISSING:
            if field.old_keys:
                value = next((data[k] for k in field.old_keys if k in data), _MISSING)
            if value is _MISSING:
                if field.required:
                    raise CodecError(f"{kind.__name__}: no {field.key!r} in {_brief(data)}")
                continue
        found += 1
        if value is None:
            if field.default is not None:
                value = field.default()
        elif field.decoder is not None:
            try:
                value = field.decoder(value)
            except (TypeError, ValueError, KeyError) as error:
                raise CodecError(f"{kind.__name__}.{field.name}: {error}") from None
        values[field.name] = value
    if found != len(data) and plan.shape.unknown is Unknown.ERROR:
        unknown = sorted(str(k) for k in data if k not in plan.known)
        if unknown:
            raise CodecError(f"{kind.__name__}: unknown keys {', '.join(unknown)}")
    if fixed:
        values.update(fixed)
    try:
        return kind(**values)
    except TypeError as error:  # a field the JSON cannot say (init=False), or __post_init__
        raise CodecError(f"{kind.__name__}: {error}") from None


def _brief(data: Any) -> str:
    return repr(data)[:200]


class Tagged(Generic[T]):
    """A union of dataclasses told apart by one key around the payload, `{"check": {...}}`.
    A tag may also fix fields of its type, left out of the payload (`{"usage_error": {...}}`
    is a WorkerProblem with usage=True)."""

    def __init__(self, variants: Mapping[str, type[Any] | tuple[type[Any], Mapping[str, Any]]]):
        self._decoders: dict[str, tuple[type[Any], Mapping[str, Any]]] = {}
        self._encoders: dict[type[Any], list[tuple[str, Mapping[str, Any]]]] = {}
        for tag, variant in variants.items():
            kind, fixed = variant if isinstance(variant, tuple) else (variant, {})
            self._decoders[tag] = (kind, fixed)
            self._encoders.setdefault(kind, []).append((tag, fixed))

    def encode(self, value: T) -> dict[str, Any]:
        for tag, fixed in self._encoders.get(type(value), ()):
            if all(getattr(value, name) == v for name, v in fixed.items()):
                payload = encode(value)
                for name in fixed:
                    payload.pop(name, None)
                return {tag: payload}
        raise TypeError(f"no tag for {value!r}")

    def decode(self, data: Any) -> T:
        """The first key's variant (a line has one)."""
        if not isinstance(data, Mapping) or not data:
            raise CodecError(f"expected one tagged object, got {_brief(data)}")
        tag, payload = next(iter(data.items()))
        if tag not in self._decoders:
            raise CodecError(f"unknown tag {tag!r}; known: {', '.join(self._decoders)}")
        kind, fixed = self._decoders[tag]
        if not fixed:
            return typing.cast(T, decode(kind, payload))
        return typing.cast(T, decode_object(kind, payload, fixed))


def _plan(kind: type) -> _Plan:
    plan = _PLANS.get(kind)
    shape = getattr(kind, "__codec__", PLAIN)
    if plan is None or plan.shape is not shape:
        plan = _PLANS[kind] = _make_plan(kind, shape)
    return plan


def _make_plan(kind: type, shape: Shape) -> _Plan:
    if not dataclasses.is_dataclass(kind):
        raise TypeError(f"{kind.__name__} is not a dataclass")
    hints = typing.get_type_hints(kind, include_extras=True)
    omit_none = shape.omit_none
    fields = []
    for f in dataclasses.fields(kind):
        if f.name in shape.skip or not f.init:
            continue
        encoder, decoder = (_pairs if f.name in shape.pairs else _converters)(hints[f.name])
        default: Callable[[], Any] | None = None
        if f.default is not dataclasses.MISSING:
            default = _constant(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory
        fields.append(
            _Field(
                name=f.name,
                key=shape.keys.get(f.name, f.name),
                encoder=encoder,
                decoder=decoder,
                required=default is None,
                default=None if _accepts_none(hints[f.name]) else default,
                omit_none=omit_none is True
                or (omit_none is not False and f.name in omit_none)
                or f.name == shape.alone,
                omit_empty=f.name in shape.omit_empty,
                old_keys=shape.old_keys.get(f.name, ()),
            )
        )
    names = [f.name for f in fields]
    omitted = () if isinstance(shape.omit_none, bool) else shape.omit_none
    named = (*shape.beside, *shape.omit_empty, *shape.pairs, *shape.keys, *shape.old_keys, *omitted)
    for name in (shape.alone, shape.derived_after, *named):
        if name is not None and name not in names and name not in shape.derived:
            raise TypeError(f"{kind.__name__}'s shape names {name!r}, which is not a field")
    alone = [f for f in fields if f.name in shape.beside or f.name == shape.alone]
    after = len(fields)
    if shape.derived and shape.derived_after is not None:
        after = names.index(shape.derived_after) + 1
    known = {f.key for f in fields} | {k for f in fields for k in f.old_keys}
    known |= {shape.keys.get(name, name) for name in shape.derived}
    head, tail = tuple(fields[:after]), tuple(fields[after:])
    return _Plan(shape, tuple(fields), tuple(alone), head, tail, frozenset(known))


def _constant(value: Any) -> Callable[[], Any]:
    return lambda: value


def _accepts_none(hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        return _accepts_none(typing.get_args(hint)[0])
    return hint is Any or (
        origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)
    )


def _converters(hint: Any) -> tuple[Convert | None, Convert | None]:
    """(encoder, decoder) of values of `hint`; None where a value is its own JSON."""
    try:
        return _TYPES[hint]
    except KeyError:
        pass
    except TypeError:  # an unhashable hint (Annotated with a dict): not cached
        return _make_converters(hint)
    found = _TYPES[hint] = _make_converters(hint)
    return found


_SCALARS = (str, int, bool, type(None))


def _make_converters(hint: Any) -> tuple[Convert | None, Convert | None]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any or hint is object or hint in _SCALARS or origin is typing.Literal:
        return (_plain if hint in (Any, object) else None), None
    if hint is float:
        return None, float
    if origin is typing.Annotated:
        tagged = next((a for a in args[1:] if isinstance(a, Tagged)), None)
        if tagged is not None:
            return tagged.encode, tagged.decode
        return _converters(args[0])
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum_value, hint
    if isinstance(hint, type) and issubclass(hint, Path):
        return str, Path
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if _own_form(hint):
            return _own_encoder, _own_decoder(hint)
        return encode_object, _decoder_of(hint)
    if origin in (typing.Union, types.UnionType):
        return _union(hint, args)
    if hint in (list, tuple, dict) or origin in (list, tuple, dict, Sequence, Mapping):
        return _container(hint, origin or hint, args)
    raise TypeError(f"the codec cannot carry {hint!r}")


def _enum_value(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value  # its value given as such


def _own_form(kind: type) -> bool:
    """A dataclass that keeps its own JSON form (`to_json`/`from_json` of its own, not the
    codec's: Check, whose words are written and whose older forms are read): it says it."""
    return not issubclass(kind, JsonData) and hasattr(kind, "to_json")


def _own_encoder(value: Any) -> Any:
    return value.to_json()


def _own_decoder(kind: type) -> Convert:
    decoder: Convert = getattr(kind, "from_json")  # noqa: B009 (not declared on `type`)
    return decoder


def _decoder_of(kind: type) -> Convert:
    return lambda data: decode_object(kind, data)


def _union(hint: Any, args: tuple[Any, ...]) -> tuple[Convert | None, Convert | None]:
    rest = [a for a in args if a is not type(None)]
    if len(rest) == 1:  # X | None
        encoder, decoder = _converters(rest[0])
        return _or_none(encoder), _or_none(decoder)
    if all(a in _SCALARS or a is float for a in rest):
        return None, None
    raise TypeError(
        f"the codec cannot tell {hint!r} apart: say how with Annotated[..., Tagged({{...}})]"
    )


def _or_none(convert: Convert | None) -> Convert | None:
    if convert is None:
        return None
    return lambda value: None if value is None else convert(value)


def _container(hint: Any, origin: Any, args: tuple[Any, ...]) -> tuple[Convert, Convert]:
    if origin in (dict, Mapping):
        key_type, value_type = args or (str, Any)
        return _dict(key_type, value_type)
    if origin is tuple and args and args[-1] is not Ellipsis:
        return _fixed_tuple(hint, args)
    item_encoder, item_decoder = _converters(args[0] if args else Any)
    make = tuple if origin is tuple else list

    def encoder(value: Sequence[Any]) -> list[Any]:
        return list(value) if item_encoder is None else [item_encoder(v) for v in value]

    def decoder(data: Any) -> Any:
        if not isinstance(data, list):
            raise CodecError(f"expected a list, got {_brief(data)}")
        return make(data if item_decoder is None else [item_decoder(v) for v in data])

    return encoder, decoder


def _fixed_tuple(hint: Any, args: tuple[Any, ...]) -> tuple[Convert, Convert]:
    converters = [_converters(a) for a in args]

    def encoder(value: tuple[Any, ...]) -> list[Any]:
        return [v if e is None else e(v) for (e, _), v in zip(converters, value, strict=True)]

    def decoder(data: Any) -> tuple[Any, ...]:
        if not isinstance(data, list) or len(data) != len(converters):
            raise CodecError(f"expected {hint!r}, got {_brief(data)}")
        return tuple(v if d is None else d(v) for (_, d), v in zip(converters, data, strict=True))

    return encoder, decoder


def _dict(key_type: Any, value_type: Any) -> tuple[Convert, Convert]:
    """JSON keys are strings: an enum key is written as its value, a number as its text."""
    value_encoder, value_decoder = _converters(value_type)
    key_decoder = None if key_type is str else _converters(key_type)[1] or key_type

    def encoder(value: Mapping[Any, Any]) -> dict[str, Any]:
        return {_key(k): v if value_encoder is None else value_encoder(v) for k, v in value.items()}

    def decoder(data: Any) -> dict[Any, Any]:
        if not isinstance(data, Mapping):
            raise CodecError(f"expected an object, got {_brief(data)}")
        if key_decoder is None and value_decoder is None:
            return dict(data)
        return {
            k if key_decoder is None else key_decoder(k): v
            if value_decoder is None
            else value_decoder(v)
            for k, v in data.items()
        }

    return encoder, decoder


def _key(key: Any) -> str:
    return key.value if isinstance(key, enum.Enum) else str(key)


def _pairs(hint: Any) -> tuple[Convert | None, Convert | None]:
    """A dict written as [key, value] pairs, its keys keeping their JSON type."""
    key_type, value_type = typing.get_args(hint) or (Any, Any)
    pair_encoder, pair_decoder = _fixed_tuple(hint, (key_type, value_type))

    def encoder(value: Mapping[Any, Any]) -> list[list[Any]]:
        return [pair_encoder(item) for item in value.items()]

    def decoder(data: Any) -> dict[Any, Any]:
        if not isinstance(data, list):
            raise CodecError(f"expected a list of pairs, got {_brief(data)}")
        return dict(pair_decoder(item) for item in data)

    return encoder, decoder


def _plain(value: Any) -> Any:
    """A value of no declared type (`Any`) made JSON: what asdict and json.dumps make of it."""
    if isinstance(value, str | int | float | type(None)):
        return value.value if isinstance(value, enum.Enum) else value
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return encode_object(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):  # keys as json.dumps writes them, but an enum's its value
        return {k.value if isinstance(k, enum.Enum) else k: _plain(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    return value  # json.dumps says what it cannot carry
