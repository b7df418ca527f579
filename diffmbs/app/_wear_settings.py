"""The ``[wear]`` table of a job file: many cycles of a model with a
:class:`~diffmbs.multibody.WearingClearance` (``diffmbs wear``, and the ``profile``
experiments of ``diffmbs fit``)::

    [wear]
    element = "C"               # the WearingClearance force element
    period_s = 0.6              # the motion's period (the drive repeats every period_s)
    cycles = 1000000            # cycles worn
    settle_cycles = 2           # simulated first, their wear discarded
    cycles_per_update = 2       # simulated per update (the rate's window)
    max_depth_step_m = 4e-6     # diffmbs wear: no cell deepens more per update (2 % of c)
    updates = 4                 # fits: equal updates (a gradient needs their lengths held)

:func:`diffmbs.wear.predict_wear` documents the rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._tables import ConfigError, check_keys, read_integer, read_number, read_string

__all__ = ["WearSettings"]


@dataclass(frozen=True)
class WearSettings:
    """``[wear]`` (module docstring); ``max_depth_step_m`` ``None``: 2 % of the clearance."""

    element: str
    period_s: float
    cycles: int
    settle_cycles: int = 2
    cycles_per_update: int = 2
    max_depth_step_m: float | None = None
    updates: int = 4

    @classmethod
    def from_table(cls, table: Mapping[str, Any], where: str = "wear") -> WearSettings:
        keys = {"element", "period_s", "cycles", "settle_cycles", "cycles_per_update",
                "max_depth_step_m", "updates"}  # fmt: skip
        check_keys(table, keys, where)
        if "cycles" not in table:
            raise ConfigError(f"{where}.cycles: missing")
        settings = cls(
            element=read_string(table, "element", where),
            period_s=read_number(table, "period_s", where),
            cycles=read_integer(table, "cycles", where, None, 1),
            settle_cycles=read_integer(table, "settle_cycles", where, cls.settle_cycles, 0),
            cycles_per_update=read_integer(table, "cycles_per_update", where,
                                           cls.cycles_per_update, 1),  # fmt: skip
            max_depth_step_m=(read_number(table, "max_depth_step_m", where)
                              if "max_depth_step_m" in table else None),  # fmt: skip
            updates=read_integer(table, "updates", where, cls.updates, 1),
        )
        if settings.cycles < settings.updates * settings.cycles_per_update:
            raise ConfigError(
                f"{where}.cycles: {settings.cycles} cycles cannot make {settings.updates} "
                f"updates of at least cycles_per_update = {settings.cycles_per_update}"
            )
        return settings

    def schedule(self) -> tuple[int, ...]:
        """``updates`` equal update lengths adding up to ``cycles`` (the first ones one longer
        where they do not divide): what a fit holds."""
        base, extra = divmod(self.cycles, self.updates)
        return tuple(base + (k < extra) for k in range(self.updates))
