"""A measured wear profile: the radius of a worn bore (or journal) around its circumference
after many cycles, against :func:`diffmbs.wear.predict_wear` (../shared/SEEDS.md 003).

What a lab measures on a worn plain bearing, by a coordinate-measuring machine or a roundness
instrument, is a radius at angles around the surface. Here:

* ``surface="bore"``: the bore's radius minus the journal's nominal radius, ``c + h_bore(θ)``
  (m) — the radial clearance and the worn depth, so one profile speaks of both;
* ``surface="journal"``: the journal's loss of radius, ``h_journal(θ)`` (m).

``θ`` is the surface's angle in its body's frame (:class:`diffmbs.multibody.WearingClearance`'s
origin); on a joint whose maps run along the axis too
(:class:`~diffmbs.multibody.CrownedWearingClearance`) each point also has its axial position.
The prediction runs :func:`~diffmbs.wear.predict_wear` with its update lengths held
(``schedule``: a gradient needs them fixed), interpolates the map at the measured points and
compares linearly: ``r = w · (pred − meas) / scale``. With ``filter_upr`` the map is first
passed through the roundness instrument's Gaussian filter (:func:`diffmbs.wear.roundness_filter`,
the cut-off in undulations per revolution): a record filtered so is compared with the model
filtered alike, and the comparison converges in the map's cells, which the raw scar's peak
does not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from diffmbs.integrate import ForwardSensitivity
from diffmbs.wear import predict_wear, roundness_filter, wear_element
from identification._experiments import AbstractExperiment, _default_simulate_kwargs, _vector

__all__ = ["WearProfileExperiment"]

SURFACES = ("bore", "journal")


class WearProfileExperiment(AbstractExperiment):
    """A worn surface's profile (module docstring) after ``cycles`` periods of the model.

    **Arguments** (SI):

    - ``name``, ``model`` (a multibody model with a
      :class:`~diffmbs.multibody.WearingClearance` ``element``, started from
      ``model.initial_state()``);
    - ``angles`` ``(n,)`` rad and ``measured`` ``(n,)`` m: the profile; ``axial`` ``(n,)`` m
      the positions along the surface's axis from its centre, for a joint whose maps have
      them (:class:`~diffmbs.multibody.CrownedWearingClearance`; refused otherwise);
    - ``surface``: ``"bore"`` or ``"journal"``;
    - ``period`` (s, the motion's), ``schedule`` (the updates' cycles, adding up to the cycles
      worn), ``settle_cycles`` and ``cycles_per_update``: :func:`~diffmbs.wear.predict_wear`'s;
    - ``weights`` ``(n,)``, ``scale`` (m, default 1 µm: residuals in micrometres);
    - ``filter_upr``: the record's roundness filter (ISO 16610-21 Gaussian, cut-off in
      undulations per revolution; ``None``: the raw map);
    - ``simulate_kwargs``: :func:`diffmbs.simulate`'s (default ``throw=False`` and
      forward-mode derivatives under error control, :class:`diffmbs.ForwardSensitivity`: a
      journal riding its bore is quasi-static, and tangents carried along the state's steps
      are wrong there).
    """

    name: str = eqx.field(static=True)
    model: Any
    measured: Array
    angles: Array
    axial: Array | None
    weights: Array
    element: str = eqx.field(static=True)
    surface: str = eqx.field(static=True)
    period: float = eqx.field(static=True)
    schedule: tuple[int, ...] = eqx.field(static=True)
    settle_cycles: int = eqx.field(static=True)
    cycles_per_update: int = eqx.field(static=True)
    scale: float = eqx.field(static=True)
    filter_upr: float | None = eqx.field(static=True)
    simulate_kwargs: Mapping[str, Any] = eqx.field(static=True)

    def __init__(
        self,
        name: str,
        model: Any,
        element: str,
        angles: ArrayLike,
        measured: ArrayLike,
        *,
        period: float,
        schedule: Sequence[int],
        surface: str = "bore",
        settle_cycles: int = 2,
        cycles_per_update: int = 2,
        weights: ArrayLike | None = None,
        scale: float = 1e-6,
        simulate_kwargs: Mapping[str, Any] | None = None,
        axial: ArrayLike | None = None,
        filter_upr: float | None = None,
    ):
        self.name = name
        meas = _vector(measured, "measured", name)
        theta = _vector(angles, "angles", name, meas.size)
        if surface not in SURFACES:
            raise ValueError(f"experiment {name!r}: surface must be 'bore' or 'journal', "
                             f"got {surface!r}")  # fmt: skip
        schedule = tuple(int(n) for n in schedule)
        if not schedule or min(schedule) < cycles_per_update:
            least = f"each of at least cycles_per_update = {cycles_per_update}"
            raise ValueError(f"experiment {name!r}: schedule {schedule} needs one update or more, "
                             + least)  # fmt: skip
        if not (np.isfinite(period) and period > 0 and np.isfinite(scale) and scale > 0):
            raise ValueError(f"experiment {name!r}: period and scale must be positive, got "
                             f"{period}, {scale}")  # fmt: skip
        if filter_upr is not None and not (np.isfinite(filter_upr) and filter_upr > 0):
            raise ValueError(f"experiment {name!r}: filter_upr must be a positive number of "
                             f"undulations per revolution, got {filter_upr}")  # fmt: skip
        try:
            joint = wear_element(model, element)
        except ValueError as err:
            raise ValueError(f"experiment {name!r}: {err}") from None
        along = joint.axial_centres(surface) is not None
        if along != (axial is not None):
            wanted = "needs" if along else "takes no"
            raise ValueError(f"experiment {name!r}: the {type(joint).__name__} {element!r} "
                             f"{wanted} axial positions for its profile")  # fmt: skip
        self.axial = None if axial is None else jnp.asarray(_vector(axial, "axial", name,
                                                                    meas.size))  # fmt: skip
        self.model = model
        self.measured = jnp.asarray(meas)
        self.angles = jnp.asarray(theta)
        self.weights = (jnp.ones(meas.size) if weights is None
                        else jnp.asarray(_vector(weights, "weights", name, meas.size)))  # fmt: skip
        self.element = element
        self.surface = surface
        self.period = float(period)
        self.schedule = schedule
        self.settle_cycles = int(settle_cycles)
        self.cycles_per_update = int(cycles_per_update)
        self.scale = float(scale)
        self.filter_upr = None if filter_upr is None else float(filter_upr)
        self.simulate_kwargs = _default_simulate_kwargs({"adjoint": ForwardSensitivity(),
                                                       **(simulate_kwargs or {})})

    @property
    def cycles(self) -> int:
        return sum(self.schedule)

    @property
    def abscissa(self) -> np.ndarray:
        return np.degrees(np.asarray(self.angles))

    @property
    def abscissa_label(self) -> str:
        return f"Angle on the {self.surface} (°)"

    @property
    def in_db(self) -> bool:
        return False

    @property
    def units(self) -> str:
        return "m"

    def predict(self, model: Any) -> Array:
        q0, v0 = model.initial_state()
        worn = predict_wear(
            model, q0, v0, element=self.element, period=self.period, cycles=self.cycles,
            settle_cycles=self.settle_cycles, cycles_per_update=self.cycles_per_update,
            schedule=self.schedule, progress=False, **self.simulate_kwargs,
        )  # fmt: skip
        joint = wear_element(model, self.element)
        depth = worn.bore[-1] if self.surface == "bore" else worn.journal[-1]
        if self.filter_upr is not None:
            depth = roundness_filter(depth, self.filter_upr)
        depth = joint.depth_at(self.surface, depth, self.angles, self.axial)
        return joint.clearance + depth if self.surface == "bore" else depth

    def residuals_from_prediction(self, prediction: Array) -> Array:
        return self.weights * (prediction - self.measured) / self.scale
