"""Benchmark: the 3-D constrained multibody engine against MuJoCo and SciPy (issue #4).

Scenes (``tests/multibody_models.py`` builders, identical physics in both codes):

* ``chain{N}``: N = 2, 10, 30 bars (0.5 m, 1 kg, inertia (m L²/12, m L²/12, 1e-3 m) about the
  COM) hinged about the world y axis, released at rest as a straight rod at 0.8 rad from the
  downward vertical; gravity 9.81 m/s², no contact, no damping. diffmbs: maximal coordinates
  (7 q + 6 v per body, 5 revolute equations per hinge); MuJoCo: a kinematic tree of hinges.
* ``four_bar``: the planar four-bar of the tests (crank 0.4 m, coupler 1.1 m, rocker 0.8 m,
  ground 1.0 m; gravity −y) released at rest at a crank angle of 60°. MuJoCo: an open chain of
  three hinges closed by an ``<equality><connect>`` (soft by construction; see SOLREF below).

Everything is simulated for 2 s and compared at 101 samples (every 20 ms) on the joint angles
(rad): the error of a run is ``max |Δθ − Δθ_ref|`` over samples and joints, against a reference
computed by diffmbs with ``diffrax.Dopri8`` at rtol 1e-12 (cross-checked against MuJoCo RK4 at a
tiny step). Measured, in one process:

1. **Matched accuracy**: the largest MuJoCo step (RK4 and implicitfast) and the loosest diffmbs
   rtol (for each of ``DM_SOLVERS``, Tsit5 and Dopri8, ``atol = rtol/100``, a PI step-size
   controller: ``PI_COEFFICIENTS``) whose error is ≤ the target (1e-4 rad), then timed (min and
   median of repeats; the diffmbs solvers in turn) → simulated seconds per wall-clock second.
   The faster diffmbs solver is used for 2.–5. SciPy ``solve_ivp``
   (RK45, DOP853) on diffmbs's own equations (a ``jax.jit`` vector field, NumPy in/out) at the
   rtol that reaches the same target. Also diffmbs with a fixed-step classical RK4 at MuJoCo's
   matched step (same method, same step: per-step cost).
2. **KKT solvers**: ``AugmentedLagrangianKKT`` (the default, Cholesky) against
   ``LeastSquaresKKT`` (SVD) per right-hand side and per simulation; the timings of 1. use
   ``--kkt`` (default ``al``).
3. **Compile time** (first call − later call) of the forward simulation, the gradient and the
   batch, per scene, and the size of the traced vector field (jaxpr equations) against N.
4. **Gradient / forward**: ``jax.grad`` (default ``DiscreteAdjoint``) of the mean squared tip
   position over the samples w.r.t. the body masses, against the forward simulate + loss, at the
   matched rtol, the two timed in turn; AD checked against fourth-order central differences
   at rtol 1e-12.
5. **Batched**: ``diffmbs.simulate_batch`` (all variants in lockstep) and
   ``jax.jit(jax.vmap(...))`` over ``--batch`` variants (chains: initial angle
   0.6…1.0 rad; four-bar: all masses ×0.8…1.2) against MuJoCo looping over the same variants
   one by one (``rollout`` of one trajectory per call, timed in turn with the batch; ``rollout``
   of all of them in one call, 1 and 2 threads, for information).

Bars (issue #4): single-scene speed within 5× of MuJoCo; batched throughput above MuJoCo's
one-by-one loop; gradient ≤ 4× forward. PASS/FAIL is printed and stored; the exit code is 0.

MuJoCo is a benchmark-only dependency (``pip install mujoco``), not in pyproject.toml.

Usage::

    python benchmarks/multibody.py [--quick] [--batch 256] [--repeats 5] [--target 1e-4]
                                   [--cores N] [--out benchmarks/results/multibody.json]

See benchmarks/README.md for what is counted and how.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy
from scipy.integrate import solve_ivp

import diffmbs
import diffmbs.multibody as mb
from diffmbs.rotations import quat_to_matrix
from diffmbs.system import AugmentedLagrangianKKT, LeastSquaresKKT, accelerations

diffmbs.configure()  # float64, XLA CPU options

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))  # script or python -m
sys.path.insert(0, str(_HERE.parent / "tests"))  # the shared model builders
import multibody_models as mm  # noqa: E402
from _common import (  # noqa: E402
    first_call,
    limit_cores,
    machine_info,
    markdown_table,
    pass_fail,
    time_interleaved,
    time_median,
    utc_timestamp,
    write_json_atomic,
)

try:
    import mujoco
    from mujoco import rollout as mj_rollout
except ImportError:  # pragma: no cover - benchmark-only dependency
    mujoco = None

T_END = 2.0
SAMPLE_DT = 0.02
N_SAMPLES = int(round(T_END / SAMPLE_DT)) + 1  # 101
TARGET = 1e-4  # rad, max joint-angle error over the samples
ATOL_RATIO = 1e-2  # atol = rtol · 1e-2 (simulate's default ratio 1e-10 / 1e-8)
REF_RTOL, REF_ATOL = 1e-12, 1e-14
# AD against fourth-order central differences. The differences of adaptive solves carry the
# step-size selection's noise, ~rtol·|loss|/step: at rtol 1e-10 and a 1e-5 step that was 1e-4
# of the derivative for the four-bar with Dopri8 (163 coarse steps), while both solvers' AD
# gradients agreed to 1e-8.
FD_RTOL = 1e-12
FD_STEP = 1e-4  # relative step on the masses
# Step budget of the swept and timed solves; the matched ones take 21–175 steps. The discrete
# adjoint's store is sized by it and filled on every gradient call: chain30's gradient took
# 44 ms at 1024, 57 ms at 4096 and 95 ms at simulate's default 200,000 (one core, AMD EPYC).
MAX_STEPS = 1024
REF_MAX_STEPS = 16384  # the reference, the FD check (rtol 1e-12) and fixed-step RK4
LINK = 0.5  # chain link length (m), mm.chain's default
LINK_MASS = 1.0
CHAIN_ANGLE = 0.8  # rad, initial angle of the straight chain
FOUR_BAR_CRANK = np.pi / 3
SPEED_BAR, GRAD_BAR = 5.0, 4.0

MJ_RK4_STEPS = (0.02, 0.01, 0.005, 0.004, 0.0025, 0.002, 0.001, 5e-4, 2.5e-4, 1e-4)
MJ_IMPLICIT_STEPS = (1e-3, 5e-4, 2.5e-4, 1e-4, 5e-5, 2.5e-5, 1e-5)
MJ_CHECK_STEP = 1e-4  # model-match check: MuJoCo RK4 at this step against the reference
DM_RTOLS = (5e-3, 2e-3, 1e-3, 5e-4, 2e-4, 1e-4, 5e-5, 2e-5, 1e-5, 5e-6, 2e-6, 1e-6, 5e-7, 2e-7,
            1e-7, 3e-8, 1e-8, 1e-9)
# diffmbs's step-size controller: a PI controller, inside the range diffrax's PIDController
# docstring recommends for moderately difficult ODEs (pcoeff ≥ 0.2, icoeff ≥ 0.3, sum ≤ 0.7;
# dtmin as simulate's own default controller). On these smooth mechanisms it
# takes 12–15 % fewer steps than the default I controller for the same angle error (fewer
# rejected steps); on the contact-driven MWSM it does not, so it is not simulate's default.
PI_COEFFICIENTS = {"pcoeff": 0.3, "icoeff": 0.4}
# diffmbs's explicit solvers, each swept to the target and timed side by side; the faster is
# the headline (gradient, batch), as SciPy's RK45 and DOP853 both run. The 8th-order Dopri8
# takes a third of Tsit5's steps at 1e-4 rad on the longer chains and the four-bar.
DM_SOLVERS = {"Tsit5": diffrax.Tsit5(), "Dopri8": diffrax.Dopri8()}
SCIPY_METHODS = ("RK45", "DOP853")
# MuJoCo's connect constraint is soft. Default: solref (0.02 s, 1), solimp (0.9, 0.95, 0.001,
# 0.5, 2). "stiff": time constant 0.5 ms (clamped by MuJoCo to 2·timestep while that is
# larger) and impedance 0.9999 (mjMAXIMP), the stiffest MuJoCo allows.
MJ_EQ_DEFAULT = {"solref": None, "solimp": None}
MJ_EQ_STIFF = {"solref": "0.0005 1", "solimp": "0.9999 0.9999 0.001 0.5 2"}


# --------------------------------------------------------------------------------- RK4 solver


class ClassicalRK4(diffrax.AbstractERK):
    """The classical 4th-order Runge–Kutta method (MuJoCo's ``RK4``), for fixed steps only (its
    error estimate is zero)."""

    tableau = diffrax.ButcherTableau(
        c=np.array([0.5, 0.5, 1.0]),
        b_sol=np.array([1 / 6, 1 / 3, 1 / 3, 1 / 6]),
        b_error=np.zeros(4),
        a_lower=(np.array([0.5]), np.array([0.0, 0.5]), np.array([0.0, 0.0, 1.0])),
    )
    interpolation_cls = diffrax.ThirdOrderHermitePolynomialInterpolation.from_k

    def order(self, terms):
        del terms
        return 4


# --------------------------------------------------------------------------------- scenes


def _quat_axis(axis: int, angle: float) -> np.ndarray:
    q = np.zeros(4)
    q[0], q[1 + axis] = np.cos(angle / 2), np.sin(angle / 2)
    return q


def _fmt(x: float) -> str:
    return f"{float(x):.17g}"


def _wrap(a):
    return jnp.arctan2(jnp.sin(a), jnp.cos(a))


@dataclasses.dataclass
class Scene:
    """One mechanism in both codes. ``angles(q)``: the joint angles (rad) of one diffmbs state
    (MuJoCo's qpos plus a constant); ``tip(q)``: the world point of the loss (m)."""

    name: str
    model: mb.MultibodyModel
    q0: np.ndarray
    axis_component: int  # quaternion component (in the 7-vector) of the hinge axis: y 5, z 6
    tip_body: int
    tip_point: np.ndarray  # body frame (COM at the origin)
    mj_xml: Callable[..., str]
    mj_qpos0: np.ndarray
    batch_kind: str  # "angle" (initial angle variants) or "mass" (mass variants)
    n_links: int
    coordinates: str = "maximal"  # or "joint": model is a JointCoordinateModel
    maximal_scene: Scene | None = None  # the maximal-coordinate original of a joint scene

    @property
    def multibody(self) -> mb.MultibodyModel:
        """The maximal-coordinate model (the scene's own, or the full model behind it)."""
        return self.model.full if self.coordinates == "joint" else self.model

    @property
    def sizes(self) -> tuple[int, int]:
        if self.coordinates == "joint":
            return self.model.n_q, self.model.n_v
        return 7 * self.model.n_bodies, 6 * self.model.n_bodies

    @property
    def v0(self) -> np.ndarray:
        return np.zeros(self.sizes[1])

    def state(self, q_max) -> np.ndarray:
        """A maximal-coordinate q in the scene's coordinates."""
        if self.coordinates == "joint":
            return np.asarray(self.model.from_maximal(jnp.asarray(q_max))[0])
        return np.asarray(q_max)

    def observe(self, q):
        """``(angles(q), tip(q))`` of one state, its poses computed once. In joint coordinates
        the rotations come straight from the tree (no quaternions): for a hinge about axis
        ``a``, ``sin θ = R[c, b]`` and ``cos θ = R[b, b]`` with ``b, c`` the next two axes."""
        if self.coordinates == "joint":
            rot, com = self.model.poses(q)
            a = self.axis_component - 4
            b, c = (a + 1) % 3, (a + 2) % 3
            absolute = jnp.arctan2(rot[:, c, b], rot[:, b, b])
            tip = com[self.tip_body] + rot[self.tip_body] @ jnp.asarray(self.tip_point)
        else:
            qb = q.reshape(-1, 7)
            absolute = 2.0 * jnp.arctan2(qb[:, self.axis_component], qb[:, 3])
            body = qb[self.tip_body]
            tip = body[:3] + quat_to_matrix(body[3:]) @ jnp.asarray(self.tip_point)
        return _wrap(jnp.diff(absolute, prepend=0.0)), tip

    def angles(self, q):
        return self.observe(q)[0]

    def tip(self, q):
        return self.observe(q)[1]


def chain_state(n: int, angle: float) -> np.ndarray:
    """q of ``mm.chain(n)`` as a straight rod hinged at the origin, ``angle`` from the downward
    vertical (rotation about +y); exact, so no assembly is needed."""
    half, q, hinge = 0.5 * LINK, [], np.zeros(3)
    c, s = np.cos(angle), np.sin(angle)
    rot = np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])
    for _ in range(n):
        com = hinge - rot @ [0, 0, half]
        q += [*com, *_quat_axis(1, angle)]
        hinge = com + rot @ [0, 0, -half]
    return np.array(q)


def chain_scene(n: int) -> Scene:
    model = mm.chain(n, link_length=LINK, mass=LINK_MASS)
    q0 = chain_state(n, CHAIN_ANGLE)
    inertia = (LINK_MASS * LINK**2 / 12, LINK_MASS * LINK**2 / 12, 1e-3 * LINK_MASS)

    def xml(h, integrator, **_):
        body = ""
        for k in reversed(range(n)):
            pos = "0 0 0" if k == 0 else f"0 0 {-LINK!r}"
            body = (
                f'<body name="link{k}" pos="{pos}">'
                f'<joint name="hinge{k}" type="hinge" axis="0 1 0"/>'
                f'<inertial pos="0 0 {_fmt(-LINK / 2)}" mass="{_fmt(LINK_MASS)}" '
                f'diaginertia="{" ".join(_fmt(i) for i in inertia)}"/>'
                f'<geom type="capsule" fromto="0 0 0 0 0 {-LINK!r}" size="0.02" '
                f'contype="0" conaffinity="0"/>{body}</body>'
            )
        return (
            '<mujoco><compiler angle="radian" inertiafromgeom="false"/>'
            f'<option timestep="{_fmt(h)}" integrator="{integrator}" gravity="0 0 -9.81">'
            '<flag contact="disable"/></option>'
            f"<worldbody>{body}</worldbody></mujoco>"
        )

    qpos0 = np.zeros(n)
    qpos0[0] = CHAIN_ANGLE
    return Scene(
        f"chain{n}",
        model,
        q0,
        5,
        n - 1,
        np.array([0.0, 0.0, -0.5 * LINK]),
        xml,
        qpos0,
        "angle",
        n,
    )


def four_bar_scene() -> Scene:
    model = mm.four_bar(crank_angle=FOUR_BAR_CRANK)
    q0 = np.asarray(mb.assemble(model, joint_coordinates={"A": FOUR_BAR_CRANK}))
    qb = q0.reshape(-1, 7)
    psi = 2.0 * np.arctan2(qb[:, 6], qb[:, 3])  # crank, coupler, rocker (x axes: A→B, B→C, D→C)
    lengths = mm.FOUR_BAR
    a, b, c = lengths["crank"], lengths["coupler"], lengths["rocker"]
    masses = np.asarray(model.bodies.mass)

    def inertial(pos, mass, length):
        diag = (1e-3 * mass, mass * length**2 / 12, mass * length**2 / 12)  # mm._bar
        return (
            f'<inertial pos="{pos}" mass="{_fmt(mass)}" '
            f'diaginertia="{" ".join(_fmt(i) for i in diag)}"/>'
        )

    def quat(angle):
        return " ".join(_fmt(x) for x in _quat_axis(2, angle))

    def xml(h, integrator, solref=None, solimp=None):
        eq = f'<connect body1="rocker" anchor="{_fmt(-c)} 0 0"'
        eq += f' solref="{solref}"' if solref else ""
        eq += f' solimp="{solimp}"' if solimp else ""
        return f"""<mujoco><compiler angle="radian" inertiafromgeom="false"/>
<option timestep="{_fmt(h)}" integrator="{integrator}" gravity="0 -9.81 0">
<flag contact="disable"/></option>
<worldbody>
 <body name="crank" quat="{quat(psi[0])}"><joint name="A" type="hinge" axis="0 0 1"/>
  {inertial(f"{_fmt(a / 2)} 0 0", masses[0], a)}
  <body name="coupler" pos="{_fmt(a)} 0 0" quat="{quat(psi[1] - psi[0])}">
   <joint name="B" type="hinge" axis="0 0 1"/>{inertial(f"{_fmt(b / 2)} 0 0", masses[1], b)}
   <body name="rocker" pos="{_fmt(b)} 0 0" quat="{quat(psi[2] - psi[1])}">
    <joint name="C" type="hinge" axis="0 0 1"/>{inertial(f"{_fmt(-c / 2)} 0 0", masses[2], c)}
   </body></body></body>
</worldbody><equality>{eq}/></equality></mujoco>"""

    return Scene(
        "four_bar", model, q0, 6, 2, np.array([c / 2, 0.0, 0.0]), xml, np.zeros(3), "mass", 3
    )


# --------------------------------------------------------------------------------- diffmbs


TS = np.arange(N_SAMPLES) * SAMPLE_DT  # NumPy: no JAX computation before --cores applies


def in_joint_coordinates(scene: Scene) -> Scene:
    """The same scene with the model in joint coordinates (the four-bar: joint C cut)."""
    jm = mb.in_joint_coordinates(scene.model)
    joint = dataclasses.replace(scene, model=jm, coordinates="joint", maximal_scene=scene)
    return dataclasses.replace(joint, q0=joint.state(scene.q0))


def bodies(model):
    return model.full.bodies if isinstance(model, mb.JointCoordinateModel) else model.bodies


def with_masses(model, masses):
    return eqx.tree_at(lambda m: bodies(m).mass, model, masses)


def _controller(rtol) -> diffrax.PIDController:
    return diffrax.PIDController(
        rtol=rtol,
        atol=rtol * ATOL_RATIO,
        dtmin=diffmbs.integrate.DTMIN_FRACTION * T_END,
        force_dtmin=False,
        **PI_COEFFICIENTS,
    )


def _outcome(angles, start_angles, tips, sol) -> tuple:
    """What the forwards return, from the observed angles ``(..., n_t, n_j)``, those of the
    start ``(..., n_j)`` and the tip points ``(..., n_t, 3)``."""
    loss = jnp.mean(jnp.sum(tips**2, axis=-1), axis=-1)
    inc = _wrap(angles - start_angles[..., None, :])
    return inc, loss, sol.stats["num_steps"], sol.status, sol.constraint_drift


def make_solve(scene: Scene, kkt, **simulate_kw) -> Callable:
    """(model, masses, q0, rtol) ↦ ``diffmbs.simulate``'s Solution. The model is an argument:
    closing over it makes its arrays XLA constants, which constant-folding turns into minutes
    of compile time at N = 30."""
    v0 = jnp.asarray(scene.v0)

    def solve(model, masses, q0, rtol):
        kw = {"stepsize_controller": _controller(rtol), **simulate_kw}
        m = with_masses(model, masses)
        return diffmbs.simulate(m, q0, jnp.zeros_like(v0), TS, kkt_solver=kkt, throw=False, **kw)

    return solve


def make_forward(scene: Scene, kkt, **simulate_kw) -> Callable:
    """(model, masses, q0, rtol) ↦ (angle increments (n_t, n_j), loss, steps, status,
    constraint drift) of one run."""
    solve = make_solve(scene, kkt, **simulate_kw)

    def forward(model, masses, q0, rtol):
        sol = solve(model, masses, q0, rtol)
        angles, tips = jax.vmap(scene.observe)(sol.q)
        return _outcome(angles, scene.angles(q0), tips, sol)

    return forward


def make_batch_forward(
    scene: Scene, kkt, batched_masses: bool, lockstep: bool, **simulate_kw
) -> Callable:
    """(model, masses, q0s, rtol) ↦ :func:`make_forward`'s outputs for a batch of variants,
    each with a leading batch axis: from ``diffmbs.simulate_batch`` (``lockstep``: all
    variants integrated as one system) or from ``jax.vmap`` of ``diffmbs.simulate``.
    ``batched_masses``: the variants differ in their masses ``(batch, n)`` (only those leaves
    are batched), else in ``q0s``.

    The observation runs sample by sample, all variants of a sample together: observing all
    101 × 256 states at once streams every intermediate through memory (chain10: 90 ms
    against 28 ms, a tenth of the batch's time)."""
    v0 = jnp.asarray(scene.v0)
    solve = make_solve(scene, kkt, **simulate_kw)

    def forward(model, masses, q0s, rtol):
        if lockstep:
            axes = None
            if batched_masses:  # only the masses (batch, n) carry the batch axis
                none = jax.tree.map(lambda _: None, model)
                axes = eqx.tree_at(lambda t: bodies(t).mass, none, 0, is_leaf=lambda x: x is None)
            sol = diffmbs.simulate_batch(
                with_masses(model, masses), q0s, jnp.zeros_like(v0), TS, system_axes=axes,
                kkt_solver=kkt, throw=False, stepsize_controller=_controller(rtol),
                **simulate_kw,
            )
        else:
            in_axes = (None, 0, None, None) if batched_masses else (None, None, 0, None)
            sol = jax.vmap(solve, in_axes=in_axes)(model, masses, q0s, rtol)
        angles, tips = jax.lax.map(jax.vmap(scene.observe), jnp.swapaxes(sol.q, 0, 1))
        q_start = q0s if q0s.ndim == 2 else q0s[None]
        return _outcome(
            jnp.swapaxes(angles, 0, 1), jax.vmap(scene.angles)(q_start), jnp.swapaxes(tips, 0, 1),
            sol,
        )

    return forward


def angle_error(inc, ref) -> float:
    d = np.asarray(inc) - np.asarray(ref)
    d = np.arctan2(np.sin(d), np.cos(d))
    return float(np.max(np.abs(d))) if np.all(np.isfinite(d)) else math.inf


def sweep_rtol(fwd, model, masses, q0, ref_inc, target: float) -> list[dict]:
    """Run ``fwd`` down the rtol grid :data:`DM_RTOLS` until the angle error is ≤ ``target``;
    one row per rtol tried, the last one the match (or the tightest, when none matches)."""
    sweep = []
    for rtol in DM_RTOLS:
        t1 = time.perf_counter()
        inc, _, steps, status, drift = jax.block_until_ready(fwd(model, masses, q0, rtol))
        wall = time.perf_counter() - t1
        err = angle_error(inc, ref_inc) if int(status) == 0 else math.inf
        sweep.append(
            {
                "rtol": rtol,
                "error_rad": err,
                "steps": int(steps),
                "wall_s": wall,
                "constraint_drift": float(drift),
            }
        )
        if err <= target:
            break
    return sweep


# --------------------------------------------------------------------------------- MuJoCo


class MjScene:
    """A MuJoCo model of a scene at one step and integrator, with state helpers."""

    def __init__(self, scene: Scene, h: float, integrator: str, eq: dict | None = None):
        self.scene, self.h, self.integrator = scene, h, integrator
        self.model = mujoco.MjModel.from_xml_string(scene.mj_xml(h, integrator, **(eq or {})))
        self.data = mujoco.MjData(self.model)
        self.nstep = int(round(T_END / h))
        self.every = int(round(SAMPLE_DT / h))
        assert abs(self.every * h - SAMPLE_DT) < 1e-12 and abs(self.nstep * h - T_END) < 1e-12
        self.spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        self.nstate = mujoco.mj_stateSize(self.model, self.spec)

    def initial_state(self, qpos0=None) -> np.ndarray:
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[:] = self.scene.mj_qpos0 if qpos0 is None else qpos0
        state = np.empty(self.nstate)
        mujoco.mj_getState(self.model, self.data, state, self.spec)
        return state

    def rollout(self, state0, model=None, data=None) -> np.ndarray:
        """Trajectory of qpos at the samples after t = 0, shape (n_t − 1, nq); one C call."""
        states, _ = mj_rollout.rollout(
            self.model if model is None else model,
            self.data if data is None else data,
            state0[None] if state0.ndim == 1 else state0,
            nstep=self.nstep,
        )
        nq = self.model.nq
        return states[..., self.every - 1 :: self.every, 1 : 1 + nq]

    def step_loop(self, qpos0=None) -> np.ndarray:
        """The same trajectory from a Python loop of ``mj_step``."""
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)
        d.qpos[:] = self.scene.mj_qpos0 if qpos0 is None else qpos0
        out = np.empty((N_SAMPLES - 1, m.nq))
        k, every = 0, self.every
        for i in range(1, self.nstep + 1):
            mujoco.mj_step(m, d)
            if i % every == 0:
                out[k] = d.qpos
                k += 1
        return out

    def error(self, qpos, ref_inc, qpos0=None) -> float:
        q0 = self.scene.mj_qpos0 if qpos0 is None else qpos0
        return angle_error(qpos - q0, ref_inc[1:])

    def connect_violation(self, qpos) -> float:
        """Largest distance (m) between the rocker's end D and its ground pivot (four-bar)."""
        m, d = self.model, self.data
        rocker = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "rocker")
        anchor, target = m.eq_data[0, :3], m.eq_data[0, 3:6]
        worst = 0.0
        for qp in qpos:
            d.qpos[:] = qp
            mujoco.mj_kinematics(m, d)
            point = d.xpos[rocker] + d.xmat[rocker].reshape(3, 3) @ anchor
            worst = max(worst, float(np.linalg.norm(point - target)))
        return worst


# --------------------------------------------------------------------------------- helpers


def loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover
        return []


def ms(s: float) -> str:
    return f"{1e3 * s:.1f}" if s < 10 else f"{1e3 * s:.0f}"


def rate(seconds: float) -> str:
    r = T_END / seconds
    return f"{r:.3g}"


def sci(x: float) -> str:
    return "—" if x is None or not np.isfinite(x) else f"{x:.1e}"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} load {loadavg()}] {msg}", flush=True)


def timing_summary(t: dict) -> dict:
    return {k: t[k] for k in ("median_s", "min_s", "max_s", "repeats", "times_s")}


# --------------------------------------------------------------------------------- one scene


def bench_scene(scene: Scene, args, kkt_main, report: list[str]) -> dict:
    out: dict[str, Any] = {"n_bodies": scene.multibody.n_bodies, "n_joints": scene.n_links}
    model = scene.model
    masses = jnp.asarray(bodies(model).mass)
    q0 = jnp.asarray(scene.q0)
    out["coordinates"] = scene.coordinates
    out["sizes"] = {
        "n_q": scene.sizes[0],
        "n_v": scene.sizes[1],
        "n_c": int(model.constraints(0.0, q0).shape[0]),
    }
    assert float(jnp.max(jnp.abs(model.constraints(0.0, q0)), initial=0.0)) < 1e-12

    # ---- reference (Dopri8, rtol 1e-12), always in maximal coordinates: independent of the
    # joint-coordinate code, and tolerances that tight are below its round-off floor (the
    # joint-space mass matrix of a long chain is ill-conditioned)
    ref_scene = scene.maximal_scene or scene
    ref_fn = eqx.filter_jit(
        make_forward(ref_scene, kkt_main, solver=diffrax.Dopri8(), max_steps=REF_MAX_STEPS)
    )
    t0 = time.perf_counter()
    ref_inc, _, ref_steps, ref_status, ref_drift = ref_fn(
        ref_scene.model, masses, jnp.asarray(ref_scene.q0), REF_RTOL
    )
    if int(ref_status) != 0:
        raise RuntimeError(f"{scene.name}: reference simulation failed (status {ref_status})")
    ref_inc = np.asarray(ref_inc)
    out["reference"] = {
        "solver": "Dopri8",
        "rtol": REF_RTOL,
        "atol": REF_ATOL,
        "steps": int(ref_steps),
        "wall_s_incl_compile": time.perf_counter() - t0,
        "constraint_drift": float(ref_drift),
        "angle_range_rad": [float(ref_inc.min()), float(ref_inc.max())],
    }
    log(f"{scene.name}: reference {int(ref_steps)} Dopri8 steps")

    # ---- MuJoCo sweeps
    eq_main = MJ_EQ_STIFF if scene.name == "four_bar" else {}
    mj: dict[str, Any] = {"sweeps": {}}
    check = MjScene(scene, MJ_CHECK_STEP, "RK4", eq_main)
    qp = check.rollout(check.initial_state())[0]
    mj["model_check"] = {
        "integrator": "RK4",
        "h": MJ_CHECK_STEP,
        "eq": eq_main,
        "error_rad": check.error(qp, ref_inc),
    }
    if scene.name == "four_bar":
        mj["model_check"]["connect_violation_m"] = check.connect_violation(qp)
    matched_mj = {}
    for integrator, steps in (("RK4", MJ_RK4_STEPS), ("implicitfast", MJ_IMPLICIT_STEPS)):
        rows = []
        for h in steps:
            s = MjScene(scene, h, integrator, eq_main)
            st0 = s.initial_state()
            t1 = time.perf_counter()
            qp = s.rollout(st0)[0]
            wall = time.perf_counter() - t1
            err = s.error(qp, ref_inc)
            rows.append({"h": h, "error_rad": err, "wall_s": wall})
            if err <= args.target:
                matched_mj[integrator] = s
                break
            if wall * (h / steps[min(steps.index(h) + 1, len(steps) - 1)]) > args.mj_max_s:
                break  # the next step would take too long
        mj["sweeps"][integrator] = rows
    if scene.name == "four_bar":  # the default (soft) connect: error and violation
        rows = []
        for h in (0.002, 0.0005):
            s = MjScene(scene, h, "RK4", MJ_EQ_DEFAULT)
            qp = s.rollout(s.initial_state())[0]
            rows.append(
                {
                    "h": h,
                    "error_rad": s.error(qp, ref_inc),
                    "connect_violation_m": s.connect_violation(qp),
                }
            )
        mj["default_connect"] = {
            "solref": "0.02 1 (default)",
            "solimp": "0.9 0.95 0.001 0.5 2 (default)",
            "runs": rows,
        }
        mj["stiff_connect"] = {k: v for k, v in MJ_EQ_STIFF.items()}
    # time the matched MuJoCo runs: rollout (C loop) and a Python mj_step loop
    mj["matched"] = {}
    for integrator, s in matched_mj.items():
        st0 = s.initial_state()
        t_roll = time_median(lambda s=s, st0=st0: s.rollout(st0), repeats=args.repeats)
        t_loop = time_median(lambda s=s: s.step_loop(), repeats=max(2, args.repeats // 2))
        qp = s.rollout(st0)[0]
        entry = {
            "h": s.h,
            "error_rad": s.error(qp, ref_inc),
            "steps": s.nstep,
            "rollout": timing_summary(t_roll),
            "mj_step_loop": timing_summary(t_loop),
        }
        if scene.name == "four_bar":
            entry["connect_violation_m"] = s.connect_violation(qp)
        mj["matched"][integrator] = entry
    out["mujoco"] = mj
    log(
        f"{scene.name}: MuJoCo matched "
        + ", ".join(f"{k} h={v.h:g}" for k, v in matched_mj.items())
    )

    # ---- diffmbs rtol sweep for each solver (KKT: kkt_main); the faster one goes on
    solvers, forwards = {}, {}
    for name, solver in DM_SOLVERS.items():
        fwd = eqx.filter_jit(make_forward(scene, kkt_main, solver=solver, max_steps=MAX_STEPS))
        compile_fwd, _ = first_call(lambda fwd=fwd: fwd(model, masses, q0, DM_RTOLS[0]))
        sweep = sweep_rtol(fwd, model, masses, q0, ref_inc, args.target)
        if sweep[-1]["error_rad"] > args.target:
            raise RuntimeError(f"{scene.name}: {name}: no rtol in {DM_RTOLS} reaches {args.target}")
        solvers[name] = {
            "sweep": sweep,
            "matched_rtol": sweep[-1]["rtol"],
            "compile_s": compile_fwd - sweep[0]["wall_s"],  # same rtol, second call
        }
        forwards[name] = fwd
    timings = time_interleaved(
        {
            name: (lambda f=forwards[name], r=entry["matched_rtol"]: f(model, masses, q0, r))
            for name, entry in solvers.items()
        },
        repeats=args.repeats,
    )
    for name, entry in solvers.items():
        entry["matched"] = {**entry["sweep"][-1], "timing": timing_summary(timings[name])}
    chosen = min(solvers, key=lambda name: timings[name]["median_s"])
    fwd, matched_rtol = forwards[chosen], solvers[chosen]["matched_rtol"]
    compile_s = {"forward": solvers[chosen]["compile_s"]}
    dm = {
        "kkt": type(kkt_main).__name__,
        "solver": chosen,
        "solvers": solvers,
        "sweep": solvers[chosen]["sweep"],
        "matched_rtol": matched_rtol,
        "matched": solvers[chosen]["matched"],
    }
    log(
        f"{scene.name}: diffmbs "
        + "; ".join(
            f"{name} rtol {e['matched_rtol']:g}, {e['matched']['steps']} steps, "
            f"{ms(e['matched']['timing']['median_s'])} ms"
            for name, e in solvers.items()
        )
        + f" -> {chosen}"
    )

    # ---- KKT solvers: per right-hand side, and the matched simulation with the other one
    kkts = {
        "LeastSquaresKKT": LeastSquaresKKT(),
        "AugmentedLagrangianKKT": AugmentedLagrangianKKT(),
    }
    rhs = {}
    v_test = jnp.asarray(np.random.default_rng(0).normal(size=scene.sizes[1])) * 0.1
    for name, kkt in kkts.items():
        f = eqx.filter_jit(
            lambda m, q, v, kkt=kkt: accelerations(m, 0.0, q, v, kkt_solver=kkt, check=False)[0]
        )
        first_call(lambda f=f: f(model, q0, v_test))
        rhs[name] = timing_summary(time_median(lambda f=f: f(model, q0, v_test), repeats=20))
    other = "LeastSquaresKKT" if dm["kkt"] == "AugmentedLagrangianKKT" else "AugmentedLagrangianKKT"
    kkt_out = {"rhs_call": rhs}
    if scene.n_links <= args.ls_max_n or other == "AugmentedLagrangianKKT":
        fo = eqx.filter_jit(
            make_forward(scene, kkts[other], solver=DM_SOLVERS[chosen], max_steps=MAX_STEPS)
        )
        first_call(lambda: fo(model, masses, q0, matched_rtol))
        t_o = time_median(
            lambda: fo(model, masses, q0, matched_rtol), warmup=0, repeats=max(2, args.repeats // 2)
        )
        inc_o = fo(model, masses, q0, matched_rtol)[0]
        kkt_out["simulate_other"] = {
            "kkt": other,
            "timing": timing_summary(t_o),
            "error_rad": angle_error(inc_o, ref_inc),
        }
    dm["kkt_comparison"] = kkt_out

    # ---- fixed-step classical RK4 at MuJoCo's matched RK4 step
    if "RK4" in matched_mj:
        h = matched_mj["RK4"].h
        frk = eqx.filter_jit(
            lambda model, masses, q0, dt0: make_forward(
                scene,
                kkt_main,
                solver=ClassicalRK4(),
                dt0=dt0,
                stepsize_controller=diffrax.ConstantStepSize(),
                max_steps=REF_MAX_STEPS,
            )(model, masses, q0, 1.0)
        )
        if T_END / h < REF_MAX_STEPS:
            first_call(lambda: frk(model, masses, q0, jnp.asarray(h)))
            t_rk = time_median(lambda: frk(model, masses, q0, jnp.asarray(h)), repeats=args.repeats)
            inc_rk, _, steps_rk, status_rk, _ = frk(model, masses, q0, jnp.asarray(h))
            dm["fixed_step_rk4"] = {
                "h": h,
                "steps": int(steps_rk),
                "status": int(status_rk),
                "error_rad": angle_error(inc_rk, ref_inc),
                "timing": timing_summary(t_rk),
            }
    out["diffmbs"] = dm

    # ---- SciPy solve_ivp on diffmbs's equations
    if not args.no_scipy:
        # from Tsit5's matched rtol, as before the solver choice (RK45 is its analogue)
        start = solvers["Tsit5"]["matched_rtol"]
        out["scipy"] = bench_scipy(scene, kkt_main, start, ref_inc, args)
        log(f"{scene.name}: SciPy done")

    # ---- gradient / forward, for each solver at its matched rtol: a faster forward does not
    # make the gradient faster in proportion (the bar is a ratio), so both are reported
    grads, calls, compile_grads = {}, {}, {}
    for name, entry in solvers.items():

        def loss(model, masses, q0, rtol, solver=DM_SOLVERS[name]):
            fwd_s = make_forward(scene, kkt_main, solver=solver, max_steps=MAX_STEPS)
            return fwd_s(model, masses, q0, rtol)[1]

        grads[name] = eqx.filter_jit(jax.grad(loss, argnums=1))
        rtol = entry["matched_rtol"]
        compile_grads[name], _ = first_call(lambda g=grads[name], r=rtol: g(model, masses, q0, r))
        calls[f"{name} grad"] = lambda g=grads[name], r=rtol: g(model, masses, q0, r)
        calls[f"{name} forward"] = lambda f=forwards[name], r=rtol: f(model, masses, q0, r)
    # gradients and forwards called in turn: all under the same load (it drifts on a shared VM)
    t = time_interleaved(calls, repeats=args.repeats)
    per_solver = {
        name: {
            "rtol": entry["matched_rtol"],
            "forward": timing_summary(t[f"{name} forward"]),
            "grad": timing_summary(t[f"{name} grad"]),
            "ratio_median": t[f"{name} grad"]["median_s"] / t[f"{name} forward"]["median_s"],
            "ratio_min": t[f"{name} grad"]["min_s"] / t[f"{name} forward"]["min_s"],
        }
        for name, entry in solvers.items()
    }
    compile_s["grad"] = compile_grads[chosen] - t[f"{chosen} grad"]["median_s"]
    g = {
        "wrt": "body masses",
        "loss": "mean over samples of |tip|² (m²)",
        "solver": chosen,
        "adjoint": "DiscreteAdjoint (default)",
        **per_solver[chosen],
        "solvers": per_solver,
    }
    if scene.n_links <= args.fd_max_n:
        g["fd_check"] = fd_check(scene, kkt_main, DM_SOLVERS[chosen], model, masses, q0)
    out["gradient"] = g
    log(f"{scene.name}: gradient/forward {g['ratio_median']:.2f}")

    # ---- batched
    if scene.n_links <= args.batch_max_n and args.batch > 0:
        out["batch"] = bench_batch(
            scene, kkt_main, chosen, matched_rtol, matched_mj.get("RK4"), args, compile_s
        )
        log(f"{scene.name}: batch done")

    # ---- compile
    out["compile_s"] = compile_s
    out["rhs_jaxpr_equations"] = rhs_size(scene, kkt_main)
    return out


def rhs_size(scene: Scene, kkt) -> int:
    """Number of equations in the jaxpr of one vector-field evaluation (a proxy for the traced
    graph that XLA compiles; it should not grow with the number of bodies)."""
    q0 = jnp.asarray(scene.q0)
    v0 = jnp.asarray(scene.v0)
    jaxpr = jax.make_jaxpr(
        lambda m, q, v: accelerations(m, 0.0, q, v, kkt_solver=kkt, check=False)[0]
    )(scene.model, q0, v0)

    def count(j) -> int:
        n = 0
        for eqn in j.eqns:
            n += 1
            for value in eqn.params.values():
                for sub in value if isinstance(value, tuple | list) else (value,):
                    if isinstance(sub, jax.extend.core.ClosedJaxpr):
                        n += count(sub.jaxpr)
                    elif isinstance(sub, jax.extend.core.Jaxpr):
                        n += count(sub)
        return n

    return count(jaxpr.jaxpr)


def fd_check(scene, kkt, solver, model, masses, q0) -> dict:
    """AD against fourth-order central differences of the loss, both at rtol ``FD_RTOL``:
    along a random direction, and per mass when there are at most 3."""
    fwd = eqx.filter_jit(make_forward(scene, kkt, solver=solver, max_steps=REF_MAX_STEPS))
    grad = eqx.filter_jit(jax.grad(lambda *a: fwd(*a)[1], argnums=1))
    m0 = np.asarray(masses)
    g_ad = np.asarray(grad(model, masses, q0, FD_RTOL))
    rng = np.random.default_rng(7)
    directions = {"random": rng.normal(size=m0.size)}
    if m0.size <= 3:
        directions |= {f"mass{i}": np.eye(m0.size)[i] for i in range(m0.size)}
    rows = {}
    for name, d in directions.items():
        d = d / np.linalg.norm(d)
        step = FD_STEP * m0 * d
        lp2, lp, lm, lm2 = (
            float(fwd(model, jnp.asarray(m0 + k * step), q0, FD_RTOL)[1]) for k in (2, 1, -1, -2)
        )
        fd = (8 * (lp - lm) - (lp2 - lm2)) / (12 * FD_STEP)  # along m0·d, per relative step
        ad = float(g_ad @ (m0 * d))
        rows[name] = {"ad": ad, "fd": fd, "rel_diff": abs(ad - fd) / max(abs(fd), 1e-300)}
    return {
        "rtol": FD_RTOL,
        "relative_step": FD_STEP,
        "grad_ad": g_ad.tolist(),
        "directions": rows,
        "max_rel_diff": max(r["rel_diff"] for r in rows.values()),
    }


def bench_scipy(scene, kkt, start_rtol, ref_inc, args) -> dict:
    """solve_ivp on the same index-1 equations (Baumgarte-stabilised KKT accelerations): the
    right-hand side is a jitted diffmbs vector field on the flat state, NumPy in/out."""
    model = scene.model
    nq = scene.sizes[0]

    @jax.jit
    def vf(t, y):
        q, v = y[:nq], y[nq:]
        vdot = accelerations(model, t, q, v, kkt_solver=kkt, check=False)[0]
        return jnp.concatenate([model.qdot(q, v), vdot])

    def fun(t, y):
        return np.asarray(vf(t, y))

    y0 = np.concatenate([scene.q0, scene.v0])
    fun(0.0, y0)  # compile
    t_call = time_median(lambda: fun(0.0, y0), repeats=50)
    ts = TS
    q0 = jnp.asarray(scene.q0)
    ang0 = scene.angles(q0)
    angles = jax.jit(jax.vmap(lambda q: _wrap(scene.angles(q) - ang0)))
    out = {"rhs_call": timing_summary(t_call), "methods": {}}
    for method in SCIPY_METHODS:
        tries, rtol = [], start_rtol
        for _ in range(args.scipy_tries):
            t1 = time.perf_counter()
            sol = solve_ivp(
                fun, (0.0, T_END), y0, method=method, t_eval=ts, rtol=rtol, atol=rtol * ATOL_RATIO
            )
            wall = time.perf_counter() - t1
            err = (
                angle_error(angles(jnp.asarray(sol.y[:nq].T)), ref_inc) if sol.success else math.inf
            )
            tries.append({"rtol": rtol, "error_rad": err, "nfev": int(sol.nfev), "wall_s": wall})
            if err <= args.target:
                break
            rtol /= 10
        best = tries[-1]
        if best["error_rad"] <= args.target and args.repeats > 2:  # one more timed run
            t1 = time.perf_counter()
            solve_ivp(
                fun,
                (0.0, T_END),
                y0,
                method=method,
                t_eval=ts,
                rtol=best["rtol"],
                atol=best["rtol"] * ATOL_RATIO,
            )
            best["wall_s_repeat"] = time.perf_counter() - t1
        out["methods"][method] = {"tries": tries, "matched": best}
    return out


def bench_batch(
    scene, kkt, solver: str, rtol, mj_rk4: MjScene | None, args, compile_s
) -> dict:
    """``args.batch`` variants by ``diffmbs.simulate_batch`` (lockstep) and by ``jax.vmap``
    of ``diffmbs.simulate`` (:func:`make_batch_forward`), against MuJoCo's RK4 rollouts of the
    same variants one by one; the three are timed in turn (same load). The throughput ratio
    is MuJoCo's loop time over the faster mode's."""
    model = scene.model
    masses = jnp.asarray(bodies(model).mass)
    b = args.batch
    factors = np.linspace(0.8, 1.2, b)
    f, f_lock = (
        eqx.filter_jit(
            make_batch_forward(
                scene, kkt, scene.batch_kind != "angle", lockstep, solver=DM_SOLVERS[solver],
                max_steps=MAX_STEPS,
            )
        )
        for lockstep in (False, True)
    )
    if scene.batch_kind == "angle":
        angles0 = np.linspace(0.6, 1.0, b)
        q0s = jnp.asarray(np.stack([scene.state(chain_state(scene.n_links, a)) for a in angles0]))
        call = lambda: f(model, masses, q0s, rtol)  # noqa: E731
        call_lock = lambda: f_lock(model, masses, q0s, rtol)  # noqa: E731
        variants = "initial angle 0.6…1.0 rad"
    else:
        mass_b = jnp.asarray(np.asarray(masses)[None, :] * factors[:, None])
        q0 = jnp.asarray(scene.q0)
        call = lambda: f(model, mass_b, q0, rtol)  # noqa: E731
        call_lock = lambda: f_lock(model, mass_b, q0, rtol)  # noqa: E731
        variants = "all masses ×0.8…1.2"
    c, res = first_call(call)
    c_lock, res_lock = first_call(call_lock)
    repeats = max(2, args.repeats // 2)
    calls = {"diffmbs": call, "lockstep": call_lock}
    if mj_rk4 is not None:
        s = mj_rk4
        if scene.batch_kind == "angle":
            qpos0s = np.zeros((b, s.model.nq))
            qpos0s[:, 0] = angles0
            states = np.stack([s.initial_state(qp) for qp in qpos0s])

            def loop():
                return [s.rollout(st)[0] for st in states]

            models = [s.model] * b
        else:
            state0 = s.initial_state()
            states = np.repeat(state0[None], b, axis=0)
            base = s.model.body_mass.copy()
            ids = [
                mujoco.mj_name2id(s.model, mujoco.mjtObj.mjOBJ_BODY, n)
                for n in ("crank", "coupler", "rocker")
            ]

            def loop():
                res = []
                for k in range(b):
                    s.model.body_mass[ids] = np.asarray(mass_b[k])
                    res.append(s.rollout(states[k])[0])
                s.model.body_mass[:] = base
                return res

            models = []
            for k in range(b):
                mk = copy.copy(s.model)
                mk.body_mass[ids] = np.asarray(mass_b[k])
                models.append(mk)
        calls["mujoco"] = loop
    t = time_interleaved(calls, repeats=repeats, warmup=0)
    t_b, t_lock = t["diffmbs"], t["lockstep"]
    compile_s["batch"] = c - t_b["median_s"]
    compile_s["batch_lockstep"] = c_lock - t_lock["median_s"]
    statuses = np.asarray(res[3])
    out = {
        "batch": b,
        "variants": variants,
        "rtol": rtol,
        "diffmbs": timing_summary(t_b),
        "diffmbs_per_variant_s": t_b["median_s"] / b,
        "diffmbs_per_variant_min_s": t_b["min_s"] / b,
        "all_successful": bool(np.all(statuses == 0)),
        "steps_max": int(np.max(np.asarray(res[2]))),
        "lockstep": {
            **timing_summary(t_lock),
            "per_variant_s": t_lock["median_s"] / b,
            "per_variant_min_s": t_lock["min_s"] / b,
            "all_successful": bool(np.all(np.asarray(res_lock[3]) == 0)),
            "steps": int(np.max(np.asarray(res_lock[2]))),
            "max_angle_diff_vs_vmap_rad": float(
                np.max(np.abs(_wrap(np.asarray(res_lock[0]) - np.asarray(res[0]))))
            ),
        },
    }
    if mj_rk4 is None:
        return out
    t_loop = t["mujoco"]
    traj_mj = loop()
    datas2 = [mujoco.MjData(s.model) for _ in range(2)]
    t_all1 = time_median(lambda: s.rollout(states, model=models), repeats=repeats)
    t_all2 = time_median(lambda: s.rollout(states, model=models, data=datas2), repeats=repeats)
    # agreement of the two batches (each within the target of the reference → ≲ 2× target)
    inc_dm = np.asarray(res[0])[:, 1:]
    if scene.batch_kind == "angle":
        inc_mj = np.stack(traj_mj) - qpos0s[:, None, :]
    else:
        inc_mj = np.stack(traj_mj)
    d = np.arctan2(np.sin(inc_dm - inc_mj), np.cos(inc_dm - inc_mj))
    out["mujoco"] = {
        "integrator": "RK4",
        "h": s.h,
        "one_by_one_rollout": timing_summary(t_loop),
        "per_variant_s": t_loop["median_s"] / b,
        "per_variant_min_s": t_loop["min_s"] / b,
        "rollout_all_1_thread": timing_summary(t_all1),
        "rollout_all_2_threads": timing_summary(t_all2),
        "max_angle_diff_vs_diffmbs_rad": float(np.max(np.abs(d))),
    }
    # The faster of the two batch modes goes on (as the faster solver does).
    modes = {"lockstep": out["lockstep"]["per_variant_s"], "vmap": out["diffmbs_per_variant_s"]}
    out["mode"] = min(modes, key=modes.get)
    out["throughput_ratio"] = out["mujoco"]["per_variant_s"] / modes[out["mode"]]
    out["lockstep_throughput_ratio"] = (
        out["mujoco"]["per_variant_s"] / out["lockstep"]["per_variant_s"]
    )
    out["vmap_throughput_ratio"] = out["mujoco"]["per_variant_s"] / out["diffmbs_per_variant_s"]
    inc_lock = np.asarray(res_lock[0])[:, 1:]
    d = np.arctan2(np.sin(inc_lock - inc_mj), np.cos(inc_lock - inc_mj))
    out["lockstep"]["max_angle_diff_vs_mujoco_rad"] = float(np.max(np.abs(d)))
    return out


# --------------------------------------------------------------------------------- report


def build_report(results: dict, args) -> tuple[list[str], dict]:
    lines: list[str] = []
    scenes = results["scenes"]
    bars: dict[str, Any] = {"speed_within_5x": {}, "batch_above_loop": {}, "grad_le_4x": {}}

    lines.append(
        f"## Matched accuracy: max joint-angle error ≤ {args.target:g} rad over "
        f"{T_END:g} s (simulated s per wall s; higher is faster)\n"
    )
    rows = []
    for name, r in scenes.items():
        mjm = r["mujoco"]["matched"]
        dm = r["diffmbs"]
        t_dm = dm["matched"]["timing"]
        best_mj, best_t = None, math.inf
        cells = [name]
        for integ in ("RK4", "implicitfast"):
            e = mjm.get(integ)
            if e is None:
                last = r["mujoco"]["sweeps"][integ][-1]
                cells.append(f"not reached (h={last['h']:g}: {sci(last['error_rad'])})")
                continue
            t = min(e["rollout"]["median_s"], e["mj_step_loop"]["median_s"])
            if t < best_t:
                best_mj, best_t = integ, t
            cells.append(
                f"h={e['h']:g}, err {sci(e['error_rad'])}: "
                f"{rate(e['rollout']['median_s'])} (loop {rate(e['mj_step_loop']['median_s'])})"
            )
        cells.append(
            f"{dm['solver']} rtol={dm['matched_rtol']:g}, {dm['matched']['steps']} steps, err "
            f"{sci(dm['matched']['error_rad'])}: {rate(t_dm['median_s'])} "
            f"(best {rate(t_dm['min_s'])})"
            + "".join(
                f"; {solver} rtol={e['matched_rtol']:g}, {e['matched']['steps']} steps: "
                f"{rate(e['matched']['timing']['median_s'])}"
                for solver, e in dm["solvers"].items()
                if solver != dm["solver"]
            )
        )
        sp = r.get("scipy", {}).get("methods", {})
        for method in SCIPY_METHODS:
            e = sp.get(method, {}).get("matched")
            if e is None:
                cells.append("—")
            else:
                w = min(e["wall_s"], e.get("wall_s_repeat", math.inf))
                cells.append(f"rtol={e['rtol']:g}, err {sci(e['error_rad'])}: {rate(w)}")
        ratio = t_dm["median_s"] / best_t if best_mj else math.inf
        ratio_min = (
            t_dm["min_s"]
            / min(mjm[best_mj]["rollout"]["min_s"], mjm[best_mj]["mj_step_loop"]["min_s"])
            if best_mj
            else math.inf
        )
        cells.append(f"{ratio:.1f}× (min {ratio_min:.1f}×)")
        rows.append(cells)
        bars["speed_within_5x"][name] = {
            "ratio_median": ratio,
            "ratio_min": ratio_min,
            "mujoco_integrator": best_mj,
            "pass": bool(ratio <= SPEED_BAR),
        }
    first = scenes[next(iter(scenes))]
    lines.append(
        markdown_table(
            [
                "scene",
                "MuJoCo RK4",
                "MuJoCo implicitfast",
                f"diffmbs, faster of {' and '.join(DM_SOLVERS)} ({first['coordinates']} "
                f"coordinates, {first['diffmbs']['kkt']})",
                "SciPy RK45",
                "SciPy DOP853",
                "diffmbs / MuJoCo time",
            ],
            rows,
        )
    )

    lines.append("\n## Same fixed step: classical RK4 at MuJoCo's matched step (ms per 2 s)\n")
    rows = []
    for name, r in scenes.items():
        fx = r["diffmbs"].get("fixed_step_rk4")
        e = r["mujoco"]["matched"].get("RK4")
        if not fx or not e:
            continue
        rows.append(
            [
                name,
                f"{fx['h']:g}",
                fx["steps"],
                ms(e["rollout"]["median_s"]),
                sci(e["error_rad"]),
                ms(fx["timing"]["median_s"]),
                sci(fx["error_rad"]),
                f"{fx['timing']['median_s'] / e['rollout']['median_s']:.0f}×",
                f"{1e6 * fx['timing']['median_s'] / fx['steps']:.0f}",
                f"{1e6 * e['rollout']['median_s'] / e['steps']:.1f}",
            ]
        )
    lines.append(
        markdown_table(
            [
                "scene",
                "h (s)",
                "steps",
                "MuJoCo ms",
                "MuJoCo err",
                "diffmbs ms",
                "diffmbs err",
                "ratio",
                "diffmbs µs/step",
                "MuJoCo µs/step",
            ],
            rows,
        )
    )

    lines.append("\n## KKT solvers (diffmbs): one right-hand side and the matched simulation\n")
    rows = []
    for name, r in scenes.items():
        k = r["diffmbs"]["kkt_comparison"]
        ls, al = k["rhs_call"]["LeastSquaresKKT"], k["rhs_call"]["AugmentedLagrangianKKT"]
        so = k.get("simulate_other")
        main_t = r["diffmbs"]["matched"]["timing"]["median_s"]
        rows.append(
            [
                name,
                f"{r['sizes']['n_v']} / {r['sizes']['n_c']}",
                f"{1e6 * ls['min_s']:.0f}",
                f"{1e6 * al['min_s']:.0f}",
                f"{ls['min_s'] / al['min_s']:.1f}×",
                f"{ms(main_t)} ({r['diffmbs']['kkt']})",
                f"{ms(so['timing']['median_s'])} ({so['kkt']}, err {sci(so['error_rad'])})"
                if so
                else "skipped",
            ]
        )
    lines.append(
        markdown_table(
            [
                "scene",
                "n_v / n_c",
                "RHS LeastSquares µs (min)",
                "RHS AugLagrangian µs (min)",
                "LS / AL",
                "simulate (matched)",
                "simulate, other KKT",
            ],
            rows,
        )
    )

    lines.append("\n## Compile time (first call − median later call, s) and traced graph size\n")
    rows = []
    for name, r in scenes.items():
        c = r["compile_s"]
        rows.append(
            [
                name,
                r["n_bodies"],
                f"{c['forward']:.1f}",
                f"{c['grad']:.1f}",
                f"{c['batch_lockstep']:.1f}" if "batch_lockstep" in c else "—",
                f"{c['batch']:.1f}" if "batch" in c else "—",
                r["rhs_jaxpr_equations"],
            ]
        )
    lines.append(
        markdown_table(
            [
                "scene", "bodies", "forward", "grad", "batch (lockstep)", "batch (vmap)",
                "RHS jaxpr equations",
            ],
            rows,
        )
    )

    lines.append("\n## Gradient (jax.grad w.r.t. the body masses) / forward, at the matched rtol\n")
    rows = []
    for name, r in scenes.items():
        g = r["gradient"]
        fd = g.get("fd_check")
        rows.append(
            [
                name,
                f"{g['solver']} {g['rtol']:g}",
                ms(g["forward"]["median_s"]),
                ms(g["grad"]["median_s"]),
                f"{g['ratio_median']:.2f}",
                f"{g['ratio_min']:.2f}",
                f"{fd['max_rel_diff']:.1e}" if fd else "—",
                "; ".join(
                    f"{solver} {e['ratio_median']:.2f} ({ms(e['grad']['median_s'])} ms)"
                    for solver, e in g["solvers"].items()
                    if solver != g["solver"]
                ),
                pass_fail(g["ratio_median"] <= GRAD_BAR),
            ]
        )
        bars["grad_le_4x"][name] = {
            "ratio_median": g["ratio_median"],
            "ratio_min": g["ratio_min"],
            "pass": bool(g["ratio_median"] <= GRAD_BAR),
        }
    lines.append(
        markdown_table(
            [
                "scene",
                "solver, rtol",
                "forward ms",
                "grad ms",
                "ratio (median)",
                "ratio (min)",
                f"AD vs FD (rtol {FD_RTOL:g})",
                "other solver: ratio (grad)",
                "bar ≤ 4×",
            ],
            rows,
        )
    )

    lines.append(f"\n## Batched: {args.batch} variants, time per variant (ms)\n")
    rows = []
    for name, r in scenes.items():
        b = r.get("batch")
        if not b or "mujoco" not in b:
            continue
        m = b["mujoco"]
        n = b["batch"]
        lock = b["lockstep"]
        best = min(lock["per_variant_s"], b["diffmbs_per_variant_s"])
        ok = best < m["per_variant_s"]
        rows.append(
            [
                name,
                b["variants"],
                f"{1e3 * lock['per_variant_s']:.2f}",
                f"{1e3 * b['diffmbs_per_variant_s']:.2f}",
                f"{1e3 * m['per_variant_s']:.3f} (h={m['h']:g})",
                f"{1e3 * m['rollout_all_1_thread']['median_s'] / n:.3f}",
                f"{1e3 * m['rollout_all_2_threads']['median_s'] / n:.3f}",
                f"{b['lockstep_throughput_ratio']:.3f}; {b['vmap_throughput_ratio']:.3f}",
                f"{lock['max_angle_diff_vs_mujoco_rad']:.1e}",
                pass_fail(ok),
            ]
        )
        bars["batch_above_loop"][name] = {
            "mode": b["mode"],
            "diffmbs_per_variant_s": best,
            "diffmbs_lockstep_per_variant_s": lock["per_variant_s"],
            "diffmbs_vmap_per_variant_s": b["diffmbs_per_variant_s"],
            "mujoco_loop_per_variant_s": m["per_variant_s"],
            "pass": bool(ok),
        }
    lines.append(
        markdown_table(
            [
                "scene",
                "variants",
                "diffmbs simulate_batch (lockstep)",
                "diffmbs vmap(simulate)",
                "MuJoCo loop (RK4)",
                "MuJoCo rollout all, 1 thread",
                "…, 2 threads",
                "throughput / MuJoCo loop: lockstep; vmap",
                "max abs Δθ, lockstep vs MJ",
                "bar: above loop",
            ],
            rows,
        )
    )

    lines.append("\n## Bars (issue #4)\n")
    for key, label in (
        ("speed_within_5x", "single-scene time within 5× of MuJoCo"),
        ("batch_above_loop", "batched throughput above MuJoCo's one-by-one loop"),
        ("grad_le_4x", "gradient ≤ 4× forward"),
    ):
        per = bars[key]
        if not per:
            continue
        ok = all(v["pass"] for v in per.values())
        bars[key]["all_pass"] = ok
        detail = ", ".join(
            f"{n}: {pass_fail(v['pass'])}"
            + (f" ({v['ratio_median']:.1f}×)" if "ratio_median" in v else "")
            for n, v in per.items()
            if isinstance(v, dict)
        )
        lines.append(f"- {label}: **{pass_fail(ok)}** — {detail}")
    return lines, bars


# --------------------------------------------------------------------------------- main


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help="chains N = 2, 10 and the four-bar, 3 repeats, batch 32",
    )
    p.add_argument("--sizes", type=int, nargs="+", default=None, help="chain sizes (2 10 30)")
    p.add_argument("--no-four-bar", action="store_true")
    p.add_argument("--batch", type=int, default=None, help="variants (default 256; quick 32)")
    p.add_argument(
        "--batch-max-n", type=int, default=10, help="largest chain that is batched (default 10)"
    )
    p.add_argument("--repeats", type=int, default=None, help="timed repeats (5; quick 3)")
    p.add_argument("--target", type=float, default=TARGET, help="angle error target (rad)")
    p.add_argument(
        "--kkt",
        choices=("al", "ls"),
        default="al",
        help="KKT solver of the main timings (al: AugmentedLagrangianKKT)",
    )
    p.add_argument(
        "--ls-max-n",
        type=int,
        default=10,
        help="largest chain simulated with the other KKT solver too",
    )
    p.add_argument(
        "--coordinates",
        choices=("maximal", "joint"),
        default="maximal",
        help="diffmbs model: maximal coordinates and joints as constraints, or joint coordinates "
        "(a JointCoordinateModel: tree joints as coordinates, loop closures as constraints)",
    )
    p.add_argument("--fd-max-n", type=int, default=10, help="largest chain given the FD check")
    p.add_argument("--no-scipy", action="store_true")
    p.add_argument("--scipy-tries", type=int, default=3)
    p.add_argument(
        "--mj-max-s",
        type=float,
        default=20.0,
        help="skip a MuJoCo sweep step expected to take longer (s)",
    )
    p.add_argument(
        "--cores", type=int, default=None, help="run on this many CPU cores (default: all)"
    )
    p.add_argument("--out", default=str(_HERE / "results" / "multibody.json"))
    args = p.parse_args(argv)
    cores = limit_cores(args.cores)
    if mujoco is None:
        raise SystemExit(
            "benchmarks/multibody.py needs MuJoCo: pip install mujoco "
            "(benchmark-only; not a diffmbs dependency)"
        )
    sizes = args.sizes or ([2, 10] if args.quick else [2, 10, 30])
    args.batch = args.batch if args.batch is not None else (32 if args.quick else 256)
    args.repeats = args.repeats or (3 if args.quick else 5)

    t_start = time.perf_counter()
    load_start = loadavg()
    log(
        f"start: sizes {sizes}, four-bar {not args.no_four_bar}, batch {args.batch}, "
        f"repeats {args.repeats}, target {args.target:g} rad"
    )
    jax.block_until_ready(jax.jit(lambda x: x + 1)(jnp.ones(3)))  # backend warm-up
    kkt_main = AugmentedLagrangianKKT() if args.kkt == "al" else LeastSquaresKKT()

    scenes = [chain_scene(n) for n in sizes]
    if not args.no_four_bar:
        scenes.append(four_bar_scene())
    if args.coordinates == "joint":
        scenes = [in_joint_coordinates(scene) for scene in scenes]
    results: dict[str, Any] = {"scenes": {}}
    load_samples = {}
    for scene in scenes:
        report: list[str] = []
        results["scenes"][scene.name] = bench_scene(scene, args, kkt_main, report)
        load_samples[scene.name] = loadavg()
        # Each scene compiles dozens of programs; dropping them keeps the process under the
        # kernel's memory-map limit (vm.max_map_count), which LLVM otherwise hits mid-run.
        jax.clear_caches()

    lines, bars = build_report(results, args)
    load_end = loadavg()
    header = (
        f"Load average (1, 5, 15 min): start {load_start}, end {load_end}; "
        f"{os.cpu_count()} logical cores; MuJoCo {mujoco.__version__}, jax {jax.__version__}, "
        f"scipy {scipy.__version__}."
    )
    text = "\n".join([header, ""] + lines)
    print()
    print(text)
    total = time.perf_counter() - t_start
    print(f"\ntotal wall time: {total:.0f} s")
    data = {
        "config": {
            "t_end_s": T_END,
            "sample_dt_s": SAMPLE_DT,
            "n_samples": N_SAMPLES,
            "target_rad": args.target,
            "atol_ratio": ATOL_RATIO,
            "reference": "Dopri8 rtol 1e-12, maximal coordinates",
            "chain": {
                "link_length_m": LINK,
                "link_mass_kg": LINK_MASS,
                "initial_angle_rad": CHAIN_ANGLE,
                "sizes": sizes,
            },
            "four_bar": {"lengths_m": mm.FOUR_BAR, "crank_angle_rad": FOUR_BAR_CRANK},
            "mujoco_rk4_steps": MJ_RK4_STEPS,
            "mujoco_implicitfast_steps": MJ_IMPLICIT_STEPS,
            "diffmbs_rtols": DM_RTOLS,
            "mujoco_four_bar_connect": MJ_EQ_STIFF,
            "kkt": type(kkt_main).__name__,
            "coordinates": args.coordinates,
            "batch": args.batch,
            "repeats": args.repeats,
            "quick": args.quick,
            "cores": cores,
            "max_steps": MAX_STEPS,
        },
        "results": results,
        "bars": bars,
        "report": text,
        "load_average": {"start": load_start, "end": load_end, "after_scene": load_samples},
        "machine": machine_info() | {"mujoco": mujoco.__version__},
        "timestamp_utc": utc_timestamp(),
        "total_wall_s": total,
    }
    path = write_json_atomic(args.out, data)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
