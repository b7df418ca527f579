"""Models of specific machines: lumped ones on :class:`diffmbs.system.MechanicalSystem` and
multibody ones built with :mod:`diffmbs.multibody`.

* :mod:`diffmbs.models.mwsm` — vertical lumped models of the Medium Weight Shock Machine
  (MIL-DTL-901E): :class:`WelchSaundersModel`, :class:`TwoDofBedModel`,
  :class:`LumpedContactModel`.
* :mod:`diffmbs.models.mwsm3d` — the 3-D machine (multibody, flexible channels).
* :mod:`diffmbs.models.slider_crank` — the 3-D slider-crank with a clearance joint.
* :mod:`diffmbs.models.four_bar` — the four-bar with a wearing clearance joint.
* :mod:`diffmbs.models.ship_gearbox` — the ship's double-helical reduction gearbox.
* :mod:`diffmbs.models.gear_rig` — a gear test rig whose load reverses (the gear fit's model).
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
