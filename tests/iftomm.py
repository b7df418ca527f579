"""IFToMM multibody benchmark problems A01 and A02 (not a test module), with references that do
not come from diffmbs: the exact period of a compound pendulum (complete elliptic integral) and
the one-degree-of-freedom equation of the double four-bar integrated by SciPy.

Specifications: the IFToMM library of computational benchmark problems (González, Dopico,
Lugrís & Cuadrado 2006), A01 simple pendulum and A02 double four-bar mechanism (Bayo & Avello
1994): links of 1 m and 1 kg, gravity 9.81 m/s² along −y.
"""

import numpy as np
from scipy.integrate import solve_ivp
from scipy.special import ellipk

import diffmbs  # noqa: F401
import diffmbs.multibody as mb

G = 9.81
Z_AXIS = (0.0, 0.0, 1.0)


def pendulum(inertia, mass=1.0, length=1.0):
    """A01 as a rigid body on a revolute joint: bob "bob" of ``mass`` (kg) with rotational
    inertia ``inertia`` (kg·m², about every axis through its centre; ``"point mass"``: the
    builder's point mass) whose centre is ``length`` (m) from the pivot at the origin; released
    at rest, horizontal, at (length, 0, 0)."""
    b = mb.ModelBuilder(gravity=(0.0, -G, 0.0))
    if inertia == "point mass":
        b.add_body(mb.RigidBody.point_mass("bob", mass, position=(length, 0, 0)))
    else:
        b.add_body(mb.RigidBody("bob", mass, inertia=(inertia,) * 3, position=(length, 0, 0)))
    b.add_joint(
        "pivot",
        mb.Revolute(
            "ground",
            mb.Frame.from_axis((0.0, 0.0, 0.0), Z_AXIS),
            "bob",
            mb.Frame.from_axis((-length, 0.0, 0.0), Z_AXIS),
        ),
    )
    b.add_sensor("energy", mb.MechanicalEnergy())
    b.add_sensor("bob position", mb.PointPosition("bob", (0.0, 0.0, 0.0)))
    return b.build()


def bob_inertia(inertia, mass=1.0):
    """The bob's rotational inertia (kg·m²): ``inertia``, or the point mass's ``2/5 m r²``."""
    if inertia == "point mass":
        return 0.4 * mass * mb.POINT_MASS_RADIUS**2
    return inertia


def pendulum_period(inertia, mass=1.0, length=1.0, amplitude=np.pi / 2):
    """Exact period (s) of a compound pendulum of pivot inertia m L² + J released at rest from
    ``amplitude`` (rad): 4 √(I / (m g L)) K(sin²(θ₀/2))."""
    pivot_inertia = mass * length**2 + inertia
    return 4 * np.sqrt(pivot_inertia / (mass * G * length)) * ellipk(np.sin(amplitude / 2) ** 2)


def pendulum_bottom_speed(inertia, mass=1.0, length=1.0):
    """Speed (m/s) of the bob's centre at the bottom, from energy: I ω² / 2 = m g L."""
    return length * np.sqrt(2 * mass * G * length / (mass * length**2 + inertia))


BAR_INERTIA = (1e-4, 1.0 / 12, 1.0 / 12)  # a 1 kg, 1 m bar along its body x axis (kg·m²)


def double_four_bar():
    """A02: three cranks hinged to the ground at x = 0, 1, 2 (pointing up, along +y), two
    couplers joining their tips (at y = 1), all 3-D revolutes about z (a planar loop with
    redundant rows); crank tips moving at 1 m/s along +x. Sensors: "energy", "tip" (B0, the
    first crank's tip)."""
    b = mb.ModelBuilder(gravity=(0.0, -G, 0.0))
    up = (np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4))  # body x along world y
    for k in range(3):
        b.add_body(
            mb.RigidBody(
                f"crank{k}", mass=1.0, inertia=BAR_INERTIA, position=(k, 0.5, 0.0),
                orientation=up, velocity=(0.5, 0.0, 0.0), angular_velocity=(0.0, 0.0, -1.0),
            )
        )  # fmt: skip
    for k in range(2):
        b.add_body(
            mb.RigidBody(
                f"coupler{k}", mass=1.0, inertia=BAR_INERTIA, position=(k + 0.5, 1.0, 0.0),
                velocity=(1.0, 0.0, 0.0),
            )
        )  # fmt: skip

    def pin(name, body_i, point_i, body_j, point_j):
        frames = (mb.Frame.from_axis(point_i, Z_AXIS), mb.Frame.from_axis(point_j, Z_AXIS))
        b.add_joint(name, mb.Revolute(body_i, frames[0], body_j, frames[1]))

    for k in range(3):
        pin(f"A{k}", "ground", (k, 0.0, 0.0), f"crank{k}", (-0.5, 0.0, 0.0))
    pin("B0", "crank0", (0.5, 0, 0), "coupler0", (-0.5, 0, 0))
    pin("B1", "crank1", (0.5, 0, 0), "coupler0", (0.5, 0, 0))
    pin("B1'", "crank1", (0.5, 0, 0), "coupler1", (-0.5, 0, 0))
    pin("B2", "crank2", (0.5, 0, 0), "coupler1", (0.5, 0, 0))
    b.add_sensor("energy", mb.MechanicalEnergy())
    b.add_sensor("tip", mb.PointPosition("crank0", (0.5, 0.0, 0.0)))
    return b.build()


def double_four_bar_tip(ts):
    """B0 (n, 2) m at times ``ts`` from the one-degree-of-freedom equation of the
    parallelogram: cranks at angle θ, kinetic energy 3·(m L²/3)θ̇²/2 + 2·m L²θ̇²/2, potential
    (3·L/2 + 2·L) m g sin θ, so 3 θ̈ = −3.5 g cos θ; θ(0) = π/2, θ̇(0) = −1 rad/s. SciPy DOP853
    at rtol 1e-13 (it reproduces the published B0 at 10 s to 4e-8 m)."""
    sol = solve_ivp(
        lambda t, y: [y[1], -3.5 * G / 3 * np.cos(y[0])], (0.0, float(ts[-1])),
        [np.pi / 2, -1.0], t_eval=np.asarray(ts), method="DOP853", rtol=1e-13, atol=1e-13,
    )  # fmt: skip
    return np.stack([np.cos(sol.y[0]), np.sin(sol.y[0])], axis=1)


def double_four_bar_passes(ts):
    """Indices of ``ts`` just after each flat (singular) position of the reference motion."""
    tip = double_four_bar_tip(ts)
    return np.flatnonzero(np.diff(np.sign(tip[:, 1])) != 0) + 1
