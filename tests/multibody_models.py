"""Small multibody models shared by the multibody tests and benchmarks (not a test module).

Each builder returns a :class:`~diffmbs.multibody.MultibodyModel` whose bodies' initial poses are
a (rough, where said) starting guess; geometry constants are module-level so tests can compute
their closed-form references independently of the model.
"""

import numpy as np

import diffmbs  # noqa: F401
import diffmbs.multibody as mb
from diffmbs.rotations import matrix_to_quat, quat_from_axis_angle

G = 9.81
Y_AXIS = (0.0, 1.0, 0.0)


def quat_about(axis, angle):
    return np.asarray(quat_from_axis_angle(np.asarray(axis, float), angle))


# --------------------------------------------------------------------------- pendulum

PENDULUM = {"mass": 1.3, "distance": 0.8, "inertia": (0.02, 0.03, 0.015)}  # kg, m, kg·m² (COM)


def pendulum(theta0=np.pi / 2, mass=PENDULUM["mass"], distance=PENDULUM["distance"]):
    """Physical pendulum in the x–z plane: body "bob" (COM at its body-frame origin), hinged at
    body point (0, 0, d) to the world origin about the world y axis; released at rest at angle
    ``theta0`` from the downward vertical (π/2: horizontal, COM at (d, 0, 0))."""
    b = mb.ModelBuilder(gravity=(0.0, 0.0, -G))
    # Body z axis points from the COM to the hinge; rotating by −θ₀ about y puts the COM at
    # d (sin θ₀, 0, −cos θ₀).
    b.add_body(
        mb.RigidBody(
            "bob",
            mass=mass,
            inertia=PENDULUM["inertia"],
            position=(distance * np.sin(theta0), 0.0, -distance * np.cos(theta0)),
            orientation=quat_about(Y_AXIS, -theta0),
        )
    )
    b.add_joint(
        "hinge",
        mb.Revolute(
            "ground",
            mb.Frame.from_axis((0.0, 0.0, 0.0), Y_AXIS),
            "bob",
            mb.Frame.from_axis((0.0, 0.0, distance), Y_AXIS),
        ),
    )
    b.add_sensor("angle", mb.JointCoordinates("hinge"))
    b.add_sensor("reaction", mb.JointReaction("hinge"))
    b.add_sensor("energy", mb.MechanicalEnergy())
    return b.build()


# --------------------------------------------------------------------------- chain


def chain(n_links, link_length=0.5, mass=1.0):
    """``n_links`` bars hanging in a vertical plane, each hinged (about y) to the previous one
    (the first to the world origin): one stacked group of revolutes."""
    b = mb.ModelBuilder(gravity=(0.0, 0.0, -G))
    half = 0.5 * link_length
    inertia = (mass * link_length**2 / 12, mass * link_length**2 / 12, 1e-3 * mass)
    parent, parent_point = "ground", (0.0, 0.0, 0.0)
    for k in range(n_links):
        name = f"link{k}"
        b.add_body(
            mb.RigidBody(name, mass=mass, inertia=inertia, position=(0, 0, -half - k * link_length))
        )
        b.add_joint(
            f"hinge{k}",
            mb.Revolute(
                parent,
                mb.Frame.from_axis(parent_point, Y_AXIS),
                name,
                mb.Frame.from_axis((0.0, 0.0, half), Y_AXIS),
            ),
        )
        parent, parent_point = name, (0.0, 0.0, -half)
    return b.build()


# --------------------------------------------------------------------------- four-bar

FOUR_BAR = {"ground": 1.0, "crank": 0.4, "coupler": 1.1, "rocker": 0.8}  # link lengths (m)


def _bar(name, length, mass, position, angle):
    inertia = (1e-3 * mass, mass * length**2 / 12, mass * length**2 / 12)
    return mb.RigidBody(
        name,
        mass=mass,
        inertia=inertia,
        position=position,
        orientation=quat_about((0, 0, 1), angle),
    )


def four_bar(
    crank_angle=np.pi / 3, lengths=FOUR_BAR, pin_c=None, rough=True, extra=None, sensors=True
):
    """Planar four-bar in the x–y plane from 3-D revolute joints (all axes along z): ground
    pivots A = (0, 0, 0) and D = (ℓ_ground, 0, 0); bars along their body x axes, hinged at their
    ends. The initial poses are a rough guess (assemble with the crank angle held) built from
    the crank angle and a guess of the coupler–rocker pin C (default: up and right of D);
    ``rough=False`` leaves out the deliberate offsets. ``extra(builder)``, if given, adds force
    elements and sensors before the model is built; ``sensors=False`` leaves out the energy and
    crank-angle sensors (less to compile)."""
    a, b_len, c, d = lengths["crank"], lengths["coupler"], lengths["rocker"], lengths["ground"]
    pin_b = np.array([a * np.cos(crank_angle), a * np.sin(crank_angle), 0.0])
    pin_c = np.array([d + 0.1, 0.7 * c, 0.0]) if pin_c is None else np.asarray(pin_c, float)
    coupler_angle = np.arctan2(*(pin_c - pin_b)[1::-1])
    rocker_angle = np.arctan2(pin_c[1], pin_c[0] - d)
    jitter = 0.05 if rough else 0.0
    builder = mb.ModelBuilder(gravity=(0.0, -G, 0.0))
    builder.add_body(_bar("crank", a, 0.5, pin_b / 2, crank_angle))
    builder.add_body(_bar("coupler", b_len, 1.2, (pin_b + pin_c) / 2 + jitter, coupler_angle))
    builder.add_body(
        _bar("rocker", c, 0.9, (np.array([d, 0, 0]) + pin_c) / 2, rocker_angle + jitter)
    )
    z = (0.0, 0.0, 1.0)
    pins = [
        ("A", "ground", (0.0, 0.0, 0.0), "crank", (-a / 2, 0, 0)),
        ("B", "crank", (a / 2, 0, 0), "coupler", (-b_len / 2, 0, 0)),
        ("C", "coupler", (b_len / 2, 0, 0), "rocker", (c / 2, 0, 0)),
        ("D", "rocker", (-c / 2, 0, 0), "ground", (d, 0.0, 0.0)),
    ]
    for name, body_i, point_i, body_j, point_j in pins:
        builder.add_joint(
            name,
            mb.Revolute(
                body_i, mb.Frame.from_axis(point_i, z), body_j, mb.Frame.from_axis(point_j, z)
            ),
        )
    if sensors:
        builder.add_sensor("energy", mb.MechanicalEnergy())
        builder.add_sensor("crank_angle", mb.JointCoordinates("A"))
    if extra is not None:
        extra(builder)
    return builder.build()


def four_bar_pins(theta, coupler_com, lengths=FOUR_BAR):
    """Closed form of the four-bar's pins from the crank angle alone: B on the crank circle, C
    where circle (B, coupler) meets circle (D, rocker), on the branch of the first sample.
    ``theta`` (n,) rad, ``coupler_com`` (n, 3) m from a simulation (it picks the branch and
    gives the simulated C = 2·COM − B). Returns ``(c_simulated, c_closed_form)``, each (n, 2)."""
    a, b, c, d = (lengths[k] for k in ("crank", "coupler", "rocker", "ground"))
    pin_b = a * np.stack([np.cos(theta), np.sin(theta)], axis=1)
    gap = np.array([d, 0.0]) - pin_b
    ell = np.linalg.norm(gap, axis=1, keepdims=True)
    along = (b**2 - c**2 + ell**2) / (2 * ell)
    across = np.sqrt(b**2 - along**2)
    unit = gap / ell
    perp = np.stack([-unit[:, 1], unit[:, 0]], axis=1)
    c_sim = 2 * np.asarray(coupler_com)[:, :2] - pin_b
    branch = np.sign(np.sum((c_sim[0] - pin_b[0] - along[0] * unit[0]) * perp[0]))
    return c_sim, pin_b + along * unit + branch * across * perp


# --------------------------------------------------------------------------- slider-crank

SLIDER_CRANK = {"crank": 0.2, "rod": 0.7, "offset_y": 0.15, "offset_z": 0.1, "speed": 2 * np.pi}


def slider_position(theta, p=SLIDER_CRANK):
    """Closed form: the slider moves on the line (s, e, h); the crank pin is at
    r (cos θ, sin θ, 0); the rod length L fixes s = r cos θ + √(L² − (r sin θ − e)² − h²)."""
    r, length, e, h = p["crank"], p["rod"], p["offset_y"], p["offset_z"]
    return r * np.cos(theta) + np.sqrt(length**2 - (r * np.sin(theta) - e) ** 2 - h**2)


def slider_crank(p=SLIDER_CRANK):
    """Spatial slider-crank: crank driven about world z at ``speed`` (rad/s) by a prescribed
    revolute, rod with a spherical joint at the crank pin and a universal joint at the slider,
    slider on a prismatic joint along the world x axis offset to (·, e, h) — out of the crank's
    plane. Initial poses: a rough guess at θ = 0 (assemble at t = 0)."""
    r, length, e, h = p["crank"], p["rod"], p["offset_y"], p["offset_z"]
    s0 = slider_position(0.0, p)
    pin, slide = np.array([r, 0.0, 0.0]), np.array([s0, e, h])
    axis = (slide - pin) / np.linalg.norm(slide - pin)
    side = np.cross((0.0, 0.0, 1.0), axis)
    side /= np.linalg.norm(side)
    rod_rotation = np.stack([axis, side, np.cross(axis, side)], axis=1)
    b = mb.ModelBuilder(gravity=(0.0, 0.0, -G))
    b.add_body(mb.RigidBody("crank", mass=0.8, inertia=(1e-3, 3e-3, 3e-3), position=pin / 2))
    b.add_body(
        mb.RigidBody(
            "rod",
            mass=1.1,
            inertia=(5e-4, 0.045, 0.045),
            position=(pin + slide) / 2 + 0.02,
            orientation=np.asarray(matrix_to_quat(rod_rotation)) + 0.03,
        )
    )
    b.add_body(mb.RigidBody("slider", mass=2.0, inertia=(2e-3, 2e-3, 2e-3), position=slide))
    b.add_joint(
        "crank_drive",
        mb.PrescribedRevolute(
            "ground",
            mb.Frame((0.0, 0.0, 0.0)),
            "crank",
            mb.Frame((-r / 2, 0.0, 0.0)),
            mb.ConstantRate(0.0, p["speed"]),
        ),
    )
    b.add_joint("ball", mb.Spherical("crank", mb.Frame((r / 2, 0, 0)), "rod", (-length / 2, 0, 0)))
    b.add_joint(
        "cardan",
        mb.Universal(
            "rod",
            mb.Frame.from_axis((length / 2, 0, 0), (0, 0, 1), x_axis=(0, 1, 0)),
            "slider",
            mb.Frame.from_axis((0, 0, 0), (1, 0, 0), x_axis=(0, 1, 0)),
        ),
    )
    b.add_joint(
        "slide",
        mb.Prismatic(
            "ground",
            mb.Frame.from_axis((0.0, e, h), (1, 0, 0), x_axis=(0, 1, 0)),
            "slider",
            mb.Frame.from_axis((0, 0, 0), (1, 0, 0), x_axis=(0, 1, 0)),
        ),
    )
    b.add_sensor("s", mb.JointCoordinates("slide"))
    b.add_sensor("s_dot", mb.JointCoordinates("slide", derivative=1))
    b.add_sensor("crank_angle", mb.JointCoordinates("crank_drive"))
    return b.build()
