"""Peer benchmark: the 3-D Medium Weight Shock Machine (``diffmbs.models.mwsm3d``, test 1, rigid
equipment) in Exudyn (reduced-order FFRF bodies, generalized-α) against diffmbs, at matched SRS
accuracy, in one process.

The Exudyn model takes every number from the built diffmbs model, so the two cannot drift apart:

* masses, inertias (about the centre of mass), initial poses and velocities of bed, hammer,
  anvil and equipment block from ``mwsm3d(start="impact", coordinates="full")``: its
  ``parameter(...)`` values and ``initial_state()`` (static equilibrium, hammer 1 mm below the
  anvil with its impact speed); Exudyn starts in that state (every preload included);
* the four supporting channels: the modal data of the built model's channel bodies (shapes,
  modal mass, stiffness and damping matrix: at the time of writing 10 fixed-interface modes per
  channel, bolt nodes clamped, mass-normalised, 2 % modal damping; the kinds are recorded in
  the JSON) and the beam FE they were reduced from, rebuilt as
  :func:`diffmbs.models._mwsm3d_parts.channel_modal_data` builds it (``_line_model(...)
  .assemble()``: 21 nodes, 6 DOFs each) and checked against them (``Ψᵀ M Ψ``, ``Ψᵀ K Ψ``), so
  the modal coordinates are the same; each channel an ``ObjectFFRFreducedOrder`` whose frame
  node is held to the anvil at the bolts by a ``GenericJoint`` (all six axes), as diffmbs's
  ``Fixed`` joint, starting from the diffmbs equilibrium's modal coordinates;
* bed springs and anvil bolts: ``ObjectConnectorRigidBodySpringDamper`` with the diagonal
  stiffness and damping of the diffmbs ``Bushing`` elements (6 components, axes of the bed);
* the hammer on ``ObjectJointRevoluteZ`` to the bed (axis along y);
* the blow: ``ObjectConnectorSpringDamper`` between the centres of the hammer's face sphere and
  the anvil's pad sphere with reference length ``r_i + r_j``, its force the diffmbs
  Hunt–Crossley law ``F = K δ_s^1.5 max(1 + χ δ̇, 0)`` with ``δ_s = ε softplus(δ/ε)``, ε = 1 µm;
* the 4 lower and 4 upper stop points: one ``ObjectConnectorCartesianSpringDamper`` per point,
  between the anvil's corner and the point of the bed's stop plane below (above) it, the same
  law on the vertical gap;
* the T-clamps: ``ObjectConnectorCartesianSpringDamper`` (1e8 N/m, isotropic) between the
  channel node (``MarkerSuperElementPosition``) and the block's underside point;
* gravity: ``LoadMassProportional`` on every body (the channels' modal part included).

The contact laws are Exudyn symbolic user functions (``exudyn.symbolic``, evaluated in C++, no
Python call per evaluation); everything else is built-in. The record is the accelerometer
reading at the centre of the block's top face, ``a_z − g_z`` (m/s², +9.81 at rest, as the
diffmbs sensor), sampled at 10 kHz; its SRS (5 %, 10 Hz–2 kHz, 48 frequencies) is compared with
that of a tight diffmbs reference (joint coordinates, Tsit5, rtol 1e-9, atol 1e-12).

Structural differences that remain (not removable without changing either code):

* **FFRF inertia with rotational DOFs**: Exudyn's ``ObjectFFRFreducedOrder`` assumes 3-DOF
  nodes. Its inertia invariants (``mPhitTPsi``, ``mXRefTildePsi``, ...) are computed here from
  the full 6-DOF mass matrix, the frame rotation entering the nodes' rotational DOFs as the
  identity (the exact FFRF kinetic energy for translation and small node rotations); Exudyn's
  ``modeBasis`` (for markers and the mass-proportional gravity load) carries the nodal
  translations only. The script checks them against diffmbs's own invariants of the same FE
  (mass, first moment, inertia, ``psi_integral``, ``rotation_coupling``): equal to round-off.
  What stays Exudyn's is how its C++ object assembles them (velocity terms included).
* **Bushing rotations**: diffmbs measures ``vee(½(R − Rᵀ))``; Exudyn's rigid-body spring damper
  its own small-angle measure; they differ at second order in the small rotations of a
  central blow.
* **Stop planes**: diffmbs's plane normal turns with the bed; here the gap is the world-vertical
  distance to the point of the plane under the corner (second order in the bed's tilt).
* **Clamp damping**: diffmbs's bushing damps the rate in the rotating node frame, Exudyn the
  world-frame relative velocity (they differ by ω × gap, the gap micrometres).
* **Integrator**: Exudyn's generalized-α (index-3 constraints, Euler-parameter nodes, fixed
  step h, spectral radius ``--rho``), which damps modes well above 1/h; diffmbs integrates
  the ODE in joint coordinates with adaptive Tsit5.

Usage::

    python benchmarks/mwsm3d_exudyn.py [--window 0.5] [--steps 1e-4,5e-5,2e-5,1e-5]
                                       [--out benchmarks/results/mwsm3d_exudyn.json]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import diffmbs

diffmbs.configure()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _common import (  # noqa: E402
    block_until_ready,
    first_call,
    machine_info,
    print_table,
    utc_timestamp,
    write_json_atomic,
)
from mwsm3d import FREQS, RATE, G, _srs  # noqa: E402  (benchmarks/mwsm3d.py: the same SRS)

from diffmbs.integrate import simulate  # noqa: E402
from diffmbs.models._mwsm3d_parts import (  # noqa: E402
    Geometry,
    _line_model,
    beam_nodes,
    channel_modal_data,
    section,
)
from diffmbs.models.mwsm3d import CHANNELS, mwsm3d  # noqa: E402
from diffmbs.rotations import quat_to_matrix  # noqa: E402

MATCH_DB = (0.01, 0.1, 0.3)
REPEATS = 3
DIFFMBS_TOLERANCES = ((1e-4, 1e-7), (1e-6, 1e-9))


def _times(duration: float) -> np.ndarray:
    return np.arange(int(round(duration * RATE)) + 1) / RATE


def _db_error(spectrum: np.ndarray, reference: np.ndarray) -> float:
    """Largest |20 log10(S / S_ref)| over the frequencies (dB)."""
    return float(np.max(np.abs(20 * np.log10(spectrum / reference))))


def _value(machine, path: str) -> np.ndarray:
    return np.asarray(machine.parameter(path), dtype=float)


def _element(machine, name: str):
    """The force element ``name`` of the diffmbs model (its group's stacked element)."""
    return next(g for g in machine.force_groups if name in g.names).elements


def _sensor(machine, name: str):
    return machine.sensor_list[machine.sensor_names.index(name)]


# ----------------------------------------------------------------------------- channels


def channel_reduction(machine, name: str, section_name: str) -> dict:
    """Exudyn ``ObjectFFRFreducedOrder`` data (SI) of the channel ``name`` of the diffmbs model:
    its modal data (shapes, modal mass and stiffness, damping matrix) and the beam FE it was
    reduced from (rebuilt as :func:`~diffmbs.models._mwsm3d_parts.channel_modal_data` builds
    it, checked against the modal data): ``modeBasis`` (3n × m, nodal translations), ``xRef``
    (3n,), reduced mass, stiffness and damping (m × m) and the FFRF inertia invariants of the
    6-DOF FE; also the rows of the clamp nodes and the natural frequencies (Hz)."""
    from exudyn.rigidBodyUtilities import ComputeSkewMatrix

    geo = Geometry
    body = machine.modal_bodies[machine.modal_names.index(name)]
    data = body.modal_data
    _, labels = channel_modal_data(section_name, geo.channel_span, geo.clamp_spacing,
                                   data.n_modes)  # fmt: skip
    xs = beam_nodes([-geo.channel_span / 2, -geo.clamp_spacing / 2, 0.0, geo.clamp_spacing / 2,
                     geo.channel_span / 2], 0.06)  # fmt: skip
    fe = _line_model(xs, section(section_name), None).assemble()
    mass, stiffness = np.asarray(fe.mass), np.asarray(fe.stiffness)
    nodes = np.asarray(data.nodes)
    if not np.allclose(nodes, np.asarray(fe.nodes)):
        raise RuntimeError("channel FE nodes differ from the modal data's")
    trans, rots = np.asarray(data.translations), np.asarray(data.rotations)
    n, m = nodes.shape[0], trans.shape[2]
    dof_node, dof_comp = np.asarray(fe.dof_nodes), np.asarray(fe.dof_components)
    is_t = dof_comp < 3
    psi = np.where(is_t[:, None], trans[dof_node, np.minimum(dof_comp, 2)],
                   rots[dof_node, np.maximum(dof_comp - 3, 0)])  # fmt: skip
    m_ff, k_ff = psi.T @ mass @ psi, psi.T @ stiffness @ psi
    if not (
        np.allclose(m_ff, np.asarray(data.modal_mass), atol=1e-10)
        and np.allclose(k_ff, np.asarray(data.modal_stiffness), rtol=1e-8, atol=1e-3)
    ):
        raise RuntimeError("channel reduced matrices differ from the diffmbs modal data")
    mode_basis = trans.reshape(3 * n, m)
    x_ref = nodes.reshape(-1)
    rows = 3 * dof_node + np.minimum(dof_comp, 2)

    def embed(translational: np.ndarray, rotational: np.ndarray | None = None) -> np.ndarray:
        out = np.zeros((fe.n_dof, translational.shape[1]))
        out[is_t] = translational[rows[is_t]]
        if rotational is not None:
            out[~is_t] = rotational[dof_comp[~is_t] - 3]
        return out

    phit = embed(np.kron(np.ones((n, 1)), np.eye(3)))
    x_tilde = embed(ComputeSkewMatrix(x_ref), -np.eye(3))
    psi_tilde = embed(ComputeSkewMatrix(mode_basis))
    total = float((phit.T @ mass @ phit)[0, 0])
    first_moment = (phit.T @ mass @ embed(x_ref[:, None]))[:, 0]
    inv = data.invariants
    for ours, theirs in ((total, inv.mass), (first_moment, inv.first_moment),
                         (x_tilde.T @ mass @ x_tilde, inv.inertia),
                         (phit.T @ mass @ psi, inv.psi_integral),
                         (-(x_tilde.T @ mass @ psi), inv.rotation_coupling)):  # fmt: skip
        if not np.allclose(ours, np.asarray(theirs), rtol=1e-9, atol=1e-9):
            raise RuntimeError(f"{name}: Exudyn invariants differ from diffmbs's")
    return {
        "kinds": data.kinds,
        "dampingMatrixReduced": np.asarray(
            body.damping.matrix(data.modal_mass, data.modal_stiffness)
        ),
        "rows": {k: int(data.node_index(v)) for k, v in labels.items()},
        "frequencies_hz": np.asarray(data.frequencies_hz()),
        "modeBasis": mode_basis,
        "xRef": x_ref,
        "massMatrixReduced": m_ff,
        "stiffnessMatrixReduced": k_ff,
        "mass": total,
        "inertia": x_tilde.T @ mass @ x_tilde,
        "centerOfMass": first_moment / total,
        "mPsiTildePsi": psi_tilde.T @ mass @ psi,
        "mPsiTildePsiTilde": psi_tilde.T @ mass @ psi_tilde,
        "mPhitTPsi": phit.T @ mass @ psi,
        "mPhitTPsiTilde": phit.T @ mass @ psi_tilde,
        "mXRefTildePsi": x_tilde.T @ mass @ psi,
        "mXRefTildePsiTilde": x_tilde.T @ mass @ psi_tilde,
    }


# ----------------------------------------------------------------------------- Exudyn model


def _hunt_crossley(esym, stiffness: float, chi: float, eps: float, delta, rate):
    """Symbolic ``K δ_s^1.5 max(1 + χ δ̇, 0)``, ``δ_s = ε softplus(δ/ε)`` (stable form)."""
    z = delta / eps
    ds = eps * (esym.max(z, 0.0) + esym.log(1.0 + esym.exp(-esym.abs(z))))
    return stiffness * ds * esym.sqrt(ds) * esym.max(1.0 + chi * rate, 0.0)


def _stop_law(esym, sign: float, stiffness: float, chi: float, eps: float):
    """Cartesian spring-damper law of one stop point: the Hunt–Crossley force on the vertical
    gap ``u_z`` (m) to a plane with normal ``sign`` · z (the anvil point above a lower stop,
    ``sign`` = 1; below an upper stop, −1)."""

    def law(mbs, t, itemNumber, displacement, velocity, stiffness_, damping, offset):
        force = _hunt_crossley(esym, stiffness, chi, eps, -sign * displacement[2],
                               -sign * velocity[2])  # fmt: skip
        return [0.0 * displacement[0], 0.0 * displacement[1], -sign * force]

    return law


class ExudynMachine:
    """The machine in Exudyn (module docstring), built from ``machine`` (the full-coordinate
    diffmbs model) and its initial state ``(q0, v0)``."""

    def __init__(self, machine, q0: np.ndarray, v0: np.ndarray, rho: float):
        import exudyn as exu
        from exudyn.FEM import ObjectFFRFreducedOrderInterface
        from exudyn.itemInterface import (
            GenericJoint,
            MarkerBodyPosition,
            MarkerBodyRigid,
            MarkerNodeRigid,
            MarkerSuperElementPosition,
            ObjectConnectorCartesianSpringDamper,
            ObjectConnectorRigidBodySpringDamper,
            ObjectConnectorSpringDamper,
            ObjectGround,
            ObjectJointRevoluteZ,
            SensorBody,
        )
        from exudyn.rigidBodyUtilities import RigidBodyInertia

        self.exu, self.rho = exu, rho
        esym = exu.symbolic
        self.sc = exu.SystemContainer()
        mbs = self.mbs = self.sc.AddSystem()
        par = lambda path: _value(machine, path)
        gravity = par("gravity")
        self.gravity = gravity
        self._keep = []
        ground = mbs.AddObject(ObjectGround())
        bodies = {}

        def pose(name):
            q = q0[machine.q_slice(name)]
            return q[:3], np.asarray(quat_to_matrix(jnp.asarray(q[3:7])))

        for name in ("bed", "hammer", "anvil", "equipment"):
            position, rotation = pose(name)
            v = v0[machine.v_slice(name)]
            inertia = RigidBodyInertia(mass=float(par(f"{name}.mass")),
                                       inertiaTensor=par(f"{name}.inertia"))  # fmt: skip
            bodies[name] = mbs.CreateRigidBody(
                referencePosition=list(position), referenceRotationMatrix=rotation,
                initialVelocity=list(v[:3]), initialAngularVelocity=list(rotation @ v[3:6]),
                inertia=inertia, gravity=list(gravity),
                nodeType=exu.NodeType.RotationEulerParameters)  # fmt: skip
        com = {n: par(f"{n}.com") for n in bodies}

        def local(body, point):
            return list(np.asarray(point) - com[body])

        def rigid(body, point):
            return mbs.AddMarker(MarkerBodyRigid(bodyNumber=bodies[body],
                                                 localPosition=local(body, point)))  # fmt: skip

        def at(body, point):
            return mbs.AddMarker(MarkerBodyPosition(bodyNumber=bodies[body],
                                                    localPosition=local(body, point)))  # fmt: skip

        def bushing(name, marker0, marker1):
            k = np.concatenate([par(f"{name}.stiffness"), par(f"{name}.rotational_stiffness")])
            c = np.concatenate([par(f"{name}.damping"), par(f"{name}.rotational_damping")])
            return mbs.AddObject(
                ObjectConnectorRigidBodySpringDamper(
                    markerNumbers=[marker0, marker1], stiffness=np.diag(k), damping=np.diag(c)
                )
            )

        bushing("bed_springs",
                mbs.AddMarker(MarkerBodyRigid(bodyNumber=ground,
                                              localPosition=list(par("bed_springs.frame_i.point")))),
                rigid("bed", par("bed_springs.frame_j.point")))  # fmt: skip
        bushing(
            "anvil_bolts",
            rigid("bed", par("anvil_bolts.frame_i.point")),
            rigid("anvil", par("anvil_bolts.frame_j.point")),
        )

        def frame(body, side):
            ht = exu.HT(
                rotation=par(f"hammer_pivot.frame_{side}.rotation"),
                translation=local(body, par(f"hammer_pivot.frame_{side}.point")),
            )
            return mbs.AddMarker(MarkerBodyRigid(bodyNumber=bodies[body], localHT=ht))

        mbs.AddObject(ObjectJointRevoluteZ(markerNumbers=[frame("bed", "i"),
                                                          frame("hammer", "j")]))  # fmt: skip

        k_imp, chi_imp = float(par("impact.stiffness")), float(par("impact.damping"))
        eps = float(_element(machine, "impact").smoothing)
        impact = mbs.AddObject(ObjectConnectorSpringDamper(
            markerNumbers=[at("hammer", par("impact.center_i")),
                           at("anvil", par("impact.center_j"))],
            referenceLength=float(par("impact.radius_i") + par("impact.radius_j")),
            stiffness=0.0, damping=0.0))  # fmt: skip

        def impact_law(mbs, t, itemNumber, deltaL, deltaL_t, stiffness, damping, force):
            return -_hunt_crossley(esym, k_imp, chi_imp, eps, -deltaL, -deltaL_t)

        self._user_function(impact_law, impact)

        offset = par("anvil.position") - par("bed.position")
        for name, sign in (("lower_stops", 1.0), ("upper_stops", -1.0)):
            law = (sign, float(par(f"{name}.stiffness")), float(par(f"{name}.damping")),
                   float(_element(machine, name).smoothing))  # fmt: skip
            plane = par(f"{name}.plane_point")
            if not np.allclose(par(f"{name}.plane_normal"), [0.0, 0.0, sign]):
                raise RuntimeError(f"{name}: expected a horizontal plane")
            for point in par(f"{name}.points"):
                under = np.array([offset[0] + point[0], offset[1] + point[1], plane[2]])
                conn = mbs.AddObject(ObjectConnectorCartesianSpringDamper(
                    markerNumbers=[at("bed", under), at("anvil", point)],
                    stiffness=[0.0] * 3, damping=[0.0] * 3))  # fmt: skip
                self._user_function(_stop_law(esym, *law), conn)

        self.channels = {}
        for name, section_name, _side, _partner in CHANNELS:
            red = channel_reduction(machine, name, section_name)
            position, rotation = pose(name)
            cms = ObjectFFRFreducedOrderInterface()
            for key in ("modeBasis", "xRef", "massMatrixReduced", "stiffnessMatrixReduced",
                        "mPsiTildePsi", "mPsiTildePsiTilde", "mPhitTPsi", "mPhitTPsiTilde",
                        "mXRefTildePsi", "mXRefTildePsiTilde"):  # fmt: skip
                setattr(cms, key, red[key])
            cms.trigList, cms.postProcessingModes = [], {}
            cms.nModes, cms.nNodes, cms.dim3D = red["modeBasis"].shape[1], red["xRef"].size // 3, 3
            cms.rigidBodyNodeType = exu.NodeType.RotationEulerParameters
            cms.nODE2rot, cms.nODE2rigid, cms.nODE2FFRFreduced = 4, 7, 7 + cms.nModes
            cms.totalMass, cms.inertiaLocal = red["mass"], red["inertia"]
            cms.chiU = red["centerOfMass"]
            made = cms.AddObjectFFRFreducedOrder(mbs, positionRef=list(position),
                                                 rotationMatrixRef=rotation,
                                                 gravity=list(gravity))  # fmt: skip
            obj = made["oFFRFreducedOrder"]
            mbs.SetNodeParameter(made["nGenericODE2"], "initialCoordinates",
                                 list(q0[machine.q_slice(name)][7:]))  # fmt: skip
            mc = exu.MatrixContainer()
            mc.SetWithDenseMatrix(red["dampingMatrixReduced"], useDenseMatrix=False)
            mbs.SetObjectParameter(obj, "dampingMatrixReduced", mc)
            mbs.AddObject(GenericJoint(
                markerNumbers=[rigid("anvil", par(f"bolts_{name}.frame_i.point")),
                               mbs.AddMarker(MarkerNodeRigid(nodeNumber=made["nRigidBody"]))],
                constrainedAxes=[1] * 6))  # fmt: skip
            for k in range(2):
                clamp = f"clamp_{name}_{k}"
                node = mbs.AddMarker(MarkerSuperElementPosition(
                    bodyNumber=obj, meshNodeNumbers=[red["rows"][f"clamp_{k}"]],
                    weightingFactors=[1.0]))  # fmt: skip
                mbs.AddObject(ObjectConnectorCartesianSpringDamper(
                    markerNumbers=[node, at("equipment", par(f"{clamp}.frame_j.point"))],
                    stiffness=list(par(f"{clamp}.stiffness")),
                    damping=list(par(f"{clamp}.damping"))))  # fmt: skip
            self.channels[name] = red

        def accelerometer(sensor):
            body = _sensor(machine, sensor).body
            if not _sensor(machine, sensor).include_gravity:
                raise RuntimeError(f"{sensor}: expected an accelerometer's reading")
            return mbs.AddSensor(
                SensorBody(
                    bodyNumber=bodies[body],
                    localPosition=local(body, _sensor(machine, sensor).point),
                    outputVariableType=exu.OutputVariableType.Acceleration,
                    storeInternal=True,
                )
            )

        self.sensor = accelerometer("equipment_acceleration")
        self.anvil_sensor = accelerometer("anvil_acceleration")
        mbs.Assemble()

    def _user_function(self, law, item) -> None:
        """``law`` as the item's symbolic ``springForceUserFunction`` (kept alive here)."""
        from exudyn.advancedUtilities import CreateSymbolicUserFunction

        uf = CreateSymbolicUserFunction(self.mbs, law, "springForceUserFunction", item)
        self._keep.append(uf)
        self.mbs.SetObjectParameter(item, "springForceUserFunction", uf)

    def solve(self, h: float, duration: float) -> dict:
        """Generalized-α with fixed step ``h`` (s) over ``duration`` (s): solve time (s), the
        top-face reading at 10 kHz (m/s²) and the impact force (N) at every step."""
        exu = self.exu
        ss = exu.SimulationSettings()
        ss.timeIntegration.numberOfSteps = int(round(duration / h))
        ss.timeIntegration.endTime = duration
        ss.timeIntegration.verboseMode = 0
        ss.timeIntegration.generalizedAlpha.spectralRadius = self.rho
        ss.timeIntegration.newton.useModifiedNewton = False
        ss.solution.file.write = False
        ss.solution.sensors.writePeriod = h
        ss.linearSolver.solverType = exu.LinearSolverType.EXUdense
        ss.show.statistics = False
        t0 = time.perf_counter()
        ok = self.mbs.SolveDynamic(ss, solverType=exu.DynamicSolverType.GeneralizedAlpha)
        wall = time.perf_counter() - t0
        acc = np.asarray(self.mbs.GetSensorStoredData(self.sensor))
        anvil = np.asarray(self.mbs.GetSensorStoredData(self.anvil_sensor))
        ts = _times(duration)
        reading = np.interp(ts, acc[:, 0], acc[:, 3] - self.gravity[2])
        return {
            "ok": bool(ok) if ok is not None else True,
            "wall_s": wall,
            "reading": reading,
            "anvil": np.interp(ts, anvil[:, 0], anvil[:, 3] - self.gravity[2]),
        }


# ----------------------------------------------------------------------------- runs


def diffmbs_runs(window: float) -> tuple[dict, np.ndarray, dict]:
    """The reference (rtol 1e-9, atol 1e-12) and the timed settings of diffmbs over
    ``window`` s: ``(reference summary, reference reading (m/s²), {setting: row})``."""
    machine = mwsm3d(start="impact")
    q0, v0 = jax.jit(type(machine).initial_state)(machine)
    ts = jnp.asarray(_times(window))

    def run(rtol, atol):
        return simulate(machine, q0, v0, ts, rtol=rtol, atol=atol, max_steps=2_000_000)

    t0 = time.perf_counter()
    ref = block_until_ready(run(1e-9, 1e-12))
    reference = {"rtol": 1e-9, "atol": 1e-12, "wall_s_with_compile": time.perf_counter() - t0,
                 "steps": int(ref.stats["num_accepted_steps"]),
                 "anvil": np.asarray(ref.sensors["anvil_acceleration"])[:, 2]}  # fmt: skip
    reading = np.asarray(ref.sensors["equipment_acceleration"])[:, 2]
    rows = {}
    for rtol, atol in DIFFMBS_TOLERANCES:
        first, sol = first_call(lambda r=rtol, a=atol: run(r, a))
        walls = []
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            sol = block_until_ready(run(rtol, atol))
            walls.append(time.perf_counter() - t0)
        rows[f"rtol {rtol:g} / atol {atol:g}"] = {
            "rtol": rtol, "atol": atol, "first_call_s": first, "wall_s": float(np.median(walls)),
            "wall_s_runs": walls, "steps": int(sol.stats["num_accepted_steps"]),
            "reading": np.asarray(sol.sensors["equipment_acceleration"])[:, 2]}  # fmt: skip
    return reference, reading, rows


def _blow_time(anvil: np.ndarray) -> float:
    """Time (s) of the anvil's peak upward acceleration (the blow's peak), parabola-refined."""
    k = int(np.clip(np.argmax(anvil), 1, anvil.size - 2))
    a, b, c = anvil[k - 1 : k + 2]
    return (k + 0.5 * (a - c) / (a - 2 * b + c)) / RATE


def physical_check(
    reading: np.ndarray,
    anvil: np.ndarray,
    ref_reading: np.ndarray,
    ref_anvil: np.ndarray,
    srs: np.ndarray,
    ref_srs: np.ndarray,
) -> dict:
    """Peak top-face reading (g), blow time (ms) and the SRS difference below 100 Hz (dB) of one
    Exudyn run against the diffmbs reference."""
    low = FREQS <= 100.0
    return {
        "peak_g": float(np.max(np.abs(reading)) / G),
        "peak_g_reference": float(np.max(np.abs(ref_reading)) / G),
        "blow_ms": 1e3 * _blow_time(anvil),
        "blow_ms_reference": 1e3 * _blow_time(ref_anvil),
        "srs_below_100hz_db": float(np.max(np.abs(20 * np.log10(srs[low] / ref_srs[low])))),
    }  # fmt: skip


def matched(diffmbs_rows: dict, exudyn_rows: dict, target: float) -> dict:
    """The fastest setting of each code whose SRS error is ≤ ``target`` dB, and the ratio of
    their wall times (Exudyn / diffmbs); ``None`` where a code reaches no such setting."""

    def best(rows):
        ok = [(r["wall_s"], k) for k, r in rows.items() if r["srs_error_db"] <= target]
        return min(ok)[1] if ok else None

    d, e = best(diffmbs_rows), best(exudyn_rows)
    out = {"target_db": target, "diffmbs": d, "exudyn": e, "ratio_exudyn_over_diffmbs": None}
    if d is not None and e is not None:
        out["ratio_exudyn_over_diffmbs"] = exudyn_rows[e]["wall_s"] / diffmbs_rows[d]["wall_s"]
    return out


def main() -> None:
    import exudyn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=0.5, help="s after the start (0.5)")
    parser.add_argument(
        "--steps",
        default="1e-4,5e-5,2e-5,1e-5",
        help="comma list of Exudyn step sizes h (s), each dividing 1e-4",
    )
    parser.add_argument(
        "--rho", type=float, default=0.9, help="generalized-alpha spectral radius at infinity (0.9)"
    )
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"
                                             / "mwsm3d_exudyn.json"))  # fmt: skip
    args = parser.parse_args()
    window = args.window
    reference, ref_reading, d_rows = diffmbs_runs(window)
    ref_srs = _srs(ref_reading)
    ref_anvil = reference.pop("anvil")
    for row in d_rows.values():
        row["srs_error_db"] = _db_error(_srs(row.pop("reading")), ref_srs)

    full = mwsm3d(start="impact", coordinates="full")
    q0, v0 = (np.asarray(x) for x in jax.jit(type(full).initial_state)(full))
    t0 = time.perf_counter()
    model = ExudynMachine(full, q0, v0, args.rho)
    build_s = time.perf_counter() - t0
    e_rows, checks = {}, {}
    for h in (float(x) for x in args.steps.split(",")):
        run = model.solve(h, window)
        srs = _srs(run["reading"])
        key = f"h {h:g}"
        e_rows[key] = {"h": h, "wall_s": run["wall_s"], "steps": int(round(window / h)),
                       "converged": run["ok"], "srs_error_db": _db_error(srs, ref_srs)}  # fmt: skip
        checks[key] = physical_check(run["reading"], run["anvil"], ref_reading, ref_anvil, srs,
                                     ref_srs)  # fmt: skip
    result = {
        "machine": machine_info(),
        "utc": utc_timestamp(),
        "exudyn_version": exudyn.__version__,
        "window_s": window,
        "rate_hz": RATE,
        "srs": {
            "damping": 0.05,
            "frequencies_hz": [float(FREQS[0]), float(FREQS[-1])],
            "n": int(FREQS.size),
        },  # fmt: skip
        "exudyn_model": {
            "build_s": build_s,
            "solver": "GeneralizedAlpha",
            "rho_inf": args.rho,
            "newton": "full",
            "linear_solver": "EXUdense",
            "contact_laws": "exudyn.symbolic user functions",
            "channel_modes": {n: list(r["kinds"]) for n, r in model.channels.items()},
            "channel_frequencies_hz": {
                n: r["frequencies_hz"].tolist() for n, r in model.channels.items()
            },
        },
        "reference": reference,
        "diffmbs": d_rows,
        "exudyn": e_rows,
        "physical_check": checks,
        "matched": [matched(d_rows, e_rows, t) for t in MATCH_DB],
    }
    print(
        f"window {window:g} s after the start (blow at ~0.3 ms); SRS error: max |dB| over "
        f"{FREQS.size} frequencies, 10 Hz-2 kHz, against diffmbs rtol 1e-9"
    )
    print_table(["code", "setting", "steps", "wall s", "SRS error dB"],
                [["diffmbs Tsit5", k, r["steps"], f"{r['wall_s']:.3f}", f"{r['srs_error_db']:.3f}"]
                 for k, r in d_rows.items()]
                + [["Exudyn gen.-α", k, r["steps"], f"{r['wall_s']:.3f}",
                    f"{r['srs_error_db']:.3f}"] for k, r in e_rows.items()])  # fmt: skip
    print_table(["Exudyn", "peak g (ref)", "blow ms (ref)", "SRS < 100 Hz dB"],
                [[k, f"{c['peak_g']:.1f} ({c['peak_g_reference']:.1f})",
                  f"{c['blow_ms']:.4f} ({c['blow_ms_reference']:.4f})",
                  f"{c['srs_below_100hz_db']:.3f}"] for k, c in checks.items()])  # fmt: skip
    for m in result["matched"]:
        ratio = m["ratio_exudyn_over_diffmbs"]
        print(
            f"matched at <= {m['target_db']:g} dB: diffmbs {m['diffmbs']}, Exudyn {m['exudyn']}, "
            f"Exudyn/diffmbs wall time {'n/a' if ratio is None else f'{ratio:.1f}x'}"
        )
    write_json_atomic(args.out, result)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
