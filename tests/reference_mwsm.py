"""Independent NumPy/SciPy reference: lumped Medium-Weight Shock Machine and its SRS.

This module plays "a different simulator" in fitting studies and cross-checks. It is written
from the physics alone and imports neither diffmbs, identification nor JAX.

Model (SI units, vertical axis x pointing up)
--------------------------------------------
Four point masses: hammer (3000 lb), anvil (4500 lb), bed (90000 lb) and equipment
(``equipment_kg``). Coordinates: ``x_h`` hammer striking face, ``x_a`` underside of the anvil,
``x_b`` bed, ``x_e`` equipment. The bed springs are unstretched at ``x_b = 0``; the anvil touches
its lower stops at ``x_a = x_b`` and its upper stops at ``x_a = x_b + travel`` (3 in); the
channels (equipment mounting) are unstretched at ``x_e = x_a``; the hammer touches the anvil at
``x_h = x_a``.

Contacts are Hunt–Crossley, ``F = K δ^n max(1 + χ δ̇, 0)`` for penetration ``δ > 0`` and 0
otherwise, with ``n = 1.5``::

    F_imp = HC(x_h − x_a, ẋ_h − ẋ_a; K_imp, χ_imp)            hammer → anvil (pushes anvil up)
    F_low = HC(x_b − x_a, ẋ_b − ẋ_a; K_stop, χ_stop)          lower stops (pushes anvil up)
    F_up  = HC(x_a − x_b − travel, ẋ_a − ẋ_b; K_stop, χ_stop)  upper stops (pushes anvil down)
    F_ch  = k_ch (x_e − x_a) + c_ch (ẋ_e − ẋ_a),     c_ch  = 2 ζ_ch √(k_ch m_e)
    F_bed = k_bed x_b + c_bed ẋ_b,                   c_bed = 2 ζ_bed √(k_bed (m_b + m_a + m_e))

    m_h ẍ_h = −F_imp − m_h g
    m_a ẍ_a = F_imp + F_low − F_up + F_ch − m_a g
    m_b ẍ_b = −F_low + F_up − F_bed − m_b g
    m_e ẍ_e = −F_ch − m_e g

The initial state is the static equilibrium under gravity (bed sagging by
``(m_b + m_a + m_e) g / k_bed``, anvil resting on its lower stops with ``K_stop δ^n =
(m_a + m_e) g``, channels stretched by ``m_e g / k_ch``) with the hammer 1 mm below the anvil and
moving up at ``√(2 g h)``. The sensor is the equipment acceleration with the static (1 g) reading
of an accelerometer removed, i.e. ``ẍ_e = −F_ch/m_e − g``: 0 at rest, so that the SRS sees the
shock alone. (The specific force ``ẍ_e + g`` an accelerometer senses is this plus a constant g.)

Numerics (choices of this module)
---------------------------------
* Integrator: SciPy's ``DOP853`` (explicit 8th-order Runge–Kutta; the model is not stiff at these
  parameters, its fastest contact modes are a few kHz), ``rtol`` (default 1e-9) and absolute
  tolerances ``1e-3·rtol`` m on positions and ``rtol`` m/s on velocities.
* Contact onset and release are handled *exactly*, without any smoothing: the forces use
  ``max(δ, 0)^1.5`` and ``max(1 + χ δ̇, 0)``, and every place where one of these kinks is hit
  (``δ = 0`` or ``1 + χ δ̇ = 0`` of any of the three contacts) is located as a terminal
  ``solve_ivp`` event; the integration restarts there, so no Runge–Kutta step straddles a
  kink. On restart the event that fired is shifted by its (round-off sized) residual so that it
  cannot fire again at the restart point.
* Samples are taken on a uniform grid (default 20 kHz) from the integrator's dense output
  (``t_eval``); the acceleration is evaluated from the sampled state.

SRS: maximax absolute acceleration of a base-excited SDOF oscillator, computed with Smallwood's
ramp-invariant recursive filter (the exact response to the linearly interpolated record) through
``scipy.signal.lfilter``; the record is followed by a free-decay segment (base acceleration 0) of
one period of the lowest frequency plus 8 samples, so that the residual peak is included; and
the largest sample of ``|response|`` is refined by a parabola through it and its two neighbours
(at 20 samples per cycle this cuts the sampling error of the peak from up to 1.2 % to ~1e-4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.integrate
import scipy.signal

__all__ = ["PARAMETERS", "acceleration", "srs", "simulate_srs"]

PARAMETERS = (
    "k_channel",
    "zeta_channel",
    "k_impact",
    "chi_impact",
    "k_stop",
    "chi_stop",
    "k_bed",
    "zeta_bed",
)
"""Keys of the parameter dict, in the order used by fitting studies. Units:
``k_channel`` N/m, ``zeta_channel`` 1, ``k_impact`` N/m^1.5, ``chi_impact`` s/m,
``k_stop`` N/m^1.5, ``chi_stop`` s/m, ``k_bed`` N/m, ``zeta_bed`` 1."""

LB = 0.45359237  # kg
G = 9.80665  # m/s²
INCH = 0.0254  # m
FOOT = 0.3048  # m

HAMMER_KG = 3000.0 * LB
ANVIL_KG = 4500.0 * LB
BED_KG = 90000.0 * LB
TRAVEL = 3.0 * INCH  # m
EXPONENT = 1.5  # Hunt–Crossley exponent of impact and stops
HAMMER_GAP = 1e-3  # m, hammer below the anvil at t = 0


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class _Model:
    """Lumped MWSM constants (SI)."""

    m_h: float
    m_a: float
    m_b: float
    m_e: float
    k_ch: float
    c_ch: float
    k_imp: float
    chi_imp: float
    k_stop: float
    chi_stop: float
    k_bed: float
    c_bed: float
    n: float = EXPONENT


def _check_params(params: dict) -> dict[str, float]:
    out = {}
    for key in PARAMETERS:
        if key not in params:
            raise ValueError(f"missing parameter {key!r}")
        value = float(params[key])
        if not value > 0.0 or not math.isfinite(value):
            raise ValueError(f"parameter {key!r} must be positive and finite, got {value!r}")
        out[key] = value
    return out


def _model(
    params: dict,
    equipment_kg: float,
    *,
    allow_zero_damping: bool = False,
    exponent: float = EXPONENT,
) -> _Model:
    """Build the constants. ``allow_zero_damping`` admits ζ = χ = 0 (energy tests only);
    ``exponent``: the Hunt–Crossley exponent of impact and stops."""
    if allow_zero_damping:
        p = {key: float(params[key]) for key in PARAMETERS}
        for key in ("k_channel", "k_impact", "k_stop", "k_bed"):
            if not p[key] > 0:
                raise ValueError(f"parameter {key!r} must be positive, got {p[key]!r}")
    else:
        p = _check_params(params)
    if not equipment_kg > 0:
        raise ValueError(f"equipment_kg must be positive, got {equipment_kg!r}")
    m_e = float(equipment_kg)
    return _Model(
        m_h=HAMMER_KG,
        m_a=ANVIL_KG,
        m_b=BED_KG,
        m_e=m_e,
        k_ch=p["k_channel"],
        c_ch=2.0 * p["zeta_channel"] * math.sqrt(p["k_channel"] * m_e),
        k_imp=p["k_impact"],
        chi_imp=p["chi_impact"],
        k_stop=p["k_stop"],
        chi_stop=p["chi_stop"],
        k_bed=p["k_bed"],
        c_bed=2.0 * p["zeta_bed"] * math.sqrt(p["k_bed"] * (BED_KG + ANVIL_KG + m_e)),
        n=float(exponent),
    )


def _initial_state(m: _Model, hammer_speed: float, hammer_gap: float = HAMMER_GAP) -> np.ndarray:
    """Static equilibrium, hammer ``hammer_gap`` m below the anvil moving up at ``hammer_speed``.

    Returns ``y0 = [x_h, x_a, x_b, x_e, v_h, v_a, v_b, v_e]`` (m, m/s), shape (8,).
    """
    x_b = -(m.m_b + m.m_a + m.m_e) * G / m.k_bed
    delta = ((m.m_a + m.m_e) * G / m.k_stop) ** (1.0 / m.n)
    x_a = x_b - delta
    x_e = x_a - m.m_e * G / m.k_ch
    x_h = x_a - hammer_gap
    return np.array([x_h, x_a, x_b, x_e, hammer_speed, 0.0, 0.0, 0.0])


def _hunt_crossley(k: float, chi: float, d: float, dd: float, n: float = EXPONENT) -> float:
    if d <= 0.0:
        return 0.0
    factor = 1.0 + chi * dd
    return k * d**n * factor if factor > 0.0 else 0.0


def _rhs_factory(m: _Model):
    m_h, m_a, m_b, m_e = m.m_h, m.m_a, m.m_b, m.m_e
    k_ch, c_ch, k_bed, c_bed = m.k_ch, m.c_ch, m.k_bed, m.c_bed
    k_imp, chi_imp, k_stop, chi_stop = m.k_imp, m.chi_imp, m.k_stop, m.chi_stop
    n = m.n
    hc = lambda k, chi, d, dd: _hunt_crossley(k, chi, d, dd, n)  # noqa: E731

    def rhs(_t, y):
        x_h, x_a, x_b, x_e, v_h, v_a, v_b, v_e = y.tolist()
        f_imp = hc(k_imp, chi_imp, x_h - x_a, v_h - v_a)
        f_low = hc(k_stop, chi_stop, x_b - x_a, v_b - v_a)
        f_up = hc(k_stop, chi_stop, x_a - x_b - TRAVEL, v_a - v_b)
        f_ch = k_ch * (x_e - x_a) + c_ch * (v_e - v_a)
        f_bed = k_bed * x_b + c_bed * v_b
        return np.array(
            [
                v_h,
                v_a,
                v_b,
                v_e,
                -f_imp / m_h - G,
                (f_imp + f_low - f_up + f_ch) / m_a - G,
                (-f_low + f_up - f_bed) / m_b - G,
                -f_ch / m_e - G,
            ]
        )

    return rhs


def _kink_functions(m: _Model):
    """Scalar functions of the state whose zeros are the kinks of the contact forces."""
    fns = [
        lambda y: y[0] - y[1],  # impact penetration
        lambda y: y[2] - y[1],  # lower-stop penetration
        lambda y: y[1] - y[2] - TRAVEL,  # upper-stop penetration
    ]
    if m.chi_imp > 0:
        fns.append(lambda y, c=m.chi_imp: 1.0 + c * (y[4] - y[5]))
    if m.chi_stop > 0:
        fns.append(lambda y, c=m.chi_stop: 1.0 + c * (y[6] - y[5]))
        fns.append(lambda y, c=m.chi_stop: 1.0 + c * (y[5] - y[6]))
    return fns


def _trajectory(
    m: _Model, y0: np.ndarray, t_samples: np.ndarray, rtol: float, max_restarts: int = 10000
) -> np.ndarray:
    """Integrate from ``y0`` at ``t_samples[0]``; states at ``t_samples``, shape (n_t, 8)."""
    rhs = _rhs_factory(m)
    kinks = _kink_functions(m)
    atol = np.array([1e-3 * rtol] * 4 + [rtol] * 4)
    t_end = float(t_samples[-1])
    out = np.empty((len(t_samples), 8))
    out[0] = y0
    filled = 1
    t0, y = float(t_samples[0]), np.asarray(y0, dtype=float)
    offsets = [0.0] * len(kinks)
    for _ in range(max_restarts):
        events = []
        for i, fn in enumerate(kinks):
            ev = lambda t, yy, fn=fn, off=offsets[i]: fn(yy) - off
            ev.terminal = True
            events.append(ev)
        t_eval = t_samples[filled:]
        sol = scipy.integrate.solve_ivp(
            rhs,
            (t0, t_end),
            y,
            method="DOP853",
            t_eval=t_eval,
            events=events,
            rtol=rtol,
            atol=atol,
        )
        if sol.status == -1:
            raise RuntimeError(f"integration failed at t = {t0}: {sol.message}")
        n_new = sol.t.size
        out[filled : filled + n_new] = sol.y.T
        filled += n_new
        if sol.status == 0:
            break
        # terminal event: restart from the event state; shift the fired function by its residual
        # (and a hair towards the side it crossed to) so that it cannot fire again immediately.
        fired = next(i for i, te in enumerate(sol.t_events) if te.size)
        t0, y = float(sol.t_events[fired][0]), sol.y_events[fired][0]
        g = kinks[fired]
        value = g(y)
        side = 1.0 if g(y + 1e-9 * rhs(t0, y)) >= value else -1.0  # side it crosses to
        hair = 4.0 * float(np.spacing(abs(value))) + 1e-300
        offsets = [0.0] * len(kinks)
        offsets[fired] = value - side * hair
    else:
        raise RuntimeError("too many contact events")
    if filled != len(t_samples):
        raise RuntimeError("integration ended before the last sample")
    return out


def _sensor(m: _Model, y: np.ndarray) -> np.ndarray:
    """Equipment acceleration ``ẍ_e = −F_ch/m_e − g`` (m/s², 0 at rest) from states (..., 8)."""
    f_ch = m.k_ch * (y[..., 3] - y[..., 1]) + m.c_ch * (y[..., 7] - y[..., 5])
    return -f_ch / m.m_e - G


def _energy(m: _Model, y: np.ndarray) -> np.ndarray:
    """Total mechanical energy (J) of states of shape (..., 8): kinetic + gravity + springs +
    contact potentials ``K δ^(n+1) / (n+1)``. Conserved when all damping is zero."""
    x_h, x_a, x_b, x_e, v_h, v_a, v_b, v_e = np.moveaxis(y, -1, 0)
    masses = (m.m_h, m.m_a, m.m_b, m.m_e)
    kinetic = sum(0.5 * mi * v**2 for mi, v in zip(masses, (v_h, v_a, v_b, v_e), strict=True))
    gravity = G * sum(mi * x for mi, x in zip(masses, (x_h, x_a, x_b, x_e), strict=True))
    springs = 0.5 * m.k_bed * x_b**2 + 0.5 * m.k_ch * (x_e - x_a) ** 2
    n1 = m.n + 1.0
    contact = (
        m.k_imp * np.maximum(x_h - x_a, 0.0) ** n1
        + m.k_stop * np.maximum(x_b - x_a, 0.0) ** n1
        + m.k_stop * np.maximum(x_a - x_b - TRAVEL, 0.0) ** n1
    ) / n1
    return kinetic + gravity + springs + contact


def _time_grid(duration_s: float, sample_rate_hz: float) -> np.ndarray:
    if not duration_s > 0 or not sample_rate_hz > 0:
        raise ValueError("duration_s and sample_rate_hz must be positive")
    n = int(round(duration_s * sample_rate_hz)) + 1
    return np.arange(n) / sample_rate_hz


# --------------------------------------------------------------------------- public API


def acceleration(
    params: dict,
    *,
    drop_height_ft: float,
    equipment_kg: float = 475.0,
    duration_s: float = 0.1,
    sample_rate_hz: float = 20000.0,
    rtol: float = 1e-9,
    hammer_speed: float | None = None,
    hammer_gap_m: float = HAMMER_GAP,
    contact_exponent: float = EXPONENT,
) -> tuple[np.ndarray, np.ndarray]:
    """Equipment acceleration record of one MWSM blow.

    Args:
        params: dict with the keys of :data:`PARAMETERS` (units there), each positive.
        drop_height_ft: hammer drop height, ft; the hammer strikes at ``√(2 g h)``.
        equipment_kg: equipment mass, kg.
        duration_s: record length, s.
        sample_rate_hz: sample rate of the record, Hz.
        rtol: relative tolerance of the integrator (absolute tolerances: module docstring).
        hammer_speed: if given, overrides the hammer speed at t = 0, m/s (up positive).
        hammer_gap_m: hammer distance below the anvil at t = 0, m.
        contact_exponent: Hunt–Crossley exponent n of impact and stops (1.5: Hertz; another
            value makes data that the n = 1.5 model cannot match: a structural discrepancy).

    Returns:
        ``(t, a)``: times from 0 to ``duration_s`` in s and the equipment acceleration
        ``ẍ_e`` in m/s² (0 at rest: the accelerometer's static 1 g removed), both of shape
        ``(round(duration_s · sample_rate_hz) + 1,)``.
    """
    m = _model(params, equipment_kg, exponent=contact_exponent)
    if hammer_speed is None:
        if drop_height_ft < 0:
            raise ValueError(f"drop_height_ft must be non-negative, got {drop_height_ft!r}")
        hammer_speed = math.sqrt(2.0 * G * drop_height_ft * FOOT)
    t = _time_grid(duration_s, sample_rate_hz)
    y = _trajectory(m, _initial_state(m, hammer_speed, hammer_gap_m), t, rtol)
    return t, _sensor(m, y)


def _smallwood(freqs_hz: np.ndarray, dt: float, damping: float):
    """Smallwood ramp-invariant coefficients (b, a), each of shape (n_freq, 3)."""
    w = 2.0 * np.pi * freqs_hz
    wd = w * np.sqrt(1.0 - damping**2)
    e = np.exp(-damping * w * dt)
    k = wd * dt
    c = e * np.cos(k)
    s = e * np.sin(k) / k
    b = np.stack([1.0 - s, 2.0 * (s - c), e**2 - s], axis=-1)
    a = np.stack([np.ones_like(c), -2.0 * c, e**2], axis=-1)
    return b, a


def srs(t: np.ndarray, a: np.ndarray, freqs_hz, damping: float = 0.05) -> np.ndarray:
    """Maximax absolute-acceleration shock response spectrum.

    Args:
        t: uniformly spaced sample times, s, shape (n,).
        a: base acceleration at ``t``, any unit, shape (n,).
        freqs_hz: natural frequencies, Hz, shape (n_freq,), each below a tenth of the sample rate
            for a good peak estimate (below Nyquist is required).
        damping: damping ratio of the oscillators, 0 ≤ ζ < 1 (0.05 ⇔ Q = 10).

    Returns:
        Peak |absolute acceleration| of each oscillator over the record and its free decay
        (one period of the lowest frequency), in the unit of ``a``, shape (n_freq,).
    """
    t = np.asarray(t, dtype=float)
    a = np.asarray(a, dtype=float)
    freqs = np.atleast_1d(np.asarray(freqs_hz, dtype=float))
    if t.ndim != 1 or a.shape != t.shape or t.size < 3:
        raise ValueError("t and a must be 1-D of the same length (at least 3)")
    dt = (t[-1] - t[0]) / (t.size - 1)
    if not np.allclose(np.diff(t), dt, rtol=1e-6, atol=0):
        raise ValueError("t must be uniformly spaced")
    if np.any(freqs <= 0) or np.any(freqs >= 0.5 / dt):
        raise ValueError("frequencies must be positive and below Nyquist")
    if not 0.0 <= damping < 1.0:
        raise ValueError("damping must be in [0, 1)")
    n_tail = int(math.ceil(1.0 / (freqs.min() * dt))) + 8
    x = np.concatenate([a, np.zeros(n_tail)])
    b_all, a_all = _smallwood(freqs, dt, damping)
    out = np.empty(freqs.size)
    for i in range(freqs.size):
        y = np.abs(scipy.signal.lfilter(b_all[i], a_all[i], x))
        j = int(np.argmax(y))
        peak = y[j]
        if 0 < j < y.size - 1:
            y0, y1, y2 = y[j - 1], y[j], y[j + 1]
            curv = y0 - 2.0 * y1 + y2
            if curv < 0:
                peak = y1 - 0.125 * (y2 - y0) ** 2 / curv
        out[i] = peak
    return out


def simulate_srs(params: dict, freqs_hz, *, damping: float = 0.05, **kwargs) -> np.ndarray:
    """SRS of one blow: :func:`acceleration` (``kwargs`` go there) then :func:`srs`.

    Returns the maximax SRS in m/s², shape (len(freqs_hz),).
    """
    t, a = acceleration(params, **kwargs)
    return srs(t, a, freqs_hz, damping)
