"""Reading TOML tables with errors that name the key at fault.

Every reader takes the table, the key and ``where`` (the key path of the table, e.g.
``"experiments[1]"``) and raises :class:`ConfigError` with a one-line message starting with the
full key path: ``experiments[1].srs: file not found: ...``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ConfigError", "check_keys", "read_bool", "read_integer", "read_number", "read_string",
    "table_of",
]  # fmt: skip


class ConfigError(ValueError):
    """A job file problem; the message names the key at fault."""


def table_of(value: Any, where: str) -> Mapping[str, Any]:
    """``value`` if it is a table, else a :class:`ConfigError`."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: expected a table, got {type(value).__name__}")
    return value


def check_keys(table: Mapping[str, Any], allowed: set[str], where: str) -> None:
    """Refuse keys of ``table`` that are not in ``allowed``."""
    for key in table_of(table, where):
        if key not in allowed:
            raise ConfigError(
                f"{where}.{key}: unknown key; expected one of {', '.join(sorted(allowed))}"
            )


def is_number(x: Any) -> bool:
    """A finite int or float (not a bool)."""
    return not isinstance(x, bool) and isinstance(x, int | float) and math.isfinite(x)


def read_number(
    table: Mapping[str, Any], key: str, where: str, default: float | None = None, positive=True
) -> float:
    """``table[key]`` as a finite float (positive unless ``positive=False``); ``default`` when
    the key is absent (``None``: the key is required)."""
    if key not in table:
        if default is None:
            raise ConfigError(f"{where}.{key}: missing")
        return default
    value = table[key]
    if not is_number(value):
        raise ConfigError(f"{where}.{key}: expected a finite number, got {value!r}")
    if positive and value <= 0:
        raise ConfigError(f"{where}.{key}: must be positive, got {value!r}")
    return float(value)


def read_bool(table: Mapping[str, Any], key: str, where: str, default: bool) -> bool:
    """``table.get(key, default)``, which must be ``true`` or ``false``."""
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}.{key}: expected true or false, got {value!r}")
    return value


def read_integer(table: Mapping[str, Any], key: str, where: str, default: int, minimum: int) -> int:
    """``table.get(key, default)`` as an integer ``>= minimum``."""
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where}.{key}: expected an integer >= {minimum}, got {value!r}")
    return value


def read_string(table: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str:
    """``table[key]`` as a non-empty string; ``default`` when absent (``None``: required)."""
    value = table.get(key, default)
    if value is None:
        raise ConfigError(f"{where}.{key}: missing")
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}.{key}: expected a non-empty string, got {value!r}")
    return value
