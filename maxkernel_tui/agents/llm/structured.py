"""Structured (JSON) output: parse, validate against the request's schema, and re-ask.

The validator covers the part of JSON Schema that output schemas use: `type` (one or a list),
`properties`, `required`, `additionalProperties: false`, `items`, `enum`, `minItems`,
`maxItems`, `minimum`, `maximum`. Other keywords are accepted and not checked. Errors name the
path (`$.plan[2].tile`) so that the model can fix its answer when re-asked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from maxkernel_tui.agents.llm.types import Message, Speaker

_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}

# Models like to wrap JSON in a Markdown fence even when asked not to; that much we forgive.
_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n(.*)\n\s*```\s*$", re.DOTALL)


def parse_json(text: str) -> Any:
    match = _FENCE.match(text)
    try:
        return json.loads(match.group(1) if match else text)
    except json.JSONDecodeError as e:
        raise ValueError(f"the answer is not valid JSON: {e}") from None


def _type_name(value: Any) -> str:
    return next(
        (name for name, test in _JSON_TYPES.items() if name != "number" and test(value)), "number"
    )


def validate(value: Any, schema: dict[str, Any], path: str = "$") -> None:
    """Raise ValueError naming the first place where `value` breaks `schema`."""
    expected = schema.get("type")
    if expected is not None:
        names = expected if isinstance(expected, list) else [expected]
        if not any(_JSON_TYPES.get(name, lambda v: True)(value) for name in names):
            raise ValueError(f"{path}: expected {' or '.join(names)}, got {_type_name(value)}")
    if (allowed := schema.get("enum")) is not None and value not in allowed:
        raise ValueError(f"{path}: {value!r} is not one of {allowed!r}")
    if isinstance(value, dict):
        _validate_object(value, schema, path)
    elif isinstance(value, list):
        _validate_array(value, schema, path)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        _validate_number(value, schema, path)


def _validate_array(value: list[Any], schema: dict[str, Any], path: str) -> None:
    if len(value) < (least := schema.get("minItems", 0)):
        raise ValueError(f"{path}: needs at least {least} items, has {len(value)}")
    if (most := schema.get("maxItems")) is not None and len(value) > most:
        raise ValueError(f"{path}: allows at most {most} items, has {len(value)}")
    if isinstance(items := schema.get("items"), dict):
        for i, item in enumerate(value):
            validate(item, items, f"{path}[{i}]")


def _validate_number(value: float, schema: dict[str, Any], path: str) -> None:
    if (minimum := schema.get("minimum")) is not None and value < minimum:
        raise ValueError(f"{path}: {value} is below the minimum {minimum}")
    if (maximum := schema.get("maximum")) is not None and value > maximum:
        raise ValueError(f"{path}: {value} is above the maximum {maximum}")


def _validate_object(value: dict[str, Any], schema: dict[str, Any], path: str) -> None:
    properties = schema.get("properties", {})
    missing = [key for key in schema.get("required", []) if key not in value]
    if missing:
        raise ValueError(f"{path}: missing required {', '.join(map(repr, missing))}")
    if schema.get("additionalProperties") is False:
        extra = [key for key in value if key not in properties]
        if extra:
            raise ValueError(f"{path}: unexpected {', '.join(map(repr, extra))}")
    for key, sub in properties.items():
        if key in value and isinstance(sub, dict):
            validate(value[key], sub, f"{path}.{key}")


def json_parser(schema: dict[str, Any]) -> Callable[[str], Any]:
    """The default parser of a request with a JSON schema: parse, then validate."""

    def parse(text: str) -> Any:
        value = parse_json(text)
        validate(value, schema)
        return value

    return parse


def reask_messages(raw: str, error: str) -> tuple[Message, Message]:
    """The two turns appended to re-ask: the unusable answer, and why it was unusable."""
    return (
        Message(Speaker.ASSISTANT, raw),
        Message(
            Speaker.USER,
            f"Your previous answer could not be used: {error}\n"
            "Answer again and fix that, in exactly the format that was asked for.",
        ),
    )
