"""What every acceleration record is, whatever file it came from: :class:`AccelerationRecord`
(channels in m/s², a uniform step), the accepted units and the checks of a time grid. Shared
by the CSV and AT2 readers (:mod:`diffmbs.io`) and the lab formats
(:mod:`diffmbs._lab_formats`); :mod:`diffmbs.io` re-exports the public names."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["ACCELERATION_UNITS", "SAMPLING_TOLERANCE", "STANDARD_GRAVITY", "TIME_UNITS",
           "UNIT_NAMES", "AccelerationRecord", "acceleration_scale", "column_unit",
           "time_unit_scale"]  # fmt: skip

STANDARD_GRAVITY = 9.80665
"""Standard acceleration of gravity g₀, m/s² (exact, by definition)."""

ACCELERATION_UNITS: dict[str, float] = {
    "m/s2": 1.0, "g": STANDARD_GRAVITY, "mg": 1e-3 * STANDARD_GRAVITY, "cm/s2": 0.01,
    "ft/s2": 0.3048, "in/s2": 0.0254,
}  # fmt: skip
"""Accepted acceleration units and their size in m/s² (the foot and inch are the international
ones, 0.3048 m and 0.0254 m exactly)."""

SAMPLING_TOLERANCE = 1e-6
"""Largest accepted relative spread (max − min)/mean of the time steps of a record."""


@dataclass(frozen=True)
class AccelerationRecord:
    """A uniformly sampled, multi-channel acceleration record.

    Attributes:
        name: a label for the record, usually the file stem.
        dt: sample interval, s.
        channels: channel name → acceleration, m/s², each of shape ``(n_samples,)``.
        time: sample times, s, shape ``(n_samples,)``.
        source_unit: the unit the file was written in (a key of :data:`ACCELERATION_UNITS`;
            ``"mixed"`` for a file whose channels state different units); the channels are in
            m/s² regardless.
    """

    name: str
    dt: float
    channels: dict[str, np.ndarray]
    time: np.ndarray
    source_unit: str = "m/s2"

    @property
    def sample_rate(self) -> float:
        """Sample rate 1/dt, Hz."""
        return 1.0 / self.dt


def acceleration_scale(unit: str) -> float:
    """Size of one ``unit`` in m/s² (``"m/s2"`` → 1, ``"g"`` → 9.80665)."""
    try:
        return ACCELERATION_UNITS[unit]
    except KeyError:
        known = ", ".join(repr(u) for u in ACCELERATION_UNITS)
        raise ValueError(f"unknown acceleration unit {unit!r}; use one of {known}") from None


UNIT_NAMES = {
    "g": "g", "g0": "g", "gn": "g",
    "mg": "mg", "milli-g": "mg", "millig": "mg",
    "m/s2": "m/s2", "m/s^2": "m/s2", "m/s²": "m/s2", "m s-2": "m/s2", "m/s/s": "m/s2",
    "m*s^-2": "m/s2", "mps2": "m/s2",
    "cm/s2": "cm/s2", "cm/s^2": "cm/s2", "cm/s²": "cm/s2", "gal": "cm/s2",
    "ft/s2": "ft/s2", "ft/s^2": "ft/s2", "ft/s²": "ft/s2", "ft/s/s": "ft/s2",
    "in/s2": "in/s2", "in/s^2": "in/s2", "in/s²": "in/s2", "in/s/s": "in/s2",
}  # fmt: skip
"""Unit labels files carry (lower case, spaces trimmed) → :data:`ACCELERATION_UNITS`."""

# The last word of a column name, after a separator, in brackets or not: ``top_g``,
# ``accel [g]``, ``a (m/s^2)``.
_LAST_WORD = re.compile(r"(?:^|[_\s\[(])([^_\s\[\]()]+)([\])])?\s*$")


def column_unit(name: str) -> str | None:
    """The acceleration unit a column's name ends with (``equipment_g`` → ``"g"``,
    ``a [m/s^2]`` → ``"m/s2"``: :data:`UNIT_NAMES`), or ``None`` when it states none
    (``accel``, ``leg``). A last word in brackets is a stated unit: one that is not an
    acceleration unit (``a [V]``, ``a (km/h)``) is a ``ValueError`` naming the column, never a
    silent m/s²."""
    match = _LAST_WORD.search(name.strip())
    if match is None:
        return None
    unit = UNIT_NAMES.get(match.group(1).lower())
    if unit is None and match.group(2):
        known = ", ".join(sorted(UNIT_NAMES))
        raise ValueError(f"column {name!r} states the unit {match.group(1)!r}, which is not an "
                         f"acceleration unit diffmbs reads ({known}); convert the column or "
                         "rename it")  # fmt: skip
    return unit


def _existing_file(path) -> Path:
    path = Path(path)
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "does not exist"
        raise ValueError(f"{path}: {what}")
    return path


def _check_uniform_time(
    path: Path, name: str, time: np.ndarray, what: str = "time column"
) -> float:
    """Return dt after checking that ``time`` increases strictly and uniformly; errors name
    ``what`` and ``name`` ("time column 't'", "the time of channel 'top'")."""
    steps = np.diff(time)
    if np.any(steps <= 0):
        i = int(np.argmax(steps <= 0))
        raise ValueError(
            f"{path}: {what} {name!r} is not strictly increasing: row {i + 2} has "
            f"{float(time[i + 1]):.9g} s after {float(time[i]):.9g} s in row {i + 1}"
        )
    dt = (time[-1] - time[0]) / (time.size - 1)
    spread = (steps.max() - steps.min()) / dt
    if spread > SAMPLING_TOLERANCE:
        i = int(np.argmax(np.abs(steps - dt)))
        raise ValueError(
            f"{path}: {what} {name!r} is not uniformly sampled: the step from row {i + 1} "
            f"to row {i + 2} is {float(steps[i]):.9g} s against a mean of {float(dt):.9g} s "
            "(relative spread "
            f"{spread:.3g}, allowed {SAMPLING_TOLERANCE:g}); resample the record, or write the "
            f"times with more significant digits"
        )
    return float(dt)


TIME_UNITS = {
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "ms": 1e-3, "msec": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
    "us": 1e-6, "µs": 1e-6, "usec": 1e-6, "microsecond": 1e-6, "microseconds": 1e-6,
    "ns": 1e-9, "min": 60.0, "minute": 60.0, "minutes": 60.0,
}  # fmt: skip
"""Units a time column's name may end with (``time_ms``, ``t [us]``, ``Time (s)``): s per unit."""


def time_unit_scale(name: str) -> float:
    """Seconds per unit of a time column, from the unit its name ends with (:data:`TIME_UNITS`;
    ``time_ms`` → 1e-3); a name without a unit (``time``, ``t``) is in seconds. A last word in
    brackets that is not a time unit (``t [samples]``) is a ``ValueError`` naming the column."""
    tokens = [t for t in re.split(r"[_\s\[\]()/]+", name.strip().lower()) if t]
    if not tokens:
        return 1.0
    if tokens[-1] not in TIME_UNITS and name.strip()[-1:] in ")]":
        raise ValueError(f"time column {name!r} states the unit {tokens[-1]!r}, which is not a "
                         f"time unit diffmbs reads ({', '.join(TIME_UNITS)})")  # fmt: skip
    return TIME_UNITS.get(tokens[-1], 1.0)
