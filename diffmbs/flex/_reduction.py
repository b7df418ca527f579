"""Modal reductions of an :class:`~diffmbs.flex.FEModel`, differentiable through the eigensolver.

A reduction (:class:`AbstractReduction`) maps the ``n_dof`` physical DOFs onto ``m`` shape
vectors, ``u ≈ Ψ q``, and returns a :class:`ModalBasis` (``Ψ``, ``Ψᵀ M Ψ``, ``Ψᵀ K Ψ``):

- :class:`FreeFreeModes`: elastic normal modes of the free structure; the six rigid-body
  modes are removed (the floating frame carries rigid motion);
- :class:`FixedInterfaceModes`: normal modes with the interface DOFs held (the frame follows
  the interface: "modes with the anchor points fixed");
- :class:`CraigBampton`: static constraint modes of the interface DOFs plus fixed-interface
  normal modes; by default the basis is orthonormalised and, for a free structure, its
  rigid-body content removed, so that it can be used in a floating frame.

The generalized eigenproblem ``K φ = ω² M φ`` is solved in JAX as the standard symmetric
problem ``L⁻¹ K L⁻ᵀ y = ω² y`` (``M = L Lᵀ`` by Cholesky, ``φ = L⁻ᵀ y``, so ``φᵀ M φ = 1``)
with ``jnp.linalg.eigh``: its derivative is exact for distinct eigenvalues. Rigid-body modes
(exact null vectors of ``K``, built from the node coordinates) are *deflated*: they are moved
to distinct negative eigenvalues ``−σ, −2σ, …`` before the solve, so that the zero
eigenvalues — repeated, and fatal to the eigenvector derivative — never reach ``eigh``. Each
mode's sign is fixed so that its largest component is positive (ties go to the lowest DOF),
which keeps finite differences and ``grad`` consistent.

Selection: ``n_modes`` (static, works under ``jit``/``grad``) or ``cutoff_hz`` (all modes at or
below the frequency; needs concrete matrices, since it decides an array size). Checks that need
concrete values (a mechanism, an interface that does not hold the structure) run only when the
matrices are concrete.
"""

from __future__ import annotations

import abc
import dataclasses
import json
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jaxtyping import Array

from diffmbs import selection
from diffmbs.flex._fe import FEModel, FlexDataError, rigid_body_modes

__all__ = [
    "AbstractReduction",
    "CraigBampton",
    "FixedInterfaceModes",
    "FreeFreeModes",
    "ModalBasis",
    "ReductionReport",
    "generalized_eigh",
    "reduction_report",
]

_ZERO_EIGENVALUE = 1e-10
"""An eigenvalue below this fraction of the largest one counts as zero (a mechanism)."""


def _optional_int(x) -> int | None:
    return None if x is None else int(x)


def _optional_float(x) -> float | None:
    return None if x is None else float(x)


def _concrete(*arrays) -> bool:
    return not any(isinstance(a, jax.core.Tracer) for a in jax.tree.leaves(arrays))


def _fix_signs(phi: Array) -> Array:
    """Make the largest-magnitude entry of each column positive (first of near-ties)."""
    mag = jnp.abs(phi)  # jnp.max only picks an index here: argmax and the sign carry no tangent
    first = jnp.argmax(mag >= (1 - 1e-6) * jnp.max(mag, axis=0), axis=0)
    sign = jnp.sign(phi[first, jnp.arange(phi.shape[1])])
    return phi * jax.lax.stop_gradient(jnp.where(sign == 0, 1.0, sign))


@eqx.filter_jit
def generalized_eigh(
    stiffness: Array, mass: Array, deflate: Array | None = None
) -> tuple[Array, Array]:
    """Eigenpairs of ``K φ = λ M φ``, ascending, ``φᵀ M φ = I``: ``(λ (n,), φ (n, n))``.

    ``deflate`` ``(n, r)``: null vectors of ``K`` (rigid-body modes) that are given the distinct
    eigenvalues ``−σ, …, −rσ`` (``σ`` = mean diagonal of ``L⁻¹ K L⁻ᵀ``), so they come first and
    the remaining spectrum, unchanged, has no repeated zero eigenvalue.
    """
    low = jnp.linalg.cholesky(mass)
    a = jsl.solve_triangular(low, stiffness, lower=True)
    a = jsl.solve_triangular(low, a.T, lower=True)
    a = 0.5 * (a + a.T)
    if deflate is not None and deflate.shape[1] > 0:
        q, _ = jnp.linalg.qr(low.T @ deflate)
        sigma = jax.lax.stop_gradient(jnp.mean(jnp.abs(jnp.diagonal(a))))
        shifts = sigma * jnp.arange(1, q.shape[1] + 1, dtype=a.dtype)
        a = a - (q * shifts) @ q.T
        a = 0.5 * (a + a.T)
    lam, y = jnp.linalg.eigh(a)
    phi = jsl.solve_triangular(low.T, y, lower=False)
    return lam, _fix_signs(phi)


def _count(n_modes: int | None, cutoff_hz: float | None, lam: Array, available: int) -> int:
    """Number of modes to keep from ascending eigenvalues ``lam`` (rad²/s²)."""
    if n_modes is not None:
        if n_modes > available:
            raise FlexDataError(f"n_modes: {n_modes} requested, only {available} exist")
        return n_modes
    if not _concrete(lam):
        raise FlexDataError(
            "cutoff_hz: selecting modes by frequency needs concrete matrices (it fixes an "
            "array size); call outside jit/grad/vmap, or give n_modes"
        )
    return int(np.sum(np.asarray(lam) <= (2 * np.pi * cutoff_hz) ** 2))


def _check_positive(lam: Array, what: str) -> None:
    """Raise if the smallest of ``lam`` (concrete) is numerically zero or negative."""
    if lam.shape[0] and _concrete(lam):
        lam = np.asarray(lam)
        if not lam[0] > _ZERO_EIGENVALUE * np.max(np.abs(lam)):
            raise FlexDataError(what)


class ModalBasis(eqx.Module):
    """Result of a reduction: ``u ≈ Ψ q`` with ``m`` shape vectors.

    - ``shapes`` Ψ ``(n_dof, m)``: m or rad per unit modal amplitude;
    - ``mass`` ``Ψᵀ M Ψ`` and ``stiffness`` ``Ψᵀ K Ψ``, ``(m, m)``;
    - ``kinds`` (static): per shape, ``"elastic"`` (free-free), ``"fixed-interface"``,
      ``"constraint"`` (Craig–Bampton static mode) or ``"craig-bampton"`` (orthonormalised);
    - ``orthonormal`` (static): ``mass`` is the identity and ``stiffness`` is ``diag(ω²)``;
    - ``held`` (static): DOFs that are zero in every shape (fixed interface or support);
    - ``method`` (static): the reduction's name and settings, for reports.
    """

    shapes: Array
    mass: Array
    stiffness: Array
    kinds: tuple[str, ...] = eqx.field(static=True)
    orthonormal: bool = eqx.field(static=True)
    held: tuple[int, ...] = eqx.field(static=True)
    method: str = eqx.field(static=True)

    @property
    def n_modes(self) -> int:
        return self.shapes.shape[1]

    def frequencies_hz(self) -> Array:
        """``√(K_kk / M_kk) / 2π`` per shape (Hz): the natural frequency of an orthonormal
        mode or a fixed-interface mode; NaN for a static constraint mode."""
        omega2 = jnp.diagonal(self.stiffness) / jnp.diagonal(self.mass)
        f = jnp.sqrt(selection.maximum(omega2, 0.0)) / (2 * jnp.pi)
        constraint = np.array([k == "constraint" for k in self.kinds], dtype=bool)
        return jnp.where(constraint, jnp.nan, f)


def _orthonormal_basis(shapes, lam, kinds, held, method) -> ModalBasis:
    m = shapes.shape[1]
    return ModalBasis(
        shapes, jnp.eye(m, dtype=shapes.dtype), jnp.diag(lam), kinds, True, held, method
    )


class AbstractReduction(eqx.Module):
    """A reduction: ``reduction(fe)`` → :class:`ModalBasis`.

    Every reduction has the static fields ``n_modes`` (count of normal modes) and
    ``cutoff_hz`` (keep the normal modes up to this frequency), exactly one of them given;
    subclasses declare them after their own positional fields (``interface`` first)."""

    def __check_init__(self):
        if (self.n_modes is None) == (self.cutoff_hz is None):
            raise FlexDataError(f"{type(self).__name__}: give exactly one of n_modes and cutoff_hz")
        if self.n_modes is not None and self.n_modes < 0:
            raise FlexDataError(f"n_modes: must be ≥ 0, got {self.n_modes}")

    @abc.abstractmethod
    def __call__(self, fe: FEModel) -> ModalBasis:
        """Reduce ``fe``."""

    def _selection(self) -> str:
        return f"n_modes={self.n_modes}" if self.cutoff_hz is None else f"≤ {self.cutoff_hz} Hz"


def _index_sets(n: int, *held: Sequence[int]) -> tuple[np.ndarray, ...]:
    """Sorted index arrays of the ``held`` groups and of the remaining DOFs."""
    sets = [np.unique(np.asarray(h, dtype=int)) for h in held]
    every = np.concatenate(sets) if sets else np.zeros(0, int)
    if every.size and (every.min() < 0 or every.max() >= n):
        raise FlexDataError(f"interface: DOF indices must lie in 0…{n - 1}")
    if np.unique(every).size != every.size:
        raise FlexDataError("interface: a DOF is listed both as interface and as fixed")
    rest = np.setdiff1d(np.arange(n), every)
    return (*sets, rest)


class FreeFreeModes(AbstractReduction):
    """The lowest elastic normal modes of the free structure, rigid-body modes removed.

    They are mass-orthogonal to the rigid-body modes, so the floating frame is a (linearised)
    Tisserand mean-axis frame: ``∫ρΨ dV = 0`` and ``∫ρ x̄ × Ψ dV = 0``.
    """

    n_modes: int | None = eqx.field(static=True, default=None, converter=_optional_int)
    cutoff_hz: float | None = eqx.field(static=True, default=None, converter=_optional_float)

    def __call__(self, fe: FEModel) -> ModalBasis:
        rigid = rigid_body_modes(fe)
        if _concrete(fe.stiffness, fe.nodes):
            k, r = np.asarray(fe.stiffness), np.asarray(rigid)
            if np.max(np.abs(k @ r)) > 1e-8 * np.max(np.abs(k)) * max(1.0, np.max(np.abs(r))):
                raise FlexDataError(
                    "stiffness: K does not annihilate the rigid-body motions built from the "
                    "node coordinates (grounded springs, a wrong DOF map or inconsistent units)"
                )
        lam, phi = generalized_eigh(fe.stiffness, fe.mass, deflate=rigid)
        lam, phi = lam[6:], phi[:, 6:]
        _check_positive(
            lam,
            "stiffness: the free structure has more than six zero-frequency modes "
            "(a mechanism or disconnected parts)",
        )
        count = _count(self.n_modes, self.cutoff_hz, lam, lam.shape[0])
        method = f"free-free normal modes ({self._selection()})"
        return _orthonormal_basis(phi[:, :count], lam[:count], ("elastic",) * count, (), method)


class FixedInterfaceModes(AbstractReduction):
    """The lowest normal modes with the ``interface`` DOFs held at zero (static tuple of DOF
    indices, e.g. ``fe.dofs(root_node)``)."""

    interface: tuple[int, ...] = eqx.field(
        static=True, default=(), converter=lambda x: tuple(map(int, x))
    )
    n_modes: int | None = eqx.field(static=True, default=None, converter=_optional_int)
    cutoff_hz: float | None = eqx.field(static=True, default=None, converter=_optional_float)

    def __call__(self, fe: FEModel) -> ModalBasis:
        if not self.interface:
            raise FlexDataError("interface: no DOFs held (use FreeFreeModes for a free body)")
        held, free = _index_sets(fe.n_dof, self.interface)
        lam, phi_f = _fixed_modes(fe, free)
        count = _count(self.n_modes, self.cutoff_hz, lam, lam.shape[0])
        shapes = jnp.zeros((fe.n_dof, count), phi_f.dtype).at[free].set(phi_f[:, :count])
        method = f"fixed-interface normal modes ({len(held)} DOFs held, {self._selection()})"
        return _orthonormal_basis(
            shapes, lam[:count], ("fixed-interface",) * count, tuple(map(int, held)), method
        )


def _fixed_modes(fe: FEModel, free: np.ndarray) -> tuple[Array, Array]:
    sub = np.ix_(free, free)
    lam, phi = generalized_eigh(fe.stiffness[sub], fe.mass[sub])
    _check_positive(
        lam,
        "interface: holding these DOFs leaves a zero-frequency mode (the interface does not "
        "restrain all rigid-body motion)",
    )
    return lam, phi


class CraigBampton(AbstractReduction):
    """Craig–Bampton: one static constraint mode per ``interface`` DOF (unit displacement there,
    the other interface and ``fixed`` DOFs held, interior in static equilibrium) plus the lowest
    normal modes with interface and fixed DOFs held.

    ``fixed`` (static tuple): support DOFs, zero in every shape. ``orthonormalize`` (static,
    default True): diagonalise the reduced pair ``(Ψᵀ K Ψ, Ψᵀ M Ψ)`` and return its mass-
    orthonormal eigenvectors ``Ψ Y`` — same span, so static response to interface loads stays
    exact. For a free structure (no ``fixed`` DOFs) the six rigid-body modes, which the
    constraint modes contain, are removed, leaving ``n_interface + n_modes − 6`` shapes for a
    floating frame. ``orthonormalize=False`` keeps the classical ``[Ψ_c, Φ]`` basis (with the
    rigid-body motion of a free structure in it: not for a floating frame).
    """

    interface: tuple[int, ...] = eqx.field(
        static=True, default=(), converter=lambda x: tuple(map(int, x))
    )
    n_modes: int | None = eqx.field(static=True, default=None, converter=_optional_int)
    cutoff_hz: float | None = eqx.field(static=True, default=None, converter=_optional_float)
    fixed: tuple[int, ...] = eqx.field(
        static=True, default=(), converter=lambda x: tuple(map(int, x))
    )
    orthonormalize: bool = eqx.field(static=True, default=True)

    def __call__(self, fe: FEModel) -> ModalBasis:
        b, s, i = _index_sets(fe.n_dof, self.interface, self.fixed)
        if b.size == 0:
            raise FlexDataError("interface: Craig–Bampton needs at least one interface DOF")
        k, m = fe.stiffness, fe.mass
        lam, phi_i = _fixed_modes(fe, i)
        count = _count(self.n_modes, self.cutoff_hz, lam, lam.shape[0])
        k_ii = k[np.ix_(i, i)]
        static = -jsl.cho_solve((jnp.linalg.cholesky(k_ii), True), k[np.ix_(i, b)])
        n_b = b.size
        t = jnp.zeros((fe.n_dof, n_b + count), k.dtype)
        t = t.at[b, np.arange(n_b)].set(1.0)
        t = t.at[np.ix_(i, np.arange(n_b))].set(static)
        t = t.at[np.ix_(i, np.arange(n_b, n_b + count))].set(phi_i[:, :count])
        k_r, m_r = t.T @ k @ t, t.T @ m @ t
        k_r, m_r = 0.5 * (k_r + k_r.T), 0.5 * (m_r + m_r.T)
        held = tuple(map(int, s))
        sel = self._selection()
        if not self.orthonormalize:
            kinds = ("constraint",) * n_b + ("fixed-interface",) * count
            method = f"Craig–Bampton ({n_b} constraint modes, {sel})"
            return ModalBasis(t, m_r, k_r, kinds, False, held, method)
        deflate = None
        if s.size == 0:
            # Rigid motion is static: in reduced coordinates it is the interface values with no
            # normal-mode content. (It is representable: an interface that could not carry all
            # six motions would have left a zero fixed-interface frequency above.)
            deflate = jnp.zeros((n_b + count, 6), k.dtype).at[:n_b].set(rigid_body_modes(fe)[b])
        lam_r, y = generalized_eigh(k_r, m_r, deflate=deflate)
        n_rigid = 0 if deflate is None else 6
        lam_r, y = lam_r[n_rigid:], y[:, n_rigid:]
        _check_positive(lam_r, "stiffness: the Craig–Bampton basis has a zero-frequency mode")
        method = f"Craig–Bampton, orthonormalised ({n_b} interface DOFs, {sel})"
        return _orthonormal_basis(t @ y, lam_r, ("craig-bampton",) * lam_r.shape[0], held, method)


# --------------------------------------------------------------------------- report


@dataclasses.dataclass(frozen=True)
class ReductionReport:
    """What a reduction kept (concrete numbers, SI).

    - ``method``: the reduction; ``n_dof``: size of the FE model; ``held``: DOFs held at zero;
    - ``total_mass`` (kg); ``kinds`` and ``frequencies_hz`` per shape (NaN: static mode);
    - ``effective_mass`` ``(m, 6)`` or None: for orthonormal modes relative to a held base, the
      modal
      effective masses ``Γ² / m_k`` (kg for translations x, y, z; kg·m² for rotations about the
      body-frame axes through the origin), ``Γ = ψᵀ M r`` with ``r`` the rigid-body motions. A
      free-free elastic mode has none (it is mass-orthogonal to every rigid motion).
    """

    method: str
    n_dof: int
    held: int
    total_mass: float
    kinds: tuple[str, ...]
    frequencies_hz: tuple[float, ...]
    effective_mass: tuple[tuple[float, ...], ...] | None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), allow_nan=True)

    def __str__(self) -> str:
        lines = [
            f"{self.method}: {len(self.kinds)} shapes from {self.n_dof} DOFs "
            f"({self.held} held), total mass {self.total_mass:.6g} kg",
        ]
        header = f"{'#':>4} {'kind':<16} {'f (Hz)':>12}"
        if self.effective_mass is not None:
            header += "".join(f" {'m_eff ' + a:>12}" for a in ("x", "y", "z", "rx", "ry", "rz"))
        lines.append(header)
        for k, (kind, f) in enumerate(zip(self.kinds, self.frequencies_hz, strict=True)):
            row = f"{k:>4} {kind:<16} {f:>12.6g}"
            if self.effective_mass is not None:
                row += "".join(f" {x:>12.4g}" for x in self.effective_mass[k])
            lines.append(row)
        if self.effective_mass is not None:
            total = np.sum(self.effective_mass, axis=0)[:3] / self.total_mass
            lines.append(
                "effective-mass fraction (x, y, z): " + ", ".join(f"{100 * x:.1f}%" for x in total)
            )
        return "\n".join(lines)


def reduction_report(fe: FEModel, basis: ModalBasis) -> ReductionReport:
    """The :class:`ReductionReport` of ``basis`` (concrete arrays only)."""
    if not _concrete(fe, basis):
        raise FlexDataError("reduction_report: needs concrete arrays (call outside jit/grad)")
    m = np.asarray(fe.mass)
    rigid = np.asarray(rigid_body_modes(fe))
    total = float(np.trace(rigid[:, :3].T @ m @ rigid[:, :3]) / 3)
    shapes = np.asarray(basis.shapes)
    eff = None
    if basis.held and basis.orthonormal:
        gamma = shapes.T @ m @ rigid
        eff = gamma**2 / np.diagonal(np.asarray(basis.mass))[:, None]
        eff = tuple(tuple(float(x) for x in row) for row in eff)
    return ReductionReport(
        method=basis.method,
        n_dof=fe.n_dof,
        held=len(basis.held),
        total_mass=total,
        kinds=basis.kinds,
        frequencies_hz=tuple(float(f) for f in np.asarray(basis.frequencies_hz())),
        effective_mass=eff,
    )
