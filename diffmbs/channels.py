"""Sensor channels: one scalar signal of a simulation's sensors, named ``"name"`` for a scalar
sensor or ``"name[k]"`` for component ``k`` of a vector sensor (an accelerometer's three axes,
a reaction's six components; a matrix sensor's entries in row-major order).

Sensors come as :meth:`~diffmbs.system.MechanicalSystem.sensors` gives them: ``{name: array}``
with each array of shape ``lead + sensor_shape`` (``lead`` e.g. ``(n_t,)`` for a time history,
``()`` for one state).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
from jaxtyping import Array

__all__ = ["channel", "channel_names", "check_channel", "flat_channels", "parse_channel"]

_CHANNEL = re.compile(r"^(?P<name>[^\[\]]+)(\[(?P<index>\d+)\])?$")


def parse_channel(channel: str) -> tuple[str, int | None]:
    """``"tip[2]"`` → ``("tip", 2)``; ``"tip"`` → ``("tip", None)``."""
    match = _CHANNEL.match(channel) if isinstance(channel, str) else None
    if match is None:
        raise ValueError(f"sensor channel {channel!r}: expected 'name' or 'name[k]'")
    index = match["index"]
    return match["name"], None if index is None else int(index)


def channel_names(shapes: Mapping[str, tuple[int, ...]]) -> list[str]:
    """Every channel of sensors of the given shapes (``{name: sensor_shape}``): the name of a
    scalar sensor, ``name[k]`` for each component of a vector one."""
    out = []
    for name, shape in shapes.items():
        size = int(np.prod(shape))
        out += [name] if shape == () else [f"{name}[{k}]" for k in range(size)]
    return out


def check_channel(shapes: Mapping[str, tuple[int, ...]], channel: str) -> tuple[str, int | None]:
    """``(sensor name, index or None)`` of ``channel`` among sensors of the given shapes
    (``{name: sensor_shape}``). A missing sensor, an index out of range or of a scalar sensor,
    or a vector sensor without an index raises ``ValueError`` naming the channels that exist."""
    name, index = parse_channel(channel)
    shape = shapes.get(name)
    if shape is None or not (
        (index is None and shape == ())
        or (index is not None and shape != () and index < int(np.prod(shape)))
    ):
        valid = ", ".join(channel_names(shapes)) or "none"
        raise ValueError(f"sensor channel {channel!r} does not exist; the channels are {valid}")
    return name, index


def _shapes(sensors: Mapping[str, Array], lead: int) -> dict[str, tuple[int, ...]]:
    return {k: tuple(np.shape(v))[lead:] for k, v in sensors.items()}


def _select(values: Array, index: int | None, lead: int) -> Array:
    """Component ``index`` of the flattened sensor (row-major: a rotation matrix's (i, j) is
    ``3 i + j``), or the scalar sensor itself."""
    if index is None:
        return values
    flat = values.reshape(tuple(values.shape[:lead]) + (-1,))
    return flat[(slice(None),) * lead + (index,)]


def channel(sensors: Mapping[str, Array], channel: str, lead: int = 1) -> Array:
    """The signal of ``channel`` from ``sensors`` whose arrays have ``lead`` leading axes (1 for
    a time history ``(n_t, ...)``): shape ``(n_t,)`` then. The components of a vector or matrix
    sensor are its entries in row-major order. Errors as :func:`check_channel`."""
    name, index = check_channel(_shapes(sensors, lead), channel)
    return _select(sensors[name], index, lead)


def flat_channels(sensors: Mapping[str, Array], lead: int = 1) -> dict[str, Array]:
    """Every channel of ``sensors`` (arrays with ``lead`` leading axes) by name."""
    out = {}
    for name, shape in _shapes(sensors, lead).items():
        if shape == ():
            out[name] = sensors[name]
        else:
            for k in range(int(np.prod(shape))):
                out[f"{name}[{k}]"] = _select(sensors[name], k, lead)
    return out
