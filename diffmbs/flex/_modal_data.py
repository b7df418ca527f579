"""Modal data of a flexible body: the container, its versioned ``.npz`` file, validation, and
the import of FE matrices from other codes.

:class:`ModalData` is everything a floating-frame body needs: node coordinates, mode shapes at
the nodes (translations and rotations), modal mass and stiffness, the FFR invariants, optional
modal stresses, and a report of the reduction. It is made by :func:`modal_data` from an
:class:`~diffmbs.flex.FEModel` and a :class:`~diffmbs.flex.ModalBasis` (pure JAX, so
differentiable), written by :func:`save_modal_data` and read by :func:`load_modal_data`. The
file format (version :data:`FORMAT_VERSION`) is specified in ``docs/guide/flexible_bodies.md``.

:func:`load_fe_model` reads mass and stiffness matrices exported by Abaqus, ANSYS, Nastran or
CalculiX (Matrix Market ``.mtx``, NumPy ``.npy``/``.npz``, or SciPy sparse ``.npz``) with node
coordinates and a DOF map, converts them to SI, and validates them. Validation errors are
:class:`~diffmbs.flex.FlexDataError` with a message that starts with the item at fault.
"""

from __future__ import annotations

import json
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from diffmbs import selection
from diffmbs.flex._fe import COMPONENTS, FEModel, FlexDataError
from diffmbs.flex._ffr import NodeModes
from diffmbs.flex._invariants import FFRInvariants, ffr_invariants
from diffmbs.flex._reduction import ModalBasis
from diffmbs.io import atomic_write

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "UNITS",
    "ModalData",
    "basis_from_shapes",
    "load_fe_model",
    "load_modal_data",
    "modal_data",
    "save_modal_data",
    "validate_fe_model",
    "validate_modal_data",
]

FORMAT_NAME = "diffmbs.modal"
FORMAT_VERSION = 1
UNITS = {
    "length": "m",
    "mass": "kg",
    "time": "s",
    "angle": "rad",
    "force": "N",
    "stress": "Pa",
}
"""Units of every array in a modal-data file (SI; converted at import)."""

_INVARIANT_FIELDS = (
    "mass",
    "first_moment",
    "inertia",
    "psi_integral",
    "rotation_coupling",
    "inertia_linear",
    "inertia_quadratic",
    "coupling_linear",
    "modal_mass",
)
_TOL = 1e-8  # relative tolerance of symmetry and orthonormality checks


class ModalData(eqx.Module):
    """Modal data of one flexible body (SI; ``n`` nodes, ``m`` modes, ``s`` stress points).

    - ``nodes`` ``(n, 3)``: undeformed node coordinates in the body frame (m);
    - ``translations`` ``(n, 3, m)`` (m) and ``rotations`` ``(n, 3, m)`` (rad): mode shapes at
      the nodes per unit modal amplitude, zero where ``dof_mask`` is False;
    - ``dof_mask`` ``(n, 6)`` bool: which components the FE model had at each node;
    - ``invariants``: :class:`~diffmbs.flex.FFRInvariants` (``modal_mass`` is among them);
    - ``modal_stiffness`` ``(m, m)`` (N/m per unit amplitude);
    - ``stress_modes`` ``(s, m)`` (Pa per unit amplitude), ``σ = stress_modes @ q_f``;
    - static: ``node_ids`` (labels of the source model), ``kinds`` (per mode),
      ``orthonormal`` (claims ``M_ff = I``, ``K_ff`` diagonal), ``stress_labels``, ``report``
      (JSON of the :class:`~diffmbs.flex.ReductionReport`, or ""), ``source``.
    """

    nodes: Array
    translations: Array
    rotations: Array
    dof_mask: Array
    invariants: FFRInvariants
    modal_stiffness: Array
    stress_modes: Array
    node_ids: tuple[int, ...] = eqx.field(static=True)
    kinds: tuple[str, ...] = eqx.field(static=True)
    orthonormal: bool = eqx.field(static=True)
    stress_labels: tuple[str, ...] = eqx.field(static=True, default=())
    report: str = eqx.field(static=True, default="")
    source: str = eqx.field(static=True, default="")

    @property
    def n_modes(self) -> int:
        return self.translations.shape[2]

    @property
    def modal_mass(self) -> Array:
        return self.invariants.modal_mass

    def frequencies_hz(self) -> Array:
        """``√(K_kk / M_kk) / 2π`` per mode (Hz; exact natural frequencies when orthonormal)."""
        omega2 = jnp.diagonal(self.modal_stiffness) / jnp.diagonal(self.modal_mass)
        return jnp.sqrt(selection.maximum(omega2, 0.0)) / (2 * jnp.pi)

    def node_index(self, node_id: int) -> int:
        """Row of the node labelled ``node_id`` in the source model."""
        try:
            return self.node_ids.index(int(node_id))
        except ValueError:
            raise FlexDataError(f"node {node_id}: no such node label in the modal data") from None

    def node(self, row: int) -> NodeModes:
        """The :class:`~diffmbs.flex.NodeModes` of node row ``row`` (for the node kinematics)."""
        return NodeModes(self.nodes[row], self.translations[row], self.rotations[row])


def modal_data(
    fe: FEModel,
    basis: ModalBasis,
    *,
    stress_modes: Array | None = None,
    stress_labels: tuple[str, ...] = (),
    report: str = "",
    source: str = "diffmbs",
) -> ModalData:
    """Assemble :class:`ModalData` from an FE model and a basis on it (pure JAX)."""
    trans, rot = fe.node_vectors(basis.shapes)
    if stress_modes is None:
        stress_modes = jnp.zeros((0, basis.n_modes), basis.shapes.dtype)
    return ModalData(
        nodes=fe.nodes,
        translations=trans,
        rotations=rot,
        dof_mask=jnp.asarray(fe.dof_mask()),
        invariants=ffr_invariants(fe, basis.shapes),
        modal_stiffness=basis.stiffness,
        stress_modes=stress_modes,
        node_ids=fe.node_ids,
        kinds=basis.kinds,
        orthonormal=basis.orthonormal,
        stress_labels=tuple(stress_labels),
        report=report,
        source=source,
    )


def basis_from_shapes(
    fe: FEModel,
    shapes: ArrayLike,
    *,
    orthonormal: bool,
    kinds: tuple[str, ...] | None = None,
    held: tuple[int, ...] = (),
) -> ModalBasis:
    """A :class:`~diffmbs.flex.ModalBasis` from mode shapes computed elsewhere (e.g. exported
    with the matrices), ``(n_dof, m)`` in the DOF order and units of ``fe``.

    ``orthonormal=True`` claims ``Ψᵀ M Ψ = I`` and ``Ψᵀ K Ψ`` diagonal; the claim is checked
    (concrete values) and a violation raises :class:`FlexDataError`."""
    shapes = jnp.asarray(shapes, float)
    if shapes.ndim != 2 or shapes.shape[0] != fe.n_dof:
        raise FlexDataError(f"shapes: expected ({fe.n_dof}, m), got {shapes.shape}")
    m_r = shapes.T @ fe.mass @ shapes
    k_r = shapes.T @ fe.stiffness @ shapes
    m_r, k_r = 0.5 * (m_r + m_r.T), 0.5 * (k_r + k_r.T)
    n = shapes.shape[1]
    kinds = ("imported",) * n if kinds is None else tuple(kinds)
    if len(kinds) != n:
        raise FlexDataError(f"kinds: {len(kinds)} given for {n} shapes")
    if orthonormal and not isinstance(m_r, jax.core.Tracer):
        _check_orthonormal(np.asarray(m_r), np.asarray(k_r), "shapes")
    return ModalBasis(shapes, m_r, k_r, kinds, orthonormal, tuple(held), "imported shapes")


# --------------------------------------------------------------------------- validation


def _check_finite(name: str, x) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    bad = np.argwhere(~np.isfinite(x))
    if bad.size:
        raise FlexDataError(f"{name}: non-finite value at index {tuple(bad[0])}")
    return x


def _check_shape(name: str, x, shape: tuple[int, ...]) -> np.ndarray:
    x = np.asarray(x)
    if x.shape != shape:
        raise FlexDataError(f"{name}: expected shape {shape}, got {x.shape}")
    return x


def _check_symmetric(name: str, a: np.ndarray) -> None:
    scale = max(np.max(np.abs(a), initial=0.0), np.finfo(float).tiny)
    err = np.max(np.abs(a - a.T), initial=0.0)
    if err > _TOL * scale:
        raise FlexDataError(
            f"{name}: not symmetric (max |A − Aᵀ| = {err:.3g}, {err / scale:.2g} of max |A|)"
        )


def _check_definite(name: str, a: np.ndarray, semi: bool, hint: str = "") -> None:
    if a.shape[0] == 0:
        return
    lam = np.linalg.eigvalsh(0.5 * (a + a.T))
    scale = max(np.max(np.abs(lam)), np.finfo(float).tiny)
    ok = lam[0] >= -_TOL * scale if semi else lam[0] > _TOL * scale
    if not ok:
        kind = "positive semi-definite" if semi else "positive definite"
        raise FlexDataError(
            f"{name}: not {kind} (smallest eigenvalue {lam[0]:.3g}, largest {lam[-1]:.3g}){hint}"
        )


def _check_orthonormal(m_r: np.ndarray, k_r: np.ndarray, name: str) -> None:
    n = m_r.shape[0]
    dev = np.max(np.abs(m_r - np.eye(n)), initial=0.0)
    if dev > _TOL * 100:
        raise FlexDataError(
            f"{name}: claimed mass-orthonormal, but Ψᵀ M Ψ deviates from I by {dev:.3g}"
        )
    off = k_r - np.diag(np.diagonal(k_r))
    scale = max(np.max(np.abs(k_r), initial=0.0), np.finfo(float).tiny)
    if np.max(np.abs(off), initial=0.0) > _TOL * 100 * scale:
        raise FlexDataError(
            f"{name}: claimed orthonormal modes, but Ψᵀ K Ψ is not diagonal "
            f"(largest off-diagonal {np.max(np.abs(off)):.3g})"
        )


def validate_fe_model(fe: FEModel) -> FEModel:
    """Check an :class:`~diffmbs.flex.FEModel` (concrete values); returns it unchanged.

    Shapes and the DOF map, finite values, symmetric ``M`` and ``K``, ``M`` positive definite,
    ``K`` positive semi-definite."""
    n, n_nodes = fe.n_dof, fe.n_nodes
    _check_finite("nodes", _check_shape("nodes", fe.nodes, (n_nodes, 3)))
    comps = np.asarray(fe.dof_components)
    rows = np.asarray(fe.dof_nodes)
    if len(fe.dof_components) != n:
        raise FlexDataError(f"dof map: {n} node entries but {len(comps)} components")
    if n and (comps.min() < 0 or comps.max() > 5):
        raise FlexDataError("dof map: components must be 0–5 (ux, uy, uz, rx, ry, rz)")
    if n and (rows.min() < 0 or rows.max() >= n_nodes):
        raise FlexDataError(f"dof map: node rows must lie in 0…{n_nodes - 1}")
    pairs = rows * 6 + comps
    if np.unique(pairs).size != n:
        dup = pairs[np.argmax(np.bincount(pairs))]
        raise FlexDataError(
            f"dof map: node {fe.node_ids[dup // 6]} component {COMPONENTS[dup % 6]} appears twice"
        )
    for name, a, semi, hint in (
        (
            "mass matrix",
            fe.mass,
            False,
            " — massless DOFs (a lumped mass without rotary inertia?) must be condensed out",
        ),
        ("stiffness matrix", fe.stiffness, True, ""),
    ):
        a = _check_finite(name, _check_shape(name, a, (n, n)))
        _check_symmetric(name, a)
        _check_definite(name, a, semi, hint)
    return fe


def validate_modal_data(data: ModalData) -> ModalData:
    """Check :class:`ModalData` (concrete values): consistent shapes, finite values, symmetric
    and definite mass-like arrays, and the orthonormality claim. Returns ``data``."""
    n = np.asarray(data.nodes).shape[0] if np.ndim(data.nodes) == 2 else -1
    m = np.asarray(data.translations).shape[-1] if np.ndim(data.translations) == 3 else -1
    if n < 0 or m < 0:
        raise FlexDataError(
            f"nodes/translations: expected (n, 3) and (n, 3, m), got {np.shape(data.nodes)} "
            f"and {np.shape(data.translations)}"
        )
    inv = data.invariants
    s = np.shape(data.stress_modes)[0] if np.ndim(data.stress_modes) == 2 else -1
    expected = {
        "nodes": (data.nodes, (n, 3)),
        "translations": (data.translations, (n, 3, m)),
        "rotations": (data.rotations, (n, 3, m)),
        "dof_mask": (data.dof_mask, (n, 6)),
        "modal_stiffness": (data.modal_stiffness, (m, m)),
        "stress_modes": (data.stress_modes, (max(s, 0), m)),
        "mass": (inv.mass, ()),
        "first_moment": (inv.first_moment, (3,)),
        "inertia": (inv.inertia, (3, 3)),
        "psi_integral": (inv.psi_integral, (3, m)),
        "rotation_coupling": (inv.rotation_coupling, (3, m)),
        "inertia_linear": (inv.inertia_linear, (m, 3, 3)),
        "inertia_quadratic": (inv.inertia_quadratic, (m, m, 3, 3)),
        "coupling_linear": (inv.coupling_linear, (m, 3, m)),
        "modal_mass": (inv.modal_mass, (m, m)),
    }
    arrays = {}
    for name, (x, shape) in expected.items():
        arrays[name] = _check_shape(name, x, shape)
        if name != "dof_mask":
            arrays[name] = _check_finite(name, arrays[name])
    if len(data.node_ids) != n:
        raise FlexDataError(f"node_ids: {len(data.node_ids)} labels for {n} nodes")
    if len(data.kinds) != m:
        raise FlexDataError(f"mode_kinds: {len(data.kinds)} kinds for {m} modes")
    if len(data.stress_labels) != arrays["stress_modes"].shape[0]:
        raise FlexDataError(
            f"stress_labels: {len(data.stress_labels)} labels for "
            f"{arrays['stress_modes'].shape[0]} stress points"
        )
    if not arrays["mass"] > 0:
        raise FlexDataError(f"mass: must be positive, got {float(arrays['mass'])}")
    for name in ("inertia", "modal_mass", "modal_stiffness"):
        _check_symmetric(name, arrays[name])
    _check_definite("inertia", arrays["inertia"], semi=False)
    _check_definite("modal_mass", arrays["modal_mass"], semi=False)
    _check_definite("modal_stiffness", arrays["modal_stiffness"], semi=True)
    j2 = arrays["inertia_quadratic"]
    if np.max(np.abs(j2 - np.transpose(j2, (1, 0, 3, 2))), initial=0.0) > _TOL * max(
        np.max(np.abs(j2), initial=0.0), np.finfo(float).tiny
    ):
        raise FlexDataError("inertia_quadratic: J2[k, l] must equal J2[l, k]ᵀ")
    if data.orthonormal:
        _check_orthonormal(arrays["modal_mass"], arrays["modal_stiffness"], "modal_mass")
    return data


# --------------------------------------------------------------------------- npz file


def save_modal_data(path, data: ModalData) -> Path:
    """Validate ``data`` and write it atomically as a ``.npz`` file (format in
    ``docs/guide/flexible_bodies.md``). Returns the path."""
    validate_modal_data(data)
    inv = data.invariants
    arrays = {
        "format": np.array(FORMAT_NAME),
        "format_version": np.array(FORMAT_VERSION),
        "units": np.array(json.dumps(UNITS)),
        "source": np.array(data.source),
        "report": np.array(data.report),
        "nodes": np.asarray(data.nodes, float),
        "node_ids": np.asarray(data.node_ids, dtype=np.int64),
        "dof_mask": np.asarray(data.dof_mask, bool),
        "translations": np.asarray(data.translations, float),
        "rotations": np.asarray(data.rotations, float),
        "modal_stiffness": np.asarray(data.modal_stiffness, float),
        "frequencies_hz": np.asarray(data.frequencies_hz(), float),
        "mode_kinds": np.asarray(data.kinds, dtype=str).reshape(-1),
        "orthonormal": np.array(bool(data.orthonormal)),
        "stress_modes": np.asarray(data.stress_modes, float),
        "stress_labels": np.asarray(data.stress_labels, dtype=str).reshape(-1),
    }
    arrays.update({name: np.asarray(getattr(inv, name), float) for name in _INVARIANT_FIELDS})
    return atomic_write(path, lambda tmp: np.savez(tmp, **arrays))


def load_modal_data(path) -> ModalData:
    """Read and validate a modal-data ``.npz`` file written by :func:`save_modal_data` (or by
    any tool following the format). Errors name the file and the item."""
    path = Path(path)
    if not path.is_file():
        raise FlexDataError(f"{path}: file not found")
    try:
        with np.load(path, allow_pickle=False) as f:
            raw = {k: f[k] for k in f.files}
    except (OSError, ValueError) as err:
        raise FlexDataError(f"{path}: not a readable .npz file ({err})") from None
    try:
        return _from_arrays(raw)
    except FlexDataError as err:
        raise FlexDataError(f"{path}: {err}") from None


def _from_arrays(raw: dict[str, np.ndarray]) -> ModalData:
    required = (
        "format",
        "format_version",
        "units",
        "nodes",
        "node_ids",
        "dof_mask",
        "translations",
        "rotations",
        "modal_stiffness",
        "mode_kinds",
        "orthonormal",
        *_INVARIANT_FIELDS,
    )
    missing = [k for k in required if k not in raw]
    if missing:
        raise FlexDataError(f"{missing[0]}: missing (required items: {', '.join(required)})")
    if str(raw["format"]) != FORMAT_NAME:
        raise FlexDataError(f"format: expected {FORMAT_NAME!r}, got {str(raw['format'])!r}")
    version = int(raw["format_version"])
    if version > FORMAT_VERSION:
        raise FlexDataError(
            f"format_version: file is version {version}, this diffmbs reads ≤ {FORMAT_VERSION}"
        )
    units = json.loads(str(raw["units"]))
    if units != UNITS:
        raise FlexDataError(f"units: expected {UNITS}, got {units} (convert to SI at import)")
    m = np.shape(raw["translations"])[-1] if np.ndim(raw["translations"]) == 3 else 0
    stress = raw.get("stress_modes", np.zeros((0, m)))
    j = lambda k: jnp.asarray(raw[k], float)
    data = ModalData(
        nodes=j("nodes"),
        translations=j("translations"),
        rotations=j("rotations"),
        dof_mask=jnp.asarray(raw["dof_mask"], bool),
        invariants=FFRInvariants(**{k: j(k) for k in _INVARIANT_FIELDS}),
        modal_stiffness=j("modal_stiffness"),
        stress_modes=jnp.asarray(stress, float),
        node_ids=tuple(int(i) for i in np.asarray(raw["node_ids"]).reshape(-1)),
        kinds=tuple(str(k) for k in np.asarray(raw["mode_kinds"]).reshape(-1)),
        orthonormal=bool(raw["orthonormal"]),
        stress_labels=tuple(str(k) for k in raw.get("stress_labels", np.zeros(0, str))),
        report=str(raw.get("report", "")),
        source=str(raw.get("source", "")),
    )
    return validate_modal_data(data)


# --------------------------------------------------------------------------- FE import


def _read_array(source, name: str) -> np.ndarray:
    """A dense array from an array-like or a file (.mtx, .npy, .npz, .csv, .txt)."""
    if not isinstance(source, str | Path):
        return np.asarray(source, dtype=float)
    path = Path(source)
    if not path.is_file():
        raise FlexDataError(f"{name}: file not found: {path}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".mtx":
            import scipy.io  # edge dependency: only to read Matrix Market files

            a = scipy.io.mmread(path)
            return np.asarray(a.toarray() if hasattr(a, "toarray") else a, dtype=float)
        if suffix == ".npy":
            return np.asarray(np.load(path, allow_pickle=False), dtype=float)
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as f:
                if {"indptr", "indices", "data", "format", "shape"} <= set(f.files):
                    import scipy.sparse  # edge dependency: SciPy's sparse .npz

                    return np.asarray(scipy.sparse.load_npz(path).toarray(), dtype=float)
                if len(f.files) != 1:
                    raise FlexDataError(
                        f"{name}: {path} holds {f.files}; expected one array or a SciPy "
                        "sparse matrix"
                    )
                return np.asarray(f[f.files[0]], dtype=float)
        if suffix in (".csv", ".txt"):
            return np.loadtxt(path, delimiter="," if suffix == ".csv" else None, ndmin=2)
    except (OSError, ValueError) as err:
        if isinstance(err, FlexDataError):
            raise
        raise FlexDataError(f"{name}: cannot read {path}: {err}") from None
    raise FlexDataError(f"{name}: unsupported file type {suffix!r} ({path})")


def load_fe_model(
    mass,
    stiffness,
    nodes,
    dof_map,
    *,
    node_ids: ArrayLike | None = None,
    length_unit: float = 1.0,
    mass_unit: float = 1.0,
    time_unit: float = 1.0,
) -> FEModel:
    """Import FE matrices from another code as a validated :class:`~diffmbs.flex.FEModel`.

    - ``mass``, ``stiffness``: ``(n_dof, n_dof)`` arrays or files — Matrix Market ``.mtx``
      (read with ``scipy.io.mmread``; symmetric storage is expanded), ``.npy``, ``.npz`` with
      one array or a SciPy sparse matrix (``scipy.sparse.save_npz``);
    - ``nodes``: ``(n_nodes, 3)`` coordinates, or ``(n_nodes, 4)`` with the node label first;
      array or ``.npy``/``.csv``/``.txt``;
    - ``dof_map``: ``(n_dof, 2)`` rows ``(node label, dof)`` with ``dof`` 1–6 = UX, UY, UZ,
      ROTX, ROTY, ROTZ (the Abaqus/ANSYS/Nastran numbering), in matrix row order;
    - ``node_ids``: node labels for 3-column ``nodes`` (default ``0 … n_nodes − 1``);
    - ``length_unit``, ``mass_unit``, ``time_unit``: SI value of the file's units (an
      mm–t–s model: ``1e-3, 1e3, 1``). Translational DOFs scale by the length unit, rotations
      not: ``M_SI = μ ℓ² D⁻¹ M D⁻¹``, ``K_SI = μ ℓ²/τ² D⁻¹ K D⁻¹``, ``D = diag(ℓ or 1)``.
    """
    m = _read_array(mass, "mass matrix")
    k = _read_array(stiffness, "stiffness matrix")
    xyz = _read_array(nodes, "nodes")
    dmap = _read_array(dof_map, "dof map")
    if xyz.ndim != 2 or xyz.shape[1] not in (3, 4):
        raise FlexDataError(f"nodes: expected (n, 3) or (n, 4) with labels, got {xyz.shape}")
    if xyz.shape[1] == 4:
        labels, xyz = xyz[:, 0], xyz[:, 1:]
    else:
        labels = np.arange(xyz.shape[0]) if node_ids is None else np.asarray(node_ids)
    labels = [int(x) for x in np.asarray(labels).reshape(-1)]
    if len(labels) != xyz.shape[0] or len(set(labels)) != len(labels):
        raise FlexDataError("node_ids: need one distinct label per node")
    if dmap.ndim != 2 or dmap.shape[1] != 2:
        raise FlexDataError(f"dof map: expected shape (n_dof, 2), got {dmap.shape}")
    row_of = {label: row for row, label in enumerate(labels)}
    unknown = [int(x) for x in dmap[:, 0] if int(x) not in row_of]
    if unknown:
        raise FlexDataError(f"dof map: node label {unknown[0]} is not among the nodes")
    comps = dmap[:, 1].astype(int) - 1
    if np.any((comps < 0) | (comps > 5)):
        raise FlexDataError("dof map: dof numbers must be 1–6 (UX, UY, UZ, ROTX, ROTY, ROTZ)")
    n = dmap.shape[0]
    for name, a in (("mass matrix", m), ("stiffness matrix", k)):
        _check_shape(name, a, (n, n))
    d_inv = np.where(comps < 3, 1.0 / length_unit, 1.0)
    scale = mass_unit * length_unit**2 * np.outer(d_inv, d_inv)
    fe = FEModel(
        mass=jnp.asarray(m * scale),
        stiffness=jnp.asarray(k * scale / time_unit**2),
        nodes=jnp.asarray(xyz * length_unit),
        dof_nodes=tuple(row_of[int(x)] for x in dmap[:, 0]),
        dof_components=tuple(int(c) for c in comps),
        node_ids=tuple(labels),
    )
    return validate_fe_model(fe)
