"""Archard wear on a height map of a cylindrical surface (../shared/SEEDS.md 003).

A surface (a bearing's bore, a journal) carries a map of worn depth ``h`` (m, material removed)
over ``n`` equal cells of its angle; each cell wears as Archard's law wants,

    ḣ_k = k_w · p̄_k · |v_s|,

with ``k_w`` the dimensional wear coefficient (m²/N = 1/Pa), ``|v_s|`` the sliding speed (m/s)
and ``p̄_k`` the Hertz pressure (:mod:`diffmbs.hertz`: ``p₀ √(1 − x²/b²)`` across a strip of
half-width ``b``) averaged over the cell exactly (the integral of the semi-ellipse), so the
removed volume obeys Archard's ``V̇ = k_w P |v_s|`` to round-off however coarse the cells and
however narrow the strip. The worn depth at an angle between cell centres is interpolated
linearly and periodically (continuous, so the contact's gap is continuous as it moves).

These pieces (:func:`cell_pressures`, :func:`interpolate_periodic`) are those of
:class:`diffmbs.multibody.WearingClearance`, which integrates the maps as internal states of a
simulation; :class:`diffmbs.multibody.CrownedWearingClearance` (a 3-D journal that tilts) wears
maps over angle × axial position under Hertz's ellipse (:func:`ellipse_cell_pressures`,
:func:`interpolate_map`).

**Many cycles** (:func:`predict_wear`). A joint loses micrometres over 10⁵–10⁷ cycles; nobody
simulates them all. The rule (Tasora et al. simulate a few settled cycles and accumulate; the
extrapolation is the usual one of wear studies, e.g. Flores 2009):

1. simulate ``settle_cycles`` periods and discard the wear they made (the mechanism with
   clearance is not periodic; its first cycles carry the start's transient). Their end state
   is held constant under differentiation (no derivative is computed through them): a
   journal let go in its bore bounces, and its state after the bounces depends on the
   parameters in a way that says nothing about the settled motion, which forgets its start;
2. simulate ``cycles_per_update`` periods ``M`` from the current state: the maps change by
   ``Δh``, a rate of ``Δh / M`` per cycle;
3. extrapolate ``N_u`` cycles at that rate: ``h ← h₀ + N_u Δh/M``, with
   ``N_u = M ⌊(max_depth_step / max(Δh/M)) / M⌋`` clipped to ``[M, cycles left]``, so no cell
   deepens by more than ``max_depth_step`` (default 2 % of the clearance) per update — the step
   control: the worn profile changes the gap, hence the loads, and the rate is refreshed
   before the change matters; halving ``max_depth_step`` shows what the step costs
   (``benchmarks/``);
4. go on from the state the M cycles ended in, with the extrapolated maps, until ``cycles``.

**What a roundness instrument reads** (:func:`roundness_filter`). A worn scar can be sharper
than any map resolves (where the journal dwells, its Hertz strip is a fraction of a degree
wide, and the map's peak grows as the cells shrink); an instrument reads the profile through
the Gaussian filter of ISO 16610-21 at a cut-off in undulations per revolution (UPR; ISO
12181-2: 15, 50, 150 or 500). Compared through the same filter, a map converges in the cells
(the four-bar's bore at 50 UPR: 240 and 480 cells within 1.5 % of the scar's depth; unfiltered,
120, 240 and 480 cells put its deepest point at 0.89, 0.98 and 1.18 µm).

The updates' lengths (``schedule``) depend on values, so a gradient needs them fixed: run once,
then differentiate ``predict_wear(..., schedule=first.schedule)`` (every step a simulation with
the discrete adjoint, so memory stays bounded per update).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike
from tqdm.auto import tqdm

from diffmbs.integrate import simulate
from diffmbs.multibody._wear import (
    AbstractWearingJournal,
    cell_pressures,
    interpolate_periodic,
    wrap_angle,
)
from diffmbs.multibody._wear3d import ellipse_cell_pressures, interpolate_map

__all__ = [
    "WearPrediction",
    "cell_pressures",
    "ellipse_cell_pressures",
    "interpolate_map",
    "interpolate_periodic",
    "predict_wear",
    "roundness_filter",
    "wear_element",
    "wrap_angle",
]


def roundness_filter(depth: ArrayLike, upr: float) -> Array:
    """The map ``depth`` ``(n, ...)`` (m; cells around the surface first) through the Gaussian
    profile filter of ISO 16610-21 around the circumference with a cut-off of ``upr``
    undulations per revolution: the ``m``-th harmonic passes with ``exp(−ln 2 (m/upr)²)``
    (half at the cut-off), the mean (m = 0) whole. Same shape; linear, so differentiable."""
    depth = jnp.asarray(depth, float)
    if not (math.isfinite(upr) and upr > 0):
        raise ValueError(f"roundness_filter: the cut-off must be a positive number of "
                         f"undulations per revolution, got {upr!r}")  # fmt: skip
    harmonics = np.arange(depth.shape[0] // 2 + 1).reshape((-1,) + (1,) * (depth.ndim - 1))
    passed = jnp.asarray(np.exp(-math.log(2.0) * (harmonics / upr) ** 2))
    return jnp.fft.irfft(jnp.fft.rfft(depth, axis=0) * passed, depth.shape[0], axis=0)


class WearPrediction(NamedTuple):
    """:func:`predict_wear`'s result: ``cycles`` (u + 1,) the cycles worn after each update
    (0 first); ``bore`` and ``journal`` ``(u + 1, *map_shape)`` the worn depths (m) then
    (``(cells,)`` around a planar joint's surfaces, ``(cells, axial_cells)`` on a 3-D one's);
    ``schedule`` the updates' extrapolated cycles (pass it back to differentiate);
    ``simulated_cycles``: how many were simulated."""

    cycles: tuple[int, ...]
    bore: Array
    journal: Array
    schedule: tuple[int, ...]
    simulated_cycles: int


def predict_wear(
    model: Any,
    q0: ArrayLike,
    v0: ArrayLike,
    *,
    element: str,
    period: float,
    cycles: int,
    settle_cycles: int = 2,
    cycles_per_update: int = 4,
    max_depth_step: float | None = None,
    schedule: Sequence[int] | None = None,
    progress: bool = True,
    **simulate_options: Any,
) -> WearPrediction:
    """The worn maps of ``model``'s wearing joint ``element``
    (:class:`~diffmbs.multibody.WearingClearance`,
    :class:`~diffmbs.multibody.CrownedWearingClearance`) after ``cycles`` periods of ``period``
    (s), by the rule of the module docstring.

    ``q0``, ``v0``: the state at ``t = 0`` (the motion's drive must repeat every ``period``);
    ``model``'s held internal states (``with_internal_state``) are the start (new surfaces:
    zeros). ``schedule``: the updates' cycles from an earlier run (needed under ``jax.grad``);
    ``simulate_options``: :func:`diffmbs.simulate`'s (``rtol``, ``atol``, …).
    """
    maximal = getattr(model, "full", model)  # a model in joint coordinates holds one
    joint = wear_element(maximal, element)
    start = maximal.internal_slices()[element].start + joint.friction_states
    stop = start + 2 * joint.map_size  # the maps' rows in z (static)
    m = int(cycles_per_update)
    if cycles < m or m < 1 or settle_cycles < 0:
        raise ValueError(f"predict_wear: need cycles ≥ cycles_per_update ≥ 1 and "
                         f"settle_cycles ≥ 0, got {cycles}, {cycles_per_update}, "
                         f"{settle_cycles}")  # fmt: skip
    if schedule is not None and sum(schedule) != cycles:
        raise ValueError(f"predict_wear: the schedule's cycles add up to {sum(schedule)}, "
                         f"not to cycles = {cycles}")  # fmt: skip
    state = (jnp.asarray(q0, float), jnp.asarray(v0, float),
             jnp.asarray(model.initial_internal_state(), float))  # fmt: skip
    if settle_cycles:
        state = _settle(model, state, settle_cycles, period, (start, stop), simulate_options)
    if schedule is not None:
        plan = [(m, int(n)) for n in schedule]
        maps = _scheduled(model, state, *map(jnp.asarray, zip(*plan, strict=True)),
                          settle_cycles * period, period, (start, stop),
                          simulate_options)  # fmt: skip
        maps = jnp.concatenate([state[2][None, start:stop], maps])
        simulated = settle_cycles + m * len(schedule)
        return _prediction(maps, [int(n) for n in schedule], joint.map_shape, simulated)

    def update(state, t, n, length):
        numbers = (jnp.asarray(x, float) for x in (t, n * period, n, length))  # traced: one program
        return _update(model, state, *numbers, (start, stop), simulate_options)

    t = settle_cycles * period
    done, used, maps = 0, [], [state[2][start:stop]]
    bar = tqdm(total=cycles, disable=not progress, desc="wear", unit="cycle")
    try:
        while done < cycles:
            probe, per_cycle = update(state, t, m, 0)
            if isinstance(per_cycle, jax.core.Tracer):
                raise ValueError("predict_wear under a transformation (grad, vmap) needs "
                                 "schedule= from a run without it")  # fmt: skip
            fastest = float(np.max(np.asarray(per_cycle)))  # a concrete value: picks a length
            limit = 0.02 * float(joint.clearance) if max_depth_step is None else max_depth_step
            allowed = limit / fastest if fastest > 0 else math.inf
            length = int(min(max(m * math.floor(allowed / m), m), cycles - done))
            worn = state[2][start:stop] + length * per_cycle
            state = (probe[0], probe[1], probe[2].at[start:stop].set(worn))
            t += m * period
            used.append(length)
            done += length
            maps.append(worn)
            bar.update(length)
    finally:
        bar.close()
    return _prediction(jnp.stack(maps), used, joint.map_shape, settle_cycles + m * len(used))


def _prediction(maps, schedule, shape, simulated) -> WearPrediction:
    counts = tuple(int(c) for c in np.cumsum([0, *schedule]))
    n = math.prod(shape)
    bore, journal = (maps[:, :n].reshape(-1, *shape), maps[:, n:].reshape(-1, *shape))
    return WearPrediction(counts, bore, journal, tuple(schedule), simulated)


@eqx.filter_jit
def _update(model, state, t0, duration, simulated, extrapolated, rows, options):
    """One update of the module docstring from ``state = (q, v, z)`` at ``t0`` (s): simulate
    ``simulated`` cycles (``duration`` s), then set the maps (``z[rows[0]:rows[1]]``) to their
    start plus ``extrapolated`` cycles at the simulated rate. Returns ``(state, rate per
    cycle)``; one compiled program for every update and every ``t0``."""
    q, v, z = state
    start, stop = rows
    t0 = jnp.asarray(t0, float)
    sol = simulate(model.with_internal_state(z), q, v, jnp.stack([t0, t0 + duration]), **options)
    before = z[start:stop]
    rate = (sol.internal[-1][start:stop] - before) / simulated
    z = sol.internal[-1].at[start:stop].set(before + extrapolated * rate)
    return (sol.q[-1], sol.v[-1], z), rate


def _settle(model, state, cycles, period, rows, options):
    """The module docstring's rule 1: ``cycles`` periods from ``state`` at t = 0, the end state
    held constant under differentiation (computed from frozen parameters: no derivative is
    taken through it), the maps as they were (the wear of these periods is not kept)."""
    frozen = jax.tree.map(lambda x: jax.lax.stop_gradient(x) if eqx.is_inexact_array(x) else x,
                          (model, state))  # fmt: skip
    numbers = (jnp.asarray(x, float) for x in (0.0, cycles * period, cycles, 0))
    q, v, z = jax.lax.stop_gradient(_update(*frozen, *numbers, rows, options)[0])
    return q, v, z.at[rows[0] : rows[1]].set(state[2][rows[0] : rows[1]])


@eqx.filter_jit
def _scheduled(model, state, simulated, extrapolated, t_start, period, rows, options):
    """Every update of a known schedule, from ``state`` at ``t_start`` (s), in one
    ``lax.scan`` (one compiled simulation, one adjoint): the maps after each,
    ``(updates, 2 · cells)``."""
    t_starts = t_start + period * jnp.concatenate([jnp.zeros(1), jnp.cumsum(simulated)[:-1]])

    def step(carry, plan):
        t0, n, length = plan
        carry, _ = _update.__wrapped__(model, carry, t0, n * period, n, length, rows, options)
        return carry, carry[2][rows[0] : rows[1]]

    plans = (t_starts, simulated.astype(float), extrapolated.astype(float))
    return jax.lax.scan(step, state, plans)[1]


def wear_element(model: Any, name: str):
    """``model``'s wearing force element ``name`` (an
    :class:`~diffmbs.multibody.AbstractWearingJournal`; a model in joint coordinates: its full
    model's); a :class:`ValueError` names what is wrong."""
    model = getattr(model, "full", model)
    for group in getattr(model, "force_groups", ()):
        if name in group.names:
            member = group.member(group.names.index(name))
            if not isinstance(member, AbstractWearingJournal):
                raise ValueError(f"force element {name!r} is a {type(member).__name__}, not a "
                                 "wearing joint (WearingClearance, CrownedWearingClearance)")
            return member
    raise ValueError(f"no force element {name!r} in the model")
