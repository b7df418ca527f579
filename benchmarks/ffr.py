"""Benchmark: a flexible pendulum (floating frame of reference, modal reduction), diffmbs against
Exudyn's ``ObjectFFRFreducedOrder``.

The structure is a steel bar, 2 m × 40 mm × 20 mm, meshed with 8-node hexahedra (40 along the
length, 2 × 2 across; incompatible bending modes, so the bar bends like an Euler–Bernoulli
beam). Solid elements are used, not beams, because Exudyn's FFR body carries nodal
*translations* only: with a translation-only mesh whose mass matrix is ``M̄ ⊗ I₃`` both codes'
FFR equations are exact (no interpolation of rotated mode shapes) and identical. The mass and
stiffness matrices, the nodes and the mode basis (free-free elastic modes from
``diffmbs.flex.FreeFreeModes``) are computed once here and handed unchanged to both codes.

Scene: the bar is pinned (spherical joint) at the centre of its root face, starts horizontal
along x, at rest except for a spin of 2 rad/s about the vertical z, and falls under gravity
(−z) for 0.5 s: a 3-D spherical pendulum whose swing bends the bar. Modal damping 2 %.

Usage::

    python benchmarks/ffr.py                  # full run (~6 min on a shared 2-core CPU)
    python benchmarks/ffr.py --quick          # 10 modes, 0.25 s record, batch of 32 (~1 min)
    python benchmarks/ffr.py --batch 4096 --chunk 0 --out /tmp/ffr_gpu.json   # GPU

Exudyn runs in a separate process (spawned, without JAX) so that neither library's threads
disturb the other's timings. See benchmarks/README.md for what is measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import multiprocessing as mp
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # script or python -m
from _common import (  # noqa: E402
    first_call,
    machine_info,
    markdown_table,
    pass_fail,
    utc_timestamp,
    write_json_atomic,
)

# --------------------------------------------------------------------------- configuration

LENGTH, WIDTH, HEIGHT = 2.0, 0.04, 0.02  # m: x (axis), y, z
N_EL, N_Y, N_Z = 40, 2, 2  # hexahedra along x, y, z
YOUNG, POISSON, DENSITY = 210e9, 0.3, 7850.0  # steel
GRAVITY = (0.0, 0.0, -9.81)  # m/s²
SPIN = 2.0  # rad/s about z at t = 0
ZETA = 0.02  # modal damping ratio
BATCH_ZETA = (0.005, 0.05)  # range of damping ratios of the batch variants
T_END = 0.5  # s
DT_SAVE = 2e-3  # s (sample interval of both codes' outputs)
MODES = (10, 40)

REF_RTOL = 1e-10  # diffmbs reference tolerance (atol = ATOL_FACTOR · rtol)
ATOL_FACTOR = 1e-3
REF_H = 1e-5  # Exudyn reference step (s)
REF_NEWTON_RTOL = 1e-10
DIFFMBS_RTOLS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9)
EXUDYN_STEPS = (1e-3, 5e-4, 2.5e-4, 1e-4, 5e-5, 2e-5, 1e-5)
TARGETS = (1e-3, 1e-4)  # accuracy levels for the matched-speed comparison; bar at the last

AGREEMENT_BAR = 1e-3
SPEED_BAR = 3.0  # diffmbs wall time ≤ 3 × Exudyn's at the same accuracy


# --------------------------------------------------------------------------- the FE model


def hex8_box(dx: float, dy: float, dz: float, young: float, poisson: float, density: float):
    """Stiffness ``(24, 24)`` (nodes × xyz) and scalar consistent mass ``(8, 8)`` of a
    rectangular 8-node brick, 2 × 2 × 2 Gauss points.

    Stiffness: isoparametric trilinear element with Wilson's incompatible modes ``1 − ξ²``,
    ``1 − η²``, ``1 − ζ²`` per displacement component, condensed statically (exact pure
    bending of rectangular elements; no shear locking). Mass ``∫ρ N Nᵀ dV`` (the vector mass
    matrix is ``M̄ ⊗ I₃``). Returns ``(k, m, corners)``, corners in ±1 local coordinates.
    """
    half = np.array([dx, dy, dz]) / 2
    corners = np.array(
        [[-1, -1, -1], [1, -1, -1], [1, 1, -1], [-1, 1, -1],
         [-1, -1, 1], [1, -1, 1], [1, 1, 1], [-1, 1, 1]], dtype=float,
    )  # fmt: skip
    lam = young * poisson / ((1 + poisson) * (1 - 2 * poisson))
    mu = young / (2 * (1 + poisson))
    d = np.zeros((6, 6))
    d[:3, :3] = lam
    d[np.arange(3), np.arange(3)] += 2 * mu
    d[3:, 3:] = mu * np.eye(3)
    det_j = float(np.prod(half))

    def b_matrix(grads):  # (n, 3) shape-function gradients -> (6, 3n), Voigt xx yy zz yz xz xy
        b = np.zeros((6, 3 * grads.shape[0]))
        for i, (gx, gy, gz) in enumerate(grads):
            b[:, 3 * i : 3 * i + 3] = [
                [gx, 0, 0], [0, gy, 0], [0, 0, gz], [0, gz, gy], [gz, 0, gx], [gy, gx, 0],
            ]  # fmt: skip
        return b

    g = 1 / math.sqrt(3)
    kuu, kua, kaa = np.zeros((24, 24)), np.zeros((24, 9)), np.zeros((9, 9))
    mass = np.zeros((8, 8))
    for p in np.array(np.meshgrid([-g, g], [-g, g], [-g, g], indexing="ij")).reshape(3, -1).T:
        n = np.prod(1 + corners * p, axis=1) / 8
        grads = np.empty((8, 3))
        for a in range(3):
            o1, o2 = [e for e in range(3) if e != a]
            grads[:, a] = (
                corners[:, a] * (1 + corners[:, o1] * p[o1]) * (1 + corners[:, o2] * p[o2])
            )
        grads /= 8 * half
        bu = b_matrix(grads)
        ba = b_matrix(np.diag(-2 * p / half))  # incompatible modes: d(1 − ξ_a²)/dx_a
        kuu += bu.T @ d @ bu * det_j
        kua += bu.T @ d @ ba * det_j
        kaa += ba.T @ d @ ba * det_j
        mass += density * np.outer(n, n) * det_j
    k = kuu - kua @ np.linalg.solve(kaa, kua.T)
    return 0.5 * (k + k.T), mass, corners


def bar_mesh():
    """Nodes ``(n, 3)``, mass and stiffness ``(3n, 3n)`` (DOFs node by node, ``ux uy uz``: the
    order of Exudyn's ``FEMinterface``), the root-face pin (rows, weights) and the tip row."""
    xs = np.linspace(0.0, LENGTH, N_EL + 1)
    ys = np.linspace(-WIDTH / 2, WIDTH / 2, N_Y + 1)
    zs = np.linspace(-HEIGHT / 2, HEIGHT / 2, N_Z + 1)
    nodes = np.array([[x, y, z] for x in xs for y in ys for z in zs])
    row = lambda i, j, k: (i * (N_Y + 1) + j) * (N_Z + 1) + k  # noqa: E731
    ke, me, corners = hex8_box(LENGTH / N_EL, WIDTH / N_Y, HEIGHT / N_Z, YOUNG, POISSON, DENSITY)
    n = len(nodes)
    stiffness = np.zeros((3 * n, 3 * n))
    mbar = np.zeros((n, n))
    for i in range(N_EL):
        for j in range(N_Y):
            for k in range(N_Z):
                conn = np.array(
                    [row(i + (c[0] > 0), j + (c[1] > 0), k + (c[2] > 0)) for c in corners]
                )
                dofs = (3 * conn[:, None] + np.arange(3)).ravel()
                stiffness[np.ix_(dofs, dofs)] += ke
                mbar[np.ix_(conn, conn)] += me
    mass = np.kron(mbar, np.eye(3))
    # Pin: the root face's area-weighted centre (bilinear quads: corner 1, edge 2, centre 4).
    face = [row(0, j, k) for j in range(N_Y + 1) for k in range(N_Z + 1)]
    wy = np.array([1.0 if j in (0, N_Y) else 2.0 for j in range(N_Y + 1)])
    wz = np.array([1.0 if k in (0, N_Z) else 2.0 for k in range(N_Z + 1)])
    weights = np.outer(wy, wz).ravel()
    weights /= weights.sum()
    tip = row(N_EL, N_Y // 2, N_Z // 2)
    return nodes, mass, stiffness, np.array(face), weights, tip


# --------------------------------------------------------------------------- diffmbs side


@functools.cache
def _pendulum_class():
    import equinox as eqx
    import jax.numpy as jnp

    from diffmbs.flex import FreeModalBody, NodeModes, node_position

    class PinnedFlexiblePendulum(FreeModalBody):
        """A :class:`~diffmbs.flex.FreeModalBody` held by a spherical joint: the body point
        ``pin`` (a :class:`~diffmbs.flex.NodeModes`, here the weighted centre of the root face)
        stays at the world point ``anchor``: ``Φ = r₀ + A (x̄ + Ψ_P q_f) − anchor``."""

        pin: NodeModes | None = None
        anchor: jnp.ndarray = eqx.field(converter=jnp.asarray, default=(0.0, 0.0, 0.0))

        def constraints(self, t, q):
            del t
            r, a, q_f = self.split(q)
            return node_position(r, a, q_f, self.pin) - self.anchor

    return PinnedFlexiblePendulum


def diffmbs_model(nodes, mass, stiffness, face, weights, n_modes):
    """FE model, free-free basis, modal data and the pendulum (damping ζ = ZETA)."""
    import jax.numpy as jnp

    from diffmbs.flex import FEModel, FreeFreeModes, ModalDampingRatios, NodeModes, modal_data

    n = len(nodes)
    fe = FEModel(
        mass=jnp.asarray(mass),
        stiffness=jnp.asarray(stiffness),
        nodes=jnp.asarray(nodes),
        dof_nodes=tuple(int(p) for p in np.repeat(np.arange(n), 3)),
        dof_components=tuple(int(c) for c in np.tile(np.arange(3), n)),
        node_ids=tuple(range(n)),
    )
    basis = FreeFreeModes(n_modes=n_modes)(fe)
    data = modal_data(fe, basis, source="benchmarks/ffr.py hex8 bar")
    w = jnp.asarray(weights)
    pin = NodeModes(
        position=jnp.einsum("p,pa->a", w, data.nodes[face]),
        translation=jnp.einsum("p,pam->am", w, data.translations[face]),
        rotation=jnp.zeros((3, n_modes)),
    )
    system = _pendulum_class()(
        data.invariants, data.modal_stiffness, ModalDampingRatios(ZETA), GRAVITY, pin
    )
    return fe, basis, data, system


def initial_state(system):
    # Frame origin = the pin's undeformed position (0, 0, 0): at rest there, spinning about z.
    return system.initial_state(omega_bar=(0.0, 0.0, SPIN))


def pendulum_energy(system, q, v):
    """``T + ½ q_fᵀ K q_f − g · (m r₀ + A S̄(q))`` (J) at one state."""
    import jax.numpy as jnp

    from diffmbs.flex import ffr_mass_matrix

    r, a, q_f = system.split(q)
    inv = system.invariants
    kinetic = 0.5 * v @ ffr_mass_matrix(inv, q_f, a) @ v
    elastic = 0.5 * q_f @ system.stiffness @ q_f
    g = jnp.asarray(GRAVITY)
    return kinetic + elastic - g @ (inv.mass * r + a @ inv.first_moment_at(q_f))


# --------------------------------------------------------------------------- Exudyn side
# Runs in a spawned worker process that never imports JAX.


class _ExudynPendulum:
    """The same pendulum as an Exudyn ``ObjectFFRFreducedOrder`` (built with
    ``ObjectFFRFreducedOrderInterface`` from the shared M, K, nodes and mode basis)."""

    def __init__(self, nodes, mass, stiffness, modes, face, weights, t_end, dt_save):
        import exudyn as exu
        import scipy.sparse as sps
        from exudyn.FEM import FEMinterface, ObjectFFRFreducedOrderInterface
        from exudyn.itemInterface import (
            MarkerBodyPosition,
            MarkerSuperElementPosition,
            ObjectGround,
            SensorNode,
            SphericalJoint,
        )

        self.exu = exu
        self.t_end, self.dt_save = t_end, dt_save
        self.sc = exu.SystemContainer()
        mbs = self.mbs = self.sc.AddSystem()
        fem = FEMinterface()
        fem.nodes = {"Position": np.asarray(nodes)}
        fem.massMatrix = sps.csr_matrix(mass)
        fem.stiffnessMatrix = sps.csr_matrix(stiffness)
        fem.modeBasis = {"matrix": np.asarray(modes), "type": "NormalModes"}
        cms = self.cms = ObjectFFRFreducedOrderInterface(fem)
        # Gravity by LoadMassProportional: exact here because free-free modes have ∫ρΨ = 0 (the
        # Exudyn gravity torque uses the undeformed first moment only).
        obj = cms.AddObjectFFRFreducedOrder(
            mbs,
            positionRef=[0.0, 0.0, 0.0],
            initialVelocity=[0.0, 0.0, 0.0],
            initialAngularVelocity=[0.0, 0.0, SPIN],
            gravity=list(GRAVITY),
        )
        self.body, self.n_rigid, self.n_modal = (
            obj["oFFRFreducedOrder"], obj["nRigidBody"], obj["nGenericODE2"],
        )  # fmt: skip
        self.omega = np.sqrt(np.maximum(np.diag(cms.stiffnessMatrixReduced), 0.0))
        self.set_damping(ZETA, assemble=False)
        ground = mbs.AddObject(ObjectGround())
        m_ground = mbs.AddMarker(MarkerBodyPosition(bodyNumber=ground, localPosition=[0, 0, 0]))
        m_pin = mbs.AddMarker(
            MarkerSuperElementPosition(
                bodyNumber=self.body,
                meshNodeNumbers=[int(i) for i in face],
                weightingFactors=[float(w) for w in weights],
            )
        )
        mbs.AddObject(SphericalJoint(markerNumbers=[m_ground, m_pin]))
        ov = exu.OutputVariableType
        self.sensors = [
            mbs.AddSensor(SensorNode(nodeNumber=nn, storeInternal=True, outputVariableType=o))
            for nn, o in (
                (self.n_modal, ov.Coordinates),
                (self.n_rigid, ov.Position),
                (self.n_rigid, ov.RotationMatrix),
            )
        ]
        mbs.Assemble()

    def set_damping(self, zeta, assemble=True):
        """Modal damping ``D = diag(2 ζ ω_k)`` (mass-orthonormal modes), as diffmbs'
        ``ModalDampingRatios``."""
        exu = self.exu
        mc = exu.MatrixContainer()
        mc.SetWithDenseMatrix(np.diag(2.0 * zeta * self.omega), useDenseMatrix=False)
        self.mbs.SetObjectParameter(self.body, "dampingMatrixReduced", mc)
        if assemble:
            self.mbs.Assemble()

    def invariants(self):
        c = self.cms
        return {
            "mass": float(c.totalMass),
            "center_of_mass": np.asarray(c.chiU),
            "inertia": np.asarray(c.inertiaLocal),
            "modal_mass": np.asarray(c.massMatrixReduced),
            "modal_stiffness": np.asarray(c.stiffnessMatrixReduced),
            "mPhitTPsi": np.asarray(c.mPhitTPsi),
            "mXRefTildePsi": np.asarray(c.mXRefTildePsi),
            "mXRefTildePsiTilde": np.asarray(c.mXRefTildePsiTilde),
            "mPsiTildePsi": np.asarray(c.mPsiTildePsi),
            "mPsiTildePsiTilde": np.asarray(c.mPsiTildePsiTilde),
        }

    def solve(self, h, newton_rtol=1e-8, spectral_radius=0.9):
        """Generalized-α with ``round(t_end / h)`` steps; returns the samples and the wall time
        of ``SolveDynamic`` alone."""
        exu = self.exu
        ss = exu.SimulationSettings()
        ti = ss.timeIntegration
        ti.endTime = self.t_end
        ti.numberOfSteps = int(round(self.t_end / h))
        ti.verboseMode = 0
        ti.newton.relativeTolerance = newton_rtol
        ti.generalizedAlpha.spectralRadius = spectral_radius
        ss.solutionSettings.writeSolutionToFile = False
        ss.solutionSettings.sensorsWritePeriod = self.dt_save
        ss.linearSolver.solverType = exu.LinearSolverType.EXUdense
        ss.parallel.numberOfThreads = 1
        ss.show.statistics = False
        ss.show.computationTime = False
        t0 = time.perf_counter()
        ok = self.mbs.SolveDynamic(ss, solverType=exu.DynamicSolverType.GeneralizedAlpha)
        wall = time.perf_counter() - t0
        if ok is False:
            raise RuntimeError(f"Exudyn SolveDynamic failed (h = {h})")
        q_f, pos, rot = (np.asarray(self.mbs.GetSensorStoredData(s)) for s in self.sensors)
        return {
            "wall_s": wall,
            "steps": ti.numberOfSteps,
            "t": q_f[:, 0],
            "q_f": q_f[:, 1:],
            "r0": pos[:, 1:],
            "rotation": rot[:, 1:].reshape(-1, 3, 3),
        }


def _exudyn_server(conn):
    """Worker loop: ``(command, kwargs)`` in, result or ``("error", traceback)`` out."""
    model = None
    while True:
        cmd, kw = conn.recv()
        try:
            if cmd == "stop":
                conn.send(("ok", None))
                return
            if cmd == "version":
                import exudyn

                out = exudyn.__version__
            elif cmd == "build":
                t0 = time.perf_counter()
                model = _ExudynPendulum(**kw)
                out = {"build_s": time.perf_counter() - t0, "invariants": model.invariants()}
            elif cmd == "damping":
                model.set_damping(kw["zeta"])
                out = None
            elif cmd == "solve":
                out = model.solve(**kw)
            else:
                raise ValueError(f"unknown command {cmd!r}")
            conn.send(("ok", out))
        except Exception:  # noqa: BLE001 - report any failure to the parent
            conn.send(("error", traceback.format_exc()))


class ExudynWorker:
    """Parent-side handle of the spawned Exudyn process."""

    def __init__(self):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_exudyn_server, args=(child,), daemon=True)
        self.proc.start()

    def __call__(self, cmd, **kw):
        self.conn.send((cmd, kw))
        status, out = self.conn.recv()
        if status == "error":
            raise RuntimeError(f"Exudyn worker failed on {cmd!r}:\n{out}")
        return out

    def close(self):
        try:
            self("stop")
        finally:
            self.proc.join(timeout=10)


# --------------------------------------------------------------------------- comparisons


def tip_history(q_f, modes, tip):
    """Body-frame elastic displacement of the tip node, ``Ψ_tip q_f(t)``, shape (n_t, 3)."""
    return np.asarray(q_f) @ np.asarray(modes)[3 * tip : 3 * tip + 3].T


def rel_error(tip, tip_ref):
    """``max_t |tip − tip_ref| / max_t |tip_ref|`` (Euclidean norm over the 3 components)."""
    amp = np.max(np.linalg.norm(tip_ref, axis=1))
    return float(np.max(np.linalg.norm(np.asarray(tip) - tip_ref, axis=1)) / amp)


def world_tip(r0, rot, q_f, nodes, modes, tip):
    """World tip position ``r₀ + A (x̄ + Ψ q_f)``, (n_t, 3)."""
    local = nodes[tip][None, :] + tip_history(q_f, modes, tip)
    return np.asarray(r0) + np.einsum("tab,tb->ta", np.asarray(rot), local)


def quat_matrices(p):
    p = np.asarray(p) / np.linalg.norm(p, axis=1, keepdims=True)
    w, x, y, z = p.T
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )


def _on_grid(res, ts):
    """Exudyn's sensor rows on the common time grid (interpolated if the rows do not fall on it
    exactly; the misalignment is recorded)."""
    t = res["t"]
    if t.shape == ts.shape and np.max(np.abs(t - ts)) < 1e-9:
        return res["q_f"], res["r0"], res["rotation"], 0.0
    interp = lambda y: np.stack([np.interp(ts, t, c) for c in y.reshape(len(t), -1).T], -1)  # noqa: E731
    shift = float(np.max(np.abs(np.interp(ts, t, t) - ts)))
    return interp(res["q_f"]), interp(res["r0"]), interp(res["rotation"]).reshape(-1, 3, 3), shift


def invariant_differences(data, exu_inv):
    """Max relative difference between diffmbs' FFR invariants and the matrices Exudyn's
    ``ObjectFFRFreducedOrderInterface`` computed from the same M and Ψ (sign and layout mapped:
    Exudyn's ``Ψ̃_k`` is ``[ψ_k]×`` stacked, diffmbs' ``S_k = −[ψ_k]×``, ``Rθ = −[x̄]×``)."""
    inv = data.invariants
    m = data.n_modes

    scale_psi = math.sqrt(float(exu_inv["mass"]))  # kg^½: size of ∫ρψ for a unit-mass mode

    def rel(a, b, scale=0.0):
        a, b = np.asarray(a, float), np.asarray(b, float)
        return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), scale, 1e-300))

    xpt = np.asarray(exu_inv["mXRefTildePsiTilde"]).reshape(3, m, 3).transpose(1, 0, 2)
    ptp = np.asarray(exu_inv["mPsiTildePsi"]).reshape(m, 3, m)
    ptpt = np.asarray(exu_inv["mPsiTildePsiTilde"]).reshape(m, 3, m, 3).transpose(0, 2, 1, 3)
    return {
        "mass": rel(inv.mass, exu_inv["mass"]),
        "first_moment": rel(inv.first_moment, exu_inv["mass"] * exu_inv["center_of_mass"]),
        "inertia": rel(inv.inertia, exu_inv["inertia"]),
        "modal_mass": rel(inv.modal_mass, exu_inv["modal_mass"]),
        "modal_stiffness": rel(data.modal_stiffness, exu_inv["modal_stiffness"]),
        # Zero for free-free modes (mean axes): compared on the scale √m, √m·L.
        "psi_integral": rel(inv.psi_integral, exu_inv["mPhitTPsi"], scale_psi),
        "rotation_coupling": rel(
            inv.rotation_coupling, -exu_inv["mXRefTildePsi"], scale_psi * LENGTH
        ),
        "inertia_linear": rel(inv.inertia_linear, xpt),
        "coupling_linear": rel(inv.coupling_linear, -ptp),
        "inertia_quadratic": rel(inv.inertia_quadratic, ptpt),
    }


# --------------------------------------------------------------------------- the benchmark


@dataclasses.dataclass
class _Context:
    """What every stage needs: options, time grid, jitted simulations, the Exudyn worker, the
    mesh, and the report log."""

    args: argparse.Namespace
    ts_np: np.ndarray
    single: Callable
    batch: Callable
    exu: ExudynWorker
    nodes: np.ndarray
    mass: np.ndarray
    stiffness: np.ndarray
    face: np.ndarray
    weights: np.ndarray
    tip: int
    lines: list[str]

    def log(self, text: str) -> None:
        print(text, flush=True)
        self.lines.append(text)


def _jitted(ts, chunk: int):
    """``single(system, q0, v0, rtol)`` and ``batch(system, q0, v0, rtol, zetas)`` (``vmap`` over
    the damping ratio), both jitted; the tolerance is traced (no recompilation per rtol).

    ``chunk > 0``: the batch is ``jax.lax.map(..., batch_size=chunk)``, i.e. ``vmap`` over chunks
    of ``chunk`` variants, one chunk after the other. On CPU this is needed: jaxlib 0.10's batched
    LAPACK kernels (the Cholesky of the vmapped KKT solve) split large batches over XLA's
    intra-op thread pool and deadlock there (all 256 variants in one ``vmap`` hung every time on
    a 2-core machine, 64 did not). ``chunk = 0``: one ``vmap`` over all variants (GPU)."""
    import jax

    from diffmbs.flex import ModalDampingRatios
    from diffmbs.integrate import simulate
    from diffmbs.system import AugmentedLagrangianKKT

    kkt = AugmentedLagrangianKKT()

    def single(system, q0, v0, rtol):
        sol = simulate(system, q0, v0, ts, rtol=rtol, atol=ATOL_FACTOR * rtol, kkt_solver=kkt)
        return {
            "q": sol.q,
            "v": sol.v,
            "steps": sol.stats["num_steps"],
            "drift": sol.constraint_drift,
        }

    def batch(system, q0, v0, rtol, zetas):
        def one(zeta):
            s = with_damping(system, ModalDampingRatios(zeta))
            sol = simulate(s, q0, v0, ts, rtol=rtol, atol=ATOL_FACTOR * rtol, kkt_solver=kkt)
            return {"q": sol.q, "steps": sol.stats["num_steps"]}

        if chunk:
            return jax.lax.map(one, zetas, batch_size=chunk)
        return jax.vmap(one)(zetas)

    return jax.jit(single), jax.jit(batch)


def with_damping(system, damping):
    """The same pendulum with another :class:`~diffmbs.flex.AbstractModalDamping`."""
    return type(system)(
        system.invariants, system.stiffness, damping, system.gravity, system.pin, system.anchor
    )


def _timed(fn) -> float:
    import jax

    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - t0


def _references(ctx, system, q0, v0, modes):
    """Both codes at reference settings: compile time, histories, agreement."""
    import jax

    args, tip = ctx.args, ctx.tip
    compile_s, _ = first_call(lambda: ctx.single(system, q0, v0, REF_RTOL))
    t0 = time.perf_counter()
    ref = jax.block_until_ready(ctx.single(system, q0, v0, REF_RTOL))
    ref_wall = time.perf_counter() - t0
    q_ref = np.asarray(ref["q"])
    tip_d = tip_history(q_ref[:, 7:], modes, tip)
    exu_ref = ctx.exu("solve", h=args.ref_h, newton_rtol=REF_NEWTON_RTOL)
    qf_e, r0_e, rot_e, shift = _on_grid(exu_ref, ctx.ts_np)
    tip_e = tip_history(qf_e, modes, tip)
    wt_d = world_tip(
        q_ref[:, :3], quat_matrices(q_ref[:, 3:7]), q_ref[:, 7:], ctx.nodes, modes, tip
    )
    wt_e = world_tip(r0_e, rot_e, qf_e, ctx.nodes, modes, tip)
    out = {
        "compile_s": compile_s,
        "reference": {
            "diffmbs": {
                "rtol": REF_RTOL,
                "atol": ATOL_FACTOR * REF_RTOL,
                "wall_s": ref_wall,
                "steps": int(ref["steps"]),
            },
            "exudyn": {
                "h": args.ref_h,
                "newton_rtol": REF_NEWTON_RTOL,
                "wall_s": exu_ref["wall_s"],
                "steps": exu_ref["steps"],
                "time_grid_shift_s": shift,
            },
        },
        "tip_amplitude_m": float(np.max(np.linalg.norm(tip_d, axis=1))),
        "agreement_tip_rel": rel_error(tip_e, tip_d),
        "agreement_world_tip_over_length": float(
            np.max(np.linalg.norm(wt_d - wt_e, axis=1)) / LENGTH
        ),
        "constraint_drift_m": float(ref["drift"]),
    }
    ctx.log(
        f"compile {compile_s:.1f} s; reference diffmbs rtol {REF_RTOL:g}: {ref_wall:.2f} s, "
        f"{int(ref['steps'])} steps; Exudyn h {args.ref_h:g}: {exu_ref['wall_s']:.2f} s"
    )
    ctx.log(
        f"tip deformation amplitude {1e3 * out['tip_amplitude_m']:.3f} mm; agreement "
        f"{out['agreement_tip_rel']:.2e} (bar {AGREEMENT_BAR:g}); world tip diff / L "
        f"{out['agreement_world_tip_over_length']:.2e}; constraint drift "
        f"{out['constraint_drift_m']:.1e} m"
    )
    return out, tip_d, tip_e


def _ladders(ctx, system, q0, v0, modes, tip_d, tip_e):
    """Error (against the code's own reference, and the other's) and wall time of each setting,
    coarse to fine, until the error is below half the tightest target."""
    import jax

    stop = min(TARGETS) / 2
    ladder_d = []
    for rtol in DIFFMBS_RTOLS:
        t0 = time.perf_counter()
        out = jax.block_until_ready(ctx.single(system, q0, v0, rtol))
        wall = time.perf_counter() - t0
        tip = tip_history(np.asarray(out["q"])[:, 7:], modes, ctx.tip)
        entry = {
            "rtol": rtol,
            "error": rel_error(tip, tip_d),
            "error_vs_exudyn_ref": rel_error(tip, tip_e),
            "wall_s": wall,
            "steps": int(out["steps"]),
        }
        ladder_d.append(entry)
        ctx.log(
            f"  diffmbs rtol {rtol:.0e}: error {entry['error']:.2e}, {wall:.2f} s, "
            f"{entry['steps']} steps"
        )
        if entry["error"] <= stop:
            break
    ladder_e = []
    for h in EXUDYN_STEPS:
        res = ctx.exu("solve", h=h)
        tip = tip_history(_on_grid(res, ctx.ts_np)[0], modes, ctx.tip)
        entry = {
            "h": h,
            "error": rel_error(tip, tip_e),
            "error_vs_diffmbs_ref": rel_error(tip, tip_d),
            "wall_s": res["wall_s"],
            "steps": res["steps"],
        }
        ladder_e.append(entry)
        ctx.log(f"  Exudyn h {h:.1e}: error {entry['error']:.2e}, {res['wall_s']:.2f} s")
        if entry["error"] <= stop:
            break
    return ladder_d, ladder_e


def _matched(ctx, system, q0, v0, ladder_d, ladder_e):
    """For each target: the cheapest (first) setting of each code that meets it, timed
    ``repeats`` times in all (the ladder run is the first sample)."""
    repeats = ctx.args.repeats
    timed_d: dict[float, list[float]] = {}
    timed_e: dict[float, list[float]] = {}
    matched = {}
    for target in TARGETS:
        d = next((e for e in ladder_d if e["error"] <= target), None)
        e = next((e for e in ladder_e if e["error"] <= target), None)
        row: dict = {"target": target}
        if d is not None:
            rtol = d["rtol"]
            if rtol not in timed_d:
                timed_d[rtol] = [d["wall_s"]]
                for _ in range(repeats - 1):
                    timed_d[rtol].append(_timed(lambda r=rtol: ctx.single(system, q0, v0, r)))
            row["diffmbs"] = {
                "rtol": rtol,
                "error": d["error"],
                "steps": d["steps"],
                "median_s": float(np.median(timed_d[rtol])),
                "times_s": timed_d[rtol],
            }
        if e is not None:
            h = e["h"]
            if h not in timed_e:
                timed_e[h] = [e["wall_s"]]
                timed_e[h] += [ctx.exu("solve", h=h)["wall_s"] for _ in range(repeats - 1)]
            row["exudyn"] = {
                "h": h,
                "error": e["error"],
                "steps": e["steps"],
                "median_s": float(np.median(timed_e[h])),
                "times_s": timed_e[h],
            }
        if d is not None and e is not None:
            row["ratio_diffmbs_over_exudyn"] = (
                row["diffmbs"]["median_s"] / row["exudyn"]["median_s"]
            )
        matched[f"{target:g}"] = row
    return matched


def _batch(ctx, system, q0, v0, modes, matched, ladder_d, n_modes):
    """``vmap`` over ``batch`` damping ratios, against Exudyn run one variant after the other (a
    few variants spread over the range) at its matched step for the tightest target.

    diffmbs runs at the finest tolerance of its ladder (error ≤ half the tightest target at the
    nominal damping), one notch tighter than matched where the ladder went further, so that the
    lightly damped variants, which ring longer, stay accurate too."""
    import jax.numpy as jnp

    from diffmbs.flex import ModalDampingRatios

    args = ctx.args
    row = matched[f"{TARGETS[-1]:g}"]
    if "diffmbs" not in row or "exudyn" not in row:
        ctx.log("batch: skipped (no matched setting)")
        return None
    rtol, h = ladder_d[-1]["rtol"], row["exudyn"]["h"]
    zetas = np.linspace(*BATCH_ZETA, args.batch)
    zj = jnp.asarray(zetas)
    compile_s, out = first_call(lambda: ctx.batch(system, q0, v0, rtol, zj))
    times = [_timed(lambda: ctx.batch(system, q0, v0, rtol, zj)) for _ in range(args.batch_repeats)]
    total = float(np.median(times))
    q = np.asarray(out["q"])
    single = ctx.single(with_damping(system, ModalDampingRatios(zetas[0])), q0, v0, rtol)["q"]
    row_diff = float(np.max(np.abs(np.asarray(single) - q[0])))
    single_times = [ladder_d[-1]["wall_s"]] + [
        _timed(lambda: ctx.single(system, q0, v0, rtol)) for _ in range(args.repeats - 1)
    ]
    n_ex = min(args.exudyn_variants, args.batch)
    idx = np.unique(np.linspace(0, args.batch - 1, n_ex).astype(int))
    ex_times, ex_errs = [], []
    for i in idx:
        ctx.exu("damping", zeta=float(zetas[i]))
        res = ctx.exu("solve", h=h)
        ex_times.append(res["wall_s"])
        tip_e = tip_history(_on_grid(res, ctx.ts_np)[0], modes, ctx.tip)
        ex_errs.append(rel_error(tip_history(q[i][:, 7:], modes, ctx.tip), tip_e))
    ctx.exu("damping", zeta=ZETA)
    out = {
        "n_modes": n_modes,
        "batch": args.batch,
        "chunk": args.chunk,
        "zeta_range": list(BATCH_ZETA),
        "rtol": rtol,
        "compile_s": compile_s,
        "total_s": total,
        "times_s": times,
        "per_variant_s": total / args.batch,
        "single_run_s": float(np.median(single_times)),
        "steps_max": int(np.max(np.asarray(out["steps"]))),
        "steps_min": int(np.min(np.asarray(out["steps"]))),
        "row_vs_single_max_abs": row_diff,
        "exudyn_h": h,
        "exudyn_variants": idx.tolist(),
        "exudyn_times_s": ex_times,
        "exudyn_per_variant_s": float(np.median(ex_times)),
        "exudyn_vs_batch_errors": ex_errs,
        "exudyn_vs_batch_max_error": float(np.max(ex_errs)),
    }
    ctx.log(
        f"batch of {args.batch}: {total:.2f} s = {1e3 * out['per_variant_s']:.1f} ms/variant "
        f"(compile {compile_s:.1f} s); Exudyn one by one {1e3 * out['exudyn_per_variant_s']:.1f} "
        f"ms/variant"
    )
    return out


def _energy_check(ctx):
    """No Exudyn: the undamped pendulum at the reference tolerance keeps its energy."""
    import jax

    from diffmbs.flex import ModalDampingRatios, ffr_mass_matrix

    n_modes = min(ctx.args.modes)
    _, _, _, system = diffmbs_model(
        ctx.nodes, ctx.mass, ctx.stiffness, ctx.face, ctx.weights, n_modes
    )
    # ζ = 0 rather than damping=None: the same pytree structure, so no recompilation.
    undamped = with_damping(system, ModalDampingRatios(0.0))
    q0, v0 = initial_state(undamped)
    out = ctx.single(undamped, q0, v0, REF_RTOL)
    e = np.asarray(jax.vmap(lambda q, v: pendulum_energy(undamped, q, v))(out["q"], out["v"]))

    def kinetic(q, v):
        _, a, q_f = undamped.split(q)
        return 0.5 * v @ ffr_mass_matrix(undamped.invariants, q_f, a) @ v

    # Scale: the largest kinetic energy reached (the datum of the potential is arbitrary).
    t_max = float(np.max(np.asarray(jax.vmap(kinetic)(out["q"], out["v"]))))
    drift = float(np.max(np.abs(e - e[0])))
    res = {
        "n_modes": n_modes,
        "rtol": REF_RTOL,
        "max_abs_drift_j": drift,
        "max_kinetic_j": t_max,
        "relative_drift": drift / t_max,
        "constraint_drift_m": float(out["drift"]),
    }
    ctx.log(
        f"\nenergy check (undamped, {n_modes} modes, rtol {REF_RTOL:g}): |ΔE| / max T = "
        f"{res['relative_drift']:.1e}; constraint drift {res['constraint_drift_m']:.1e} m"
    )
    return res


def _case(ctx, n_modes):
    ctx.log(f"\n== {n_modes} free-free modes ==")
    t0 = time.perf_counter()
    _, basis, data, system = diffmbs_model(
        ctx.nodes, ctx.mass, ctx.stiffness, ctx.face, ctx.weights, n_modes
    )
    freqs = np.asarray(basis.frequencies_hz())
    reduce_s = time.perf_counter() - t0
    modes = np.asarray(basis.shapes)
    q0, v0 = initial_state(system)
    build = ctx.exu(
        "build",
        nodes=ctx.nodes,
        mass=ctx.mass,
        stiffness=ctx.stiffness,
        modes=modes,
        face=ctx.face,
        weights=ctx.weights,
        t_end=ctx.args.t_end,
        dt_save=DT_SAVE,
    )
    inv_diff = invariant_differences(data, build["invariants"])
    ctx.log(
        f"frequencies {freqs[0]:.2f} … {freqs[-1]:.1f} Hz; reduction {reduce_s:.1f} s; Exudyn "
        f"build {build['build_s']:.2f} s; FFR invariants vs Exudyn's max rel. diff "
        f"{max(inv_diff.values()):.1e}"
    )
    refs, tip_d, tip_e = _references(ctx, system, q0, v0, modes)
    ladder_d, ladder_e = _ladders(ctx, system, q0, v0, modes, tip_d, tip_e)
    matched = _matched(ctx, system, q0, v0, ladder_d, ladder_e)
    case = {
        "n_modes": n_modes,
        "frequencies_hz": freqs.tolist(),
        "reduction_s": reduce_s,
        "exudyn_build_s": build["build_s"],
        "invariants_max_rel_diff": inv_diff,
        **refs,
        "ladder": {"diffmbs": ladder_d, "exudyn": ladder_e},
        "matched": matched,
        "tip_history": {
            "t": ctx.ts_np[::5].tolist(),
            "diffmbs_ref": tip_d[::5].tolist(),
            "exudyn_ref": tip_e[::5].tolist(),
        },
    }
    batch = None
    if n_modes == ctx.args.batch_modes and ctx.args.batch > 0:
        batch = _batch(ctx, system, q0, v0, modes, matched, ladder_d, n_modes)
    return case, batch


def _summary(ctx, cases, batch, mesh_freq, beam_freq, load_before, wall0):
    t_end = ctx.args.t_end
    headers = [
        "modes",
        "agreement",
        "target",
        "diffmbs rtol",
        "diffmbs s",
        "sim s/wall s",
        "Exudyn h",
        "Exudyn s",
        "sim s/wall s",
        "diffmbs/Exudyn",
    ]
    rows = []
    bars: dict = {"agreement": {}, "speed": {}, "batch": None}
    for key, c in cases.items():
        for tkey, m in c["matched"].items():
            d, e = m.get("diffmbs"), m.get("exudyn")
            ratio = m.get("ratio_diffmbs_over_exudyn")
            rows.append(
                [
                    key,
                    f"{c['agreement_tip_rel']:.1e}",
                    tkey,
                    "—" if d is None else f"{d['rtol']:.0e}",
                    "—" if d is None else f"{d['median_s']:.3g}",
                    "—" if d is None else f"{t_end / d['median_s']:.3g}",
                    "—" if e is None else f"{e['h']:.1e}",
                    "—" if e is None else f"{e['median_s']:.3g}",
                    "—" if e is None else f"{t_end / e['median_s']:.3g}",
                    "—" if ratio is None else f"{ratio:.2f}",
                ]
            )
        bars["agreement"][key] = bool(c["agreement_tip_rel"] <= AGREEMENT_BAR)
        r = c["matched"][f"{TARGETS[-1]:g}"].get("ratio_diffmbs_over_exudyn")
        bars["speed"][key] = None if r is None else bool(r <= SPEED_BAR)
    if batch is not None:
        bars["batch"] = bool(batch["per_variant_s"] < batch["exudyn_per_variant_s"])
    out = [
        "",
        markdown_table(headers, rows),
        "",
        f"scene: hex8 bar {LENGTH:g} m x {1e3 * WIDTH:g} x {1e3 * HEIGHT:g} mm, pinned at the "
        f"root-face centre, spin {SPIN:g} rad/s about z, gravity {GRAVITY[2]:g} m/s² along z, "
        f"modal damping {ZETA:g}, record {t_end:g} s, samples every {1e3 * DT_SAVE:g} ms",
        "agreement = max_t |u_tip,diffmbs − u_tip,Exudyn| / max_t |u_tip| (body-frame elastic "
        "tip displacement, both codes at reference settings); ladder errors against each code's "
        "own reference; timings at the cheapest setting meeting the target (median)",
        f"diffmbs: simulate, Tsit5 + PID, atol = {ATOL_FACTOR:g} rtol, AugmentedLagrangianKKT; "
        "Exudyn: generalized-α (ρ∞ = 0.9), fixed step, dense solver, 1 thread",
        f"mesh check (no Exudyn): lowest free-free frequencies, hex8 {mesh_freq} Hz, "
        f"Euler–Bernoulli beam (diffmbs BeamModel) {beam_freq} Hz",
    ]
    if batch is not None:
        b = batch
        how = f"in chunks of {b['chunk']}" if b["chunk"] else "all at once"
        out.append(
            f"batch: vmap over {b['batch']} damping ratios {b['zeta_range']} ({how}, "
            f"{b['n_modes']} modes, rtol {b['rtol']:.0e}): {b['total_s']:.2f} s (compile "
            f"{b['compile_s']:.1f} "
            f"s) = {1e3 * b['per_variant_s']:.1f} ms per variant (single run "
            f"{1e3 * b['single_run_s']:.0f} ms) vs Exudyn one by one "
            f"{1e3 * b['exudyn_per_variant_s']:.0f} ms (h {b['exudyn_h']:.1e}): "
            f"{b['exudyn_per_variant_s'] / b['per_variant_s']:.1f}x; batch row vs single run "
            f"{b['row_vs_single_max_abs']:.1e}; Exudyn variants vs batch rows "
            f"{b['exudyn_vs_batch_max_error']:.1e}"
        )
    speed = ", ".join(
        f"{k} modes {'n/a' if v is None else pass_fail(v)}" for k, v in bars["speed"].items()
    )
    agree = ", ".join(f"{k} modes {pass_fail(v)}" for k, v in bars["agreement"].items())
    line = (
        f"bars: agreement <= {AGREEMENT_BAR:g}: {agree}; speed at {TARGETS[-1]:g}, diffmbs <= "
        f"{SPEED_BAR:g}x Exudyn: {speed}"
    )
    if bars["batch"] is not None:
        line += f"; batch per variant faster than Exudyn: {pass_fail(bars['batch'])}"
    load_after = os.getloadavg()
    out += [
        line,
        f"load average (1/5/15 min) before {tuple(round(x, 2) for x in load_before)}, after "
        f"{tuple(round(x, 2) for x in load_after)}; {os.cpu_count()} logical cores (shared)",
        f"total wall time {time.perf_counter() - wall0:.0f} s",
    ]
    for text in out:
        ctx.log(text)
    return bars, load_after


def run(args) -> dict:
    # diffmbs.configure() first: float64 and XLA_FLAGS (single-threaded Eigen) before JAX starts.
    import diffmbs  # noqa: I001

    diffmbs.configure()
    import jax
    import jax.numpy as jnp

    from diffmbs.flex import (
        BeamModel,
        EulerBernoulli,
        FreeFreeModes,
        Material,
        RectangularSection,
        beam_line,
    )

    wall0 = time.perf_counter()
    load_before = os.getloadavg()
    ts_np = np.linspace(0.0, args.t_end, int(round(args.t_end / DT_SAVE)) + 1)
    if args.chunk is None:
        args.chunk = 32 if jax.default_backend() == "cpu" else 0
    single, batch = _jitted(jnp.asarray(ts_np), args.chunk)
    exu = ExudynWorker()
    try:
        ctx = _Context(args, ts_np, single, batch, exu, *bar_mesh(), lines=[])
        exudyn_version = exu("version")
        ctx.log(
            f"mesh: {len(ctx.nodes)} nodes, {ctx.mass.shape[0]} DOFs (hex8, {N_EL}x{N_Y}x{N_Z}); "
            f"mass {np.sum(ctx.mass[0::3, 0::3]):.4f} kg; Exudyn {exudyn_version}"
        )
        # Mesh check without Exudyn: the Euler–Bernoulli beam of the same section (diffmbs).
        beam = BeamModel(
            *beam_line([0, 0, 0], [LENGTH, 0, 0], N_EL),
            RectangularSection(WIDTH, HEIGHT),
            Material(YOUNG, DENSITY, POISSON),
            theory=EulerBernoulli(),
        )
        beam_freq = np.round(
            np.asarray(FreeFreeModes(n_modes=3)(beam.assemble()).frequencies_hz()), 2
        ).tolist()
        cases, batch_result = {}, None
        for n_modes in args.modes:
            case, b = _case(ctx, n_modes)
            cases[str(n_modes)] = case
            batch_result = b if b is not None else batch_result
        energy = _energy_check(ctx)
    finally:
        exu.close()
    mesh_freq = np.round(cases[str(min(args.modes))]["frequencies_hz"][:3], 2).tolist()
    bars, load_after = _summary(ctx, cases, batch_result, mesh_freq, beam_freq, load_before, wall0)
    return {
        "benchmark": "ffr",
        "timestamp_utc": utc_timestamp(),
        "quick": bool(args.quick),
        "config": {
            "structure": {
                "length_m": LENGTH,
                "width_y_m": WIDTH,
                "height_z_m": HEIGHT,
                "elements": [N_EL, N_Y, N_Z],
                "element": "hex8 with incompatible modes; consistent mass M̄ ⊗ I₃",
                "young_pa": YOUNG,
                "poisson": POISSON,
                "density_kg_m3": DENSITY,
                "n_nodes": int(len(ctx.nodes)),
                "n_dof": int(ctx.mass.shape[0]),
                "mass_kg": float(np.sum(ctx.mass[0::3, 0::3])),
            },
            "scene": {
                "pin": "spherical joint at the root-face centre (area-weighted face nodes)",
                "spin_rad_s": SPIN,
                "gravity_m_s2": list(GRAVITY),
                "zeta": ZETA,
                "t_end_s": args.t_end,
                "dt_save_s": DT_SAVE,
                "tip_node": int(ctx.tip),
            },
            "modes": list(args.modes),
            "reduction": "diffmbs FreeFreeModes, the same shapes given to Exudyn",
            "diffmbs": {
                "solver": "Tsit5",
                "controller": "PID",
                "atol_over_rtol": ATOL_FACTOR,
                "kkt_solver": "AugmentedLagrangianKKT",
                "rtols": list(DIFFMBS_RTOLS),
                "reference_rtol": REF_RTOL,
            },
            "exudyn": {
                "version": exudyn_version,
                "object": "ObjectFFRFreducedOrder via ObjectFFRFreducedOrderInterface (C++ terms)",
                "solver": "GeneralizedAlpha",
                "spectral_radius": 0.9,
                "linear_solver": "EXUdense",
                "threads": 1,
                "steps": list(EXUDYN_STEPS),
                "reference_h": args.ref_h,
                "reference_newton_rtol": REF_NEWTON_RTOL,
                "process": "spawned worker without JAX",
            },
            "targets": list(TARGETS),
            "repeats": args.repeats,
            "batch": args.batch,
            "batch_chunk": args.chunk,
            "batch_modes": args.batch_modes,
        },
        "cases": cases,
        "batch": batch_result,
        "checks": {
            "energy_undamped": energy,
            "mesh_vs_euler_bernoulli_hz": {"hex8": mesh_freq, "beam": beam_freq},
        },
        "bars": {
            "agreement_required": AGREEMENT_BAR,
            "agreement_pass": bars["agreement"],
            "speed_ratio_required": SPEED_BAR,
            "speed_target": TARGETS[-1],
            "speed_pass": bars["speed"],
            "batch_pass": bars["batch"],
        },
        "load_average_before": list(load_before),
        "load_average_after": list(load_after),
        "machine": machine_info(),
        "total_wall_s": time.perf_counter() - wall0,
        "report": "\n".join(ctx.lines),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="10 modes, 0.25 s record, batch of 32, 2 repeats"
    )
    parser.add_argument(
        "--modes", type=int, nargs="+", default=None, help="mode counts (10 40; quick: 10)"
    )
    parser.add_argument("--t-end", type=float, default=None, help="record length in s (0.5)")
    parser.add_argument(
        "--batch", type=int, default=None, help="vmapped variants (256; quick 32; 0 = none)"
    )
    parser.add_argument(
        "--batch-modes", type=int, default=None, help="mode count of the batch (the smallest)"
    )
    parser.add_argument("--batch-repeats", type=int, default=1, help="timed batch runs (1)")
    parser.add_argument(
        "--chunk",
        type=int,
        default=None,
        help="vmap the batch in chunks of this size (CPU default 32: jaxlib LAPACK deadlock; "
        "0 = one vmap over all variants, the default on GPU)",
    )
    parser.add_argument(
        "--exudyn-variants", type=int, default=4, help="Exudyn variants timed one by one (4)"
    )
    parser.add_argument("--repeats", type=int, default=None, help="runs per timed setting (3)")
    parser.add_argument("--ref-h", type=float, default=REF_H, help="Exudyn reference step (1e-5)")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "results" / "ffr.json",
        help="JSON output path (default: benchmarks/results/ffr.json)",
    )
    args = parser.parse_args(argv)
    args.modes = args.modes or ([10] if args.quick else list(MODES))
    args.t_end = args.t_end or (0.25 if args.quick else T_END)
    args.batch = (32 if args.quick else 256) if args.batch is None else args.batch
    args.batch_modes = args.batch_modes or min(args.modes)
    args.repeats = args.repeats or (2 if args.quick else 3)
    result = run(args)
    path = write_json_atomic(args.out, result)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
