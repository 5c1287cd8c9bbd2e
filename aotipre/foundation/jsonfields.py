"""Typed fields of parsed JSON (a report read back by `aotipre merge`): the value of a key when it
has the expected type, else one ValueError naming the key, never a crash later in a renderer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MISSING: Any = object()
"""No default: the key is required."""


def obj(value: Any, where: str) -> Mapping[str, Any]:
    """`value` when it is a JSON object."""
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected an object, got {_kind(value)}")
    return value


def text(data: Mapping[str, Any], key: str, default: Any = MISSING) -> str:
    return _take(data, key, default, str, "a string")  # type: ignore[no-any-return]


def opt_text(data: Mapping[str, Any], key: str) -> str | None:
    return _take(data, key, None, str, "a string or null", nullable=True)  # type: ignore[no-any-return]


def integer(data: Mapping[str, Any], key: str, default: Any = MISSING) -> int:
    value = _take(data, key, default, int, "an integer")
    if isinstance(value, bool):
        raise ValueError(f"{key}: expected an integer, got a boolean")
    return value  # type: ignore[no-any-return]


def opt_integer(data: Mapping[str, Any], key: str) -> int | None:
    value = _take(data, key, None, int, "an integer or null", nullable=True)
    if isinstance(value, bool):
        raise ValueError(f"{key}: expected an integer or null, got a boolean")
    return value  # type: ignore[no-any-return]


def number(data: Mapping[str, Any], key: str, default: Any = MISSING) -> float | int:
    """An integer or a float, as the JSON has it (an integer stays one)."""
    value = _take(data, key, default, (int, float), "a number")
    if isinstance(value, bool):
        raise ValueError(f"{key}: expected a number, got a boolean")
    return value  # type: ignore[no-any-return]


def opt_number(data: Mapping[str, Any], key: str) -> float | int | None:
    value = _take(data, key, None, (int, float), "a number or null", nullable=True)
    if isinstance(value, bool):
        raise ValueError(f"{key}: expected a number or null, got a boolean")
    return value  # type: ignore[no-any-return]


def flag(data: Mapping[str, Any], key: str, default: Any = MISSING) -> bool:
    return _take(data, key, default, bool, "true or false")  # type: ignore[no-any-return]


def texts(data: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """A list of strings as a tuple (missing: empty)."""
    values = _take(data, key, [], list, "a list of strings")
    if not all(isinstance(v, str) for v in values):
        raise ValueError(f"{key}: expected a list of strings")
    return tuple(values)


def integers(data: Mapping[str, Any], key: str) -> tuple[int, ...]:
    """A list of integers as a tuple (missing: empty)."""
    values = _take(data, key, [], list, "a list of integers")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise ValueError(f"{key}: expected a list of integers")
    return tuple(values)


def objects(
    data: Mapping[str, Any], key: str, *, required: bool = False
) -> list[Mapping[str, Any]]:
    """A list of objects (missing: empty, unless `required`)."""
    values = _take(data, key, MISSING if required else [], list, "a list of objects")
    return [obj(v, f"{key}[{i}]") for i, v in enumerate(values)]


def mapping(data: Mapping[str, Any], key: str, default: Any = MISSING) -> dict[str, Any]:
    return _take(data, key, default, dict, "an object")  # type: ignore[no-any-return]


def opt_mapping(data: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    return _take(data, key, None, dict, "an object or null", nullable=True)  # type: ignore[no-any-return]


def _take(
    data: Mapping[str, Any],
    key: str,
    default: Any,
    kind: type | tuple[type, ...],
    said: str,
    *,
    nullable: bool = False,
) -> Any:
    if key not in data:
        if default is MISSING:
            raise ValueError(f"no {key!r}")
        return default
    value = data[key]
    if value is None and nullable:
        return None
    if not isinstance(value, kind):
        raise ValueError(f"{key}: expected {said}, got {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)
