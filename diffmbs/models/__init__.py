"""Lumped models of specific machines built on :class:`diffmbs.system.MechanicalSystem`.

* :mod:`diffmbs.models.mwsm` — vertical lumped models of the Medium Weight Shock Machine
  (MIL-DTL-901E): :class:`WelchSaundersModel`, :class:`TwoDofBedModel`,
  :class:`LumpedContactModel`.
"""

from diffmbs.models.mwsm import (
    FT,
    INCH,
    LB,
    G,
    LumpedContactModel,
    TwoDofBedModel,
    WelchSaundersModel,
    hammer_impact_speed,
)

__all__ = [
    "FT",
    "G",
    "INCH",
    "LB",
    "LumpedContactModel",
    "TwoDofBedModel",
    "WelchSaundersModel",
    "hammer_impact_speed",
]
