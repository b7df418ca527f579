"""Lumped vertical models of the Medium Weight Shock Machine (MWSM, MIL-DTL-901E).

Three models of increasing fidelity, all :class:`~diffmbs.system.MechanicalSystem` modules whose
float fields are parameters (pytree leaves: differentiable, batchable) in SI units (kg, m, s, N).
Coordinates are vertical, positive **upwards**. Conversions from the machine data in lb / in / ft
happen only in the ``from_machine`` constructor helpers and :func:`hammer_impact_speed`.

* :class:`WelchSaundersModel` (Welch & Saunders 1968): no impact force; the anvil starts with the
  post-impact velocity from momentum balance and restitution, then a 2-DOF anvil + equipment
  system (channels as a linear spring–damper).
* :class:`TwoDofBedModel` (after Alexander 2016): damped 2-DOF, anvil+equipment lumped on the bed,
  bed on springs, Rayleigh damping with the same ratio (4–5 %) in both modes, initial anvil
  velocity 0.545 × hammer speed (NRL data).
* :class:`LumpedContactModel`: hammer, anvil table, bed and equipment, with Hunt–Crossley
  hammer–anvil impact and anvil stops, bed springs, channels, gravity.

Default values and their sources (SEEDS.md section 002 unless said otherwise):

* hammer 3,000 lb, anvil table 4,500 lb, bed 90,000 lb, anvil travel 3 in (1.5 in reduced),
  drop height 2 ft, equipment 325 kg (the rigid block of test 1 in SEEDS.md);
* impact speed ``v0 = sqrt(2 g h)`` — the hammer as a point-mass pendulum released from rest
  ``h`` above the impact point (no friction or air drag): 3.458 m/s for 2 ft;
* damping ratio 4.5 % — Alexander 2016 (4–5 % on the 2-DOF model);
* initial anvil velocity 0.545 × v0 — NRL data (quoted in the brief);
* hammer–anvil restitution ``e = 0.3625``: *derived*, the value for which the momentum balance
  ``m_h (1 + e) / (m_h + m_a)`` with 3,000 lb / 4,500 lb gives that NRL ratio 0.545;
* **engineering assumptions** (no machine data available): channel (equipment mounting)
  frequency 60 Hz, bed-on-springs frequency 3 Hz, anvil-on-bed frequency in the 2-DOF model
  60 Hz, Hertzian contact stiffnesses (hammer–anvil 5e10 N/m^1.5, i.e. steel on steel with an
  effective radius of about 0.1 m; stops 1e11 N/m^1.5), stop restitution 0.5, contact smoothing
  length 1e-6 m, hammer placed 1 mm below the anvil at the start.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike

from diffmbs.contact import OneSidedStop, damping_from_restitution
from diffmbs.system import MechanicalSystem

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

LB = 0.45359237
"""kg per pound (avoirdupois, exact)."""
INCH = 0.0254
"""m per inch (exact)."""
FT = 0.3048
"""m per foot (exact)."""
G = 9.80665
"""Standard gravity (m/s², exact)."""

# Machine data (SEEDS.md section 002), in the units of the source.
HAMMER_LB = 3000.0
ANVIL_LB = 4500.0
BED_LB = 90000.0
TRAVEL_IN = 3.0  # full travel; 1.5 in for reduced travel
DROP_HEIGHT_FT = 2.0  # test 1 of SEEDS.md
EQUIPMENT_KG = 325.0  # rigid block of test 1
DAMPING_RATIO = 0.045  # Alexander 2016: 4–5 %
NRL_VELOCITY_RATIO = 0.545  # NRL: initial anvil velocity / hammer impact speed
NRL_RESTITUTION = NRL_VELOCITY_RATIO * (HAMMER_LB + ANVIL_LB) / HAMMER_LB - 1.0  # 0.3625
# Engineering assumptions (not machine data):
CHANNEL_HZ = 60.0
BED_HZ = 3.0
ANVIL_ON_BED_HZ = 60.0
HAMMER_CONTACT_K = 5e10  # N/m^1.5
STOP_CONTACT_K = 1e11  # N/m^1.5
STOP_RESTITUTION = 0.5
SMOOTHING = 1e-6  # m
HAMMER_GAP = 1e-3  # m


def hammer_impact_speed(drop_height_ft: float = DROP_HEIGHT_FT) -> float:
    """Hammer speed at impact (m/s) for a drop height in feet: ``v0 = sqrt(2 g h)``.

    Point-mass pendulum released from rest, no losses (the MWSM hammer is a pendulum whose
    striking end carries the 3,000 lb; its rotational inertia about the striking point is
    neglected). 2 ft gives 3.458 m/s.
    """
    if not (drop_height_ft >= 0.0 and math.isfinite(drop_height_ft)):
        raise ValueError(f"drop_height_ft: must be a finite number >= 0, got {drop_height_ft!r}")
    return math.sqrt(2.0 * G * drop_height_ft * FT)


_NON_NEGATIVE = frozenset({"drop_height_ft", "zeta_channel", "zeta_bed", "zeta", "hammer_gap",
                           "anvil_spring_n_per_m", "channel_damping", "anvil_hz"})  # fmt: skip
_RESTITUTIONS = frozenset({"restitution", "e_impact", "e_stop"})


def _check_options(options: dict) -> None:
    """Raise ``ValueError("<option>: …")`` for the first machine option that is not a finite
    number in its range: restitutions in (0, 1], damping ratios, drop height, gaps and optional
    springs ≥ 0, everything else (masses, frequencies, stiffnesses, lengths, exponents) > 0."""
    for name, value in options.items():
        if name == "cls" or isinstance(value, str):
            continue
        try:
            x = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected a number, got {value!r}") from None
        if name in _RESTITUTIONS:
            ok, what = 0.0 < x <= 1.0, "a number in (0, 1]"
        elif name in _NON_NEGATIVE:
            ok, what = x >= 0.0, "a finite number >= 0"
        else:
            ok, what = x > 0.0, "a finite positive number"
        if not (ok and math.isfinite(x)):
            raise ValueError(f"{name}: must be {what}, got {value!r}")


def _stiffness(mass: float, freq_hz: float) -> float:
    return mass * (2.0 * math.pi * freq_hz) ** 2


# --------------------------------------------------------------------------- (a) Welch–Saunders


class WelchSaundersModel(MechanicalSystem):
    """Welch & Saunders (1968) 1-D model: momentum-balance impact, then anvil + equipment.

    Coordinates ``q = (x_a, x_e)`` (m): displacements of the anvil table and of the equipment
    from static equilibrium (gravity is balanced by the preloads and omitted), upwards.
    Equations::

        m_a ẍ_a = −k_a x_a + k_c (x_e − x_a) + c_c (ẋ_e − ẋ_a)
        m_e ẍ_e = −k_c (x_e − x_a) − c_c (ẋ_e − ẋ_a),      c_c = 2 ζ sqrt(k_c m_e)

    ``k_a`` = 0 (default) leaves the anvil free (it moves within its travel); ``k_a`` > 0 puts it
    on springs. There is no impact force: :meth:`initial_state` starts the anvil with the
    post-impact velocity of a collision between the hammer ``m_h`` at ``v0`` and the anvil at rest
    with restitution ``e`` (momentum balance)::

        v_a(0⁺) = m_h (1 + e) v0 / (m_h + m_a).

    ``m_a`` is the anvil table with the equipment base (fixtures); the equipment mass ``m_e`` sits
    on the channels and does not take part in the short impact.
    Sensors: ``equipment_acceleration`` (m/s², ẍ_e), ``anvil_velocity`` (m/s).
    """

    m_hammer: ArrayLike
    m_anvil: ArrayLike
    m_equipment: ArrayLike
    k_channel: ArrayLike
    zeta_channel: ArrayLike
    k_anvil: ArrayLike
    restitution: ArrayLike
    impact_speed: ArrayLike

    @classmethod
    def from_machine(
        cls,
        *,
        hammer_lb: float = HAMMER_LB,
        anvil_lb: float = ANVIL_LB,
        equipment_kg: float = EQUIPMENT_KG,
        drop_height_ft: float = DROP_HEIGHT_FT,
        channel_hz: float = CHANNEL_HZ,
        zeta_channel: float = DAMPING_RATIO,
        anvil_spring_n_per_m: float = 0.0,
        restitution: float = NRL_RESTITUTION,
    ) -> WelchSaundersModel:
        """Model from machine data in lb / ft (defaults: see the module docstring).

        ``channel_hz`` (assumption, 60 Hz) sets ``k_c = m_e (2π f)²``; ``restitution`` defaults
        to 0.3625, which reproduces the NRL ratio 0.545 with the default masses.
        """
        _check_options(locals())
        m_e = float(equipment_kg)
        return cls(
            m_hammer=jnp.asarray(hammer_lb * LB),
            m_anvil=jnp.asarray(anvil_lb * LB),
            m_equipment=jnp.asarray(m_e),
            k_channel=jnp.asarray(_stiffness(m_e, channel_hz)),
            zeta_channel=jnp.asarray(float(zeta_channel)),
            k_anvil=jnp.asarray(float(anvil_spring_n_per_m)),
            restitution=jnp.asarray(float(restitution)),
            impact_speed=jnp.asarray(hammer_impact_speed(drop_height_ft)),
        )

    @property
    def c_channel(self) -> Array:
        """Channel damping c_c = 2 ζ sqrt(k_c m_e) (N·s/m)."""
        return 2.0 * self.zeta_channel * jnp.sqrt(self.k_channel * self.m_equipment)

    def anvil_velocity_after_impact(self) -> Array:
        """``m_h (1 + e) v0 / (m_h + m_a)`` (m/s)."""
        m_h = self.m_hammer
        return m_h * (1.0 + self.restitution) * self.impact_speed / (m_h + self.m_anvil)

    def initial_state(self) -> tuple[Array, Array]:
        """Post-impact state ``(q0, v0)``: at equilibrium, anvil at its post-impact velocity."""
        va = self.anvil_velocity_after_impact()
        q0 = jnp.zeros(2)
        return q0, jnp.stack([va, jnp.zeros_like(va)])

    def mass(self, q: Array) -> Array:
        del q
        return jnp.diag(jnp.stack([self.m_anvil, self.m_equipment]))

    def forces(self, t: ArrayLike, q: Array, v: Array) -> Array:
        del t
        f_ch = self.k_channel * (q[1] - q[0]) + self.c_channel * (v[1] - v[0])
        return jnp.stack([-self.k_anvil * q[0] + f_ch, -f_ch])

    def sensors(self, t, q, v, vdot) -> dict[str, Array]:
        del t, q
        return {"equipment_acceleration": vdot[1], "anvil_velocity": v[0]}


# --------------------------------------------------------------------------- (b) 2-DOF with bed


class TwoDofBedModel(MechanicalSystem):
    """Damped 2-DOF model with the bed as an extra DOF (after Alexander 2016).

    Coordinates ``q = (x_a, x_b)`` (m): the anvil table with the equipment lumped on it, and the
    bed, displacements from static equilibrium (gravity balanced, omitted), upwards. The anvil is
    tied to the bed by a linear spring ``k_ab`` (the anvil bolts/stops linearised: an
    assumption), the bed to the ground by ``k_bg``::

        M = diag(m_a, m_b),   K = [[k_ab, −k_ab], [−k_ab, k_ab + k_bg]]
        M ẍ + C ẋ + K x = 0,  C = α M + β K

    Rayleigh damping with ``α = 2ζ ω₁ω₂/(ω₁+ω₂)``, ``β = 2ζ/(ω₁+ω₂)`` gives the damping ratio ζ
    (default 4.5 %, Alexander 2016) in both undamped modes ω₁ < ω₂ (closed form of the 2×2
    eigenproblem, differentiable). :meth:`initial_state`: at rest at equilibrium except the
    anvil, at ``ratio × v0`` (default 0.545, NRL).
    Sensor: ``equipment_acceleration`` (m/s², ẍ_a: the equipment moves with the anvil).
    """

    m_anvil: ArrayLike
    m_bed: ArrayLike
    k_anvil_bed: ArrayLike
    k_bed: ArrayLike
    zeta: ArrayLike
    velocity_ratio: ArrayLike
    impact_speed: ArrayLike

    @classmethod
    def from_machine(
        cls,
        *,
        anvil_lb: float = ANVIL_LB,
        equipment_kg: float = EQUIPMENT_KG,
        bed_lb: float = BED_LB,
        drop_height_ft: float = DROP_HEIGHT_FT,
        anvil_on_bed_hz: float = ANVIL_ON_BED_HZ,
        bed_hz: float = BED_HZ,
        zeta: float = DAMPING_RATIO,
        velocity_ratio: float = NRL_VELOCITY_RATIO,
    ) -> TwoDofBedModel:
        """Model from machine data. ``anvil_on_bed_hz`` (60 Hz) and ``bed_hz`` (3 Hz) are
        assumptions: ``k_ab = m_a (2π f_ab)²`` with ``m_a`` anvil + equipment,
        ``k_bg = (m_a + m_b)(2π f_b)²``."""
        _check_options(locals())
        m_a = anvil_lb * LB + equipment_kg
        m_b = bed_lb * LB
        return cls(
            m_anvil=jnp.asarray(m_a),
            m_bed=jnp.asarray(m_b),
            k_anvil_bed=jnp.asarray(_stiffness(m_a, anvil_on_bed_hz)),
            k_bed=jnp.asarray(_stiffness(m_a + m_b, bed_hz)),
            zeta=jnp.asarray(float(zeta)),
            velocity_ratio=jnp.asarray(float(velocity_ratio)),
            impact_speed=jnp.asarray(hammer_impact_speed(drop_height_ft)),
        )

    def stiffness_matrix(self) -> Array:
        k1, k2 = self.k_anvil_bed, self.k_bed
        return jnp.stack([jnp.stack([k1, -k1]), jnp.stack([-k1, k1 + k2])])

    def natural_frequencies(self) -> Array:
        """Undamped ω₁ < ω₂ (rad/s), roots of m_a m_b λ² − (k_ab m_b + (k_ab+k_bg) m_a) λ
        + k_ab k_bg = 0, λ = ω²."""
        k1, k2, ma, mb = self.k_anvil_bed, self.k_bed, self.m_anvil, self.m_bed
        a = ma * mb
        b = k1 * mb + (k1 + k2) * ma
        c = k1 * k2
        disc = jnp.sqrt(b * b - 4.0 * a * c)
        lam1 = 2.0 * c / (b + disc)  # stable form of the small root
        lam2 = (b + disc) / (2.0 * a)
        return jnp.sqrt(jnp.stack([lam1, lam2]))

    def rayleigh_coefficients(self) -> tuple[Array, Array]:
        """``(α, β)`` (1/s, s) of ``C = α M + β K``."""
        w = self.natural_frequencies()
        alpha = 2.0 * self.zeta * w[0] * w[1] / (w[0] + w[1])
        beta = 2.0 * self.zeta / (w[0] + w[1])
        return alpha, beta

    def initial_state(self) -> tuple[Array, Array]:
        va = self.velocity_ratio * self.impact_speed
        return jnp.zeros(2), jnp.stack([va, jnp.zeros_like(va)])

    def mass(self, q: Array) -> Array:
        del q
        return jnp.diag(jnp.stack([self.m_anvil, self.m_bed]))

    def forces(self, t: ArrayLike, q: Array, v: Array) -> Array:
        del t
        k = self.stiffness_matrix()
        alpha, beta = self.rayleigh_coefficients()
        m = self.mass(q)
        return -(k @ q) - (alpha * (m @ v) + beta * (k @ v))

    def sensors(self, t, q, v, vdot) -> dict[str, Array]:
        del t, q, v
        return {"equipment_acceleration": vdot[0]}


# --------------------------------------------------------------------------- (c) contact model


class LumpedContactModel(MechanicalSystem):
    """Hammer, anvil table, bed and equipment, vertical, with Hunt–Crossley contacts and gravity.

    Coordinates ``q = (x_h, x_a, x_b, x_e)`` (m, upwards): the striking face of the hammer, the
    underside of the anvil table, the bed and the equipment. Reference positions: the bed springs
    are unstretched at ``x_b = 0``; the anvil touches its lower stops (zero penetration) at
    ``x_a = x_b`` and its upper stops at ``x_a = x_b + travel``; the channels are unstretched at
    ``x_e = x_a``; the hammer touches the anvil at ``x_h = x_a``. Forces (``F_HC(δ, δ̇)`` the
    Hunt–Crossley law of :func:`diffmbs.contact.hunt_crossley_force`, ≥ 0)::

        F_imp = F_HC(x_h − x_a, ẋ_h − ẋ_a; K_h, χ_h)            hammer → anvil (up on the anvil)
        F_low = F_HC(x_b − x_a, ẋ_b − ẋ_a; K_s, χ_s)            lower stops (up on the anvil)
        F_up  = F_HC(x_a − x_b − travel, ẋ_a − ẋ_b; K_s, χ_s)   upper stops (down on the anvil)
        F_ch  = k_c (x_e − x_a) + c_c (ẋ_e − ẋ_a)               channels (down on the equipment)
        F_bed = k_b x_b + c_b ẋ_b                               bed springs (down on the bed)

        m_h ẍ_h = −F_imp − m_h g
        m_a ẍ_a = F_imp + F_low − F_up + F_ch − m_a g
        m_b ẍ_b = −F_low + F_up − F_bed − m_b g
        m_e ẍ_e = −F_ch − m_e g

    with ``c_c = 2 ζ_c sqrt(k_c m_e)``, ``c_b = 2 ζ_b sqrt(k_b (m_b + m_a + m_e))``. The hammer is
    a free point mass moving vertically (the pendulum's path is tangent to the vertical at
    impact; the constraint is ignored over the short simulated window). χ_h comes from the
    restitution ``e_h`` at the impact speed ``v0`` (:func:`damping_from_restitution`, exact law
    by default, in :meth:`from_machine` and :meth:`with_restitution`); χ_s likewise from ``e_s``
    at the reference speed 0.545 ``v0`` (about the speed at which the anvil meets its upper
    stops). The two contacts are :class:`~diffmbs.contact.OneSidedStop` parameter sets, named
    ``impact.stiffness`` (K_h), ``impact.damping`` (χ_h), ``stops.stiffness`` (K_s) and
    ``stops.damping`` (χ_s) for fits; the damping root solve stays out of the integration loop,
    which keeps compile times small.
    Sensors: ``equipment_acceleration`` (ẍ_e, m/s², absolute, without gravity: what an
    accelerometer records, 0 at rest), ``impact_force`` (F_imp, N), ``anvil_velocity`` (m/s).
    """

    m_hammer: ArrayLike = eqx.field(metadata={"units": "kg"})
    m_anvil: ArrayLike = eqx.field(metadata={"units": "kg"})
    m_bed: ArrayLike = eqx.field(metadata={"units": "kg"})
    m_equipment: ArrayLike = eqx.field(metadata={"units": "kg"})
    impact: OneSidedStop
    impact_speed: ArrayLike = eqx.field(metadata={"units": "m/s"})
    stops: OneSidedStop
    travel: ArrayLike = eqx.field(metadata={"units": "m"})
    k_bed: ArrayLike = eqx.field(metadata={"units": "N/m"})
    zeta_bed: ArrayLike = eqx.field(metadata={"units": "1"})
    k_channel: ArrayLike = eqx.field(metadata={"units": "N/m"})
    zeta_channel: ArrayLike = eqx.field(metadata={"units": "1"})
    gravity: ArrayLike = eqx.field(metadata={"units": "m/s^2"})
    hammer_gap: ArrayLike = eqx.field(metadata={"units": "m"})

    @classmethod
    def from_machine(
        cls,
        *,
        hammer_lb: float = HAMMER_LB,
        anvil_lb: float = ANVIL_LB,
        bed_lb: float = BED_LB,
        equipment_kg: float = EQUIPMENT_KG,
        drop_height_ft: float = DROP_HEIGHT_FT,
        travel_in: float = TRAVEL_IN,
        k_impact: float = HAMMER_CONTACT_K,
        e_impact: float = NRL_RESTITUTION,
        k_stop: float = STOP_CONTACT_K,
        e_stop: float = STOP_RESTITUTION,
        bed_hz: float = BED_HZ,
        zeta_bed: float = DAMPING_RATIO,
        channel_hz: float = CHANNEL_HZ,
        zeta_channel: float = DAMPING_RATIO,
        hammer_gap: float = HAMMER_GAP,
        impact_exponent: float = 1.5,
        stop_exponent: float = 1.5,
        smoothing: float = SMOOTHING,
        damping_law: str = "exact",
    ) -> LumpedContactModel:
        """Model from machine data in lb / in / ft (defaults and sources: module docstring).

        ``k_bed = (m_b + m_a + m_e)(2π f_bed)²`` and ``k_channel = m_e (2π f_ch)²`` (assumed
        frequencies); ``chi_impact`` reproduces ``e_impact`` at ``v0`` and ``chi_stop``
        reproduces ``e_stop`` at 0.545 ``v0`` (the NRL anvil speed, about the speed at which the
        anvil reaches its upper stops), both by ``damping_law``.
        """
        _check_options(locals())
        m_h, m_a, m_b, m_e = hammer_lb * LB, anvil_lb * LB, bed_lb * LB, float(equipment_kg)
        v0 = hammer_impact_speed(drop_height_ft)
        f = lambda x: jnp.asarray(float(x))  # noqa: E731
        return cls(
            m_hammer=f(m_h),
            m_anvil=f(m_a),
            m_bed=f(m_b),
            m_equipment=f(m_e),
            impact=OneSidedStop(
                stiffness=f(k_impact),
                damping=damping_from_restitution(e_impact, v0, damping_law),
                exponent=float(impact_exponent),
                smoothing=float(smoothing),
            ),
            impact_speed=f(v0),
            stops=OneSidedStop(
                stiffness=f(k_stop),
                damping=damping_from_restitution(e_stop, NRL_VELOCITY_RATIO * v0, damping_law),
                exponent=float(stop_exponent),
                smoothing=float(smoothing),
            ),
            travel=f(travel_in * INCH),
            k_bed=f(_stiffness(m_b + m_a + m_e, bed_hz)),
            zeta_bed=f(zeta_bed),
            k_channel=f(_stiffness(m_e, channel_hz)),
            zeta_channel=f(zeta_channel),
            gravity=f(G),
            hammer_gap=f(hammer_gap),
        )

    def with_restitution(
        self,
        e_impact: ArrayLike | None = None,
        e_stop: ArrayLike | None = None,
        *,
        stop_reference_speed: ArrayLike | None = None,
        law: str = "exact",
    ) -> LumpedContactModel:
        """A copy whose χ_h (and/or χ_s) reproduce the restitution ``e_impact`` at
        ``impact_speed`` (``e_stop`` at ``stop_reference_speed``, default 0.545 ``impact_speed``).

        Differentiable in the restitutions (:func:`damping_from_restitution`); call it outside
        :func:`~diffmbs.integrate.simulate` so the root solve is not traced into every step.
        """
        out = self
        if e_impact is not None:
            chi = damping_from_restitution(e_impact, self.impact_speed, law)
            out = eqx.tree_at(lambda m: m.impact.damping, out, chi)
        if e_stop is not None:
            v_ref = (
                NRL_VELOCITY_RATIO * self.impact_speed
                if stop_reference_speed is None
                else stop_reference_speed
            )
            chi = damping_from_restitution(e_stop, v_ref, law)
            out = eqx.tree_at(lambda m: m.stops.damping, out, chi)
        return out

    # -- derived parameters

    @property
    def c_channel(self) -> Array:
        return 2.0 * self.zeta_channel * jnp.sqrt(self.k_channel * self.m_equipment)

    @property
    def c_bed(self) -> Array:
        m = self.m_bed + self.m_anvil + self.m_equipment
        return 2.0 * self.zeta_bed * jnp.sqrt(self.k_bed * m)

    # -- forces
    def element_forces(self, q: Array, v: Array) -> dict[str, Array]:
        """The element forces (N) F_imp, F_low, F_up, F_ch, F_bed (signs: class docstring)."""
        x_h, x_a, x_b, x_e = q
        v_h, v_a, v_b, v_e = v
        f_imp = self.impact(x_h - x_a, v_h - v_a)
        f_low = self.stops(x_b - x_a, v_b - v_a)
        f_up = self.stops(x_a - x_b - self.travel, v_a - v_b)
        f_ch = self.k_channel * (x_e - x_a) + self.c_channel * (v_e - v_a)
        f_bed = self.k_bed * x_b + self.c_bed * v_b
        return {
            "impact": f_imp,
            "lower_stop": f_low,
            "upper_stop": f_up,
            "channel": f_ch,
            "bed": f_bed,
        }

    def mass(self, q: Array) -> Array:
        del q
        return jnp.diag(jnp.stack([self.m_hammer, self.m_anvil, self.m_bed, self.m_equipment]))

    def forces(self, t: ArrayLike, q: Array, v: Array) -> Array:
        del t
        f = self.element_forces(q, v)
        g = self.gravity
        return jnp.stack(
            [
                -f["impact"] - self.m_hammer * g,
                f["impact"] + f["lower_stop"] - f["upper_stop"] + f["channel"] - self.m_anvil * g,
                -f["lower_stop"] + f["upper_stop"] - f["bed"] - self.m_bed * g,
                -f["channel"] - self.m_equipment * g,
            ]
        )

    def sensors(self, t, q, v, vdot) -> dict[str, Array]:
        del t
        return {
            "equipment_acceleration": vdot[3],
            "impact_force": self.element_forces(q, v)["impact"],
            "anvil_velocity": v[1],
        }

    # -- initial state
    def _stop_penetration(self, load: Array) -> Array:
        """Penetration δ with ``K_s δ_sⁿ = load`` for the smoothed δ_s = ε softplus(δ/ε)."""
        eps = self.stops.smoothing
        ds = (load / self.stops.stiffness) ** (1.0 / self.stops.exponent)
        # invert δ_s = ε ln(1 + e^(δ/ε)):  δ = δ_s + ε ln(1 − e^(−δ_s/ε))
        return ds + eps * jnp.log(-jnp.expm1(-ds / eps))

    def initial_state(self) -> tuple[Array, Array]:
        """The state a test starts from: :meth:`static_equilibrium_state` with the defaults."""
        return self.static_equilibrium_state()

    def static_equilibrium_state(
        self, hammer_gap: ArrayLike | None = None, hammer_speed: ArrayLike | None = None
    ) -> tuple[Array, Array]:
        """Static equilibrium under gravity (closed form, element by element), hammer below.

        Bed: ``k_b x_b = (m_b + m_a + m_e) g``; anvil on the lower stops:
        ``K_s δ_sⁿ = (m_a + m_e) g``, ``x_a = x_b − δ``; equipment on the channels:
        ``x_e = x_a − m_e g / k_c``. The upper-stop force at this state is
        ``K_s (ε softplus(−(travel + δ)/ε))ⁿ``, which underflows to 0 for travel ≫ ε, and the
        hammer, ``hammer_gap`` (default the field, 1 mm) below contact, exerts none. The hammer
        velocity is ``hammer_speed`` upwards (default ``impact_speed``). Velocities otherwise 0.
        """
        g = self.gravity
        gap = self.hammer_gap if hammer_gap is None else hammer_gap
        vh = self.impact_speed if hammer_speed is None else hammer_speed
        x_b = -(self.m_bed + self.m_anvil + self.m_equipment) * g / self.k_bed
        x_a = x_b - self._stop_penetration((self.m_anvil + self.m_equipment) * g)
        x_e = x_a - self.m_equipment * g / self.k_channel
        x_h = x_a - gap
        q0 = jnp.stack(jnp.broadcast_arrays(x_h, x_a, x_b, x_e)).astype(float)
        z = jnp.zeros_like(x_a)
        v0 = jnp.stack(jnp.broadcast_arrays(jnp.asarray(vh, float), z, z, z))
        return q0, v0
