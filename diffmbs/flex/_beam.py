"""Three-dimensional two-node beam elements (12 DOF), Euler–Bernoulli or Timoshenko.

Each node has ``(ux, uy, uz, rx, ry, rz)`` along the global axes. In the element frame (local
``x`` from node 1 to node 2, local ``z`` the part of the element's ``orientation`` vector normal
to ``x``, ``y = z × x``) the displacement field is

- axial ``u`` and twist ``θx``: linear;
- bending in the x–y plane (``v``, rotation ``θz``) and in the x–z plane (``w``, rotation
  ``θy = −ψ``): the interdependent interpolation of Friedman & Kosmatka (1993), Hermite cubics
  corrected by the shear parameter ``Φ = 12 E I / (G A_s L²)``, which are the exact static
  solutions of the Timoshenko beam; ``Φ = 0`` gives the Euler–Bernoulli (Hermite) element.

Stiffness and consistent mass are the energy integrals of these fields, evaluated by 4-point
Gauss quadrature (exact for the degree-6 integrands)::

    U = ½ ∫ [EA u'² + G It θx'² + E Iz θz'² + E Iy θy'² + G A_sy (v' − θz)² + G A_sz (w' + θy)²] dx
    T = ½ ∫ ρ [A (u̇² + v̇² + ẇ²) + (Iy + Iz) θ̇x² + Iz θ̇z² + Iy θ̇y²] dx

The shear terms are zero for Euler–Bernoulli, and the bending rotary inertia terms (the last
two) can be switched off to compare with classical closed forms. The element is nodally exact
in statics for end loads (both theories) and reproduces rigid-body motion exactly, so the FFR
invariants of :mod:`diffmbs.flex._invariants` are exact for undeformed bodies.

Assumptions: the beam axis is the centroidal axis (the shear-centre offset of a channel and
warping torsion are neglected), straight prismatic elements, small strains.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from diffmbs.flex._fe import FEModel, FlexDataError
from diffmbs.flex._sections import AbstractSection, Material, SectionProperties

__all__ = [
    "AbstractBeamTheory",
    "BeamModel",
    "EulerBernoulli",
    "Timoshenko",
    "beam_line",
]

_GAUSS_X, _GAUSS_W = np.polynomial.legendre.leggauss(4)
_GAUSS_X, _GAUSS_W = (_GAUSS_X + 1) / 2, _GAUSS_W / 2  # on [0, 1]


def _placement(slots, signs) -> np.ndarray:
    """Constant matrix that puts element-wise values at local DOF ``slots`` with ``signs``."""
    p = np.zeros((len(slots), 12))
    p[np.arange(len(slots)), slots] = signs
    return p


# Bending planes, DOFs (w1, ψ1, w2, ψ2): (v, θz, …) with θz = ψ, and (w, −θy, …) with θy = −ψ.
_PLANE_XY = _placement([1, 5, 7, 11], [1.0, 1.0, 1.0, 1.0])
_PLANE_XZ = _placement([2, 4, 8, 10], [1.0, -1.0, 1.0, -1.0])
_AXIAL = _placement([0, 6], [1.0, 1.0])
_TWIST = _placement([3, 9], [1.0, 1.0])


class AbstractBeamTheory(eqx.Module):
    """How shear deformation enters the element (strategy). ``rotary_inertia`` (static): keep
    the ``ρ I θ̇²`` bending terms of the kinetic energy (torsional inertia is always kept)."""

    rotary_inertia: eqx.AbstractVar[bool]

    @abc.abstractmethod
    def shear_parameters(
        self, material: Material, props: SectionProperties, length: Array
    ) -> tuple[Array, Array]:
        """``(Φ_y, Φ_z)``: shear parameters of bending in the x–y and the x–z plane."""

    @property
    @abc.abstractmethod
    def shear_energy(self) -> bool:
        """Whether the element stores shear strain energy."""


class EulerBernoulli(AbstractBeamTheory):
    """Plane sections stay normal to the axis: no shear deformation (``Φ = 0``)."""

    rotary_inertia: bool = eqx.field(static=True, default=True)

    def shear_parameters(self, material, props, length):
        zero = jnp.zeros_like(length)
        return zero, zero

    @property
    def shear_energy(self) -> bool:
        return False


class Timoshenko(AbstractBeamTheory):
    """First-order shear deformation with the section's shear areas:
    ``Φ_y = 12 E Iz / (G A_sy L²)``, ``Φ_z = 12 E Iy / (G A_sz L²)``."""

    rotary_inertia: bool = eqx.field(static=True, default=True)

    def shear_parameters(self, material, props, length):
        c = 12 * material.E / (material.G * length**2)
        return c * props.iz / props.shear_area_y, c * props.iy / props.shear_area_z

    @property
    def shear_energy(self) -> bool:
        return True


def _bending_functions(xi: Array, length: Array, phi: Array) -> tuple[Array, ...]:
    """Interdependent interpolation at ``ξ = x/L`` for DOFs ``(w1, ψ1, w2, ψ2)``:
    ``(N_w, N_w', N_ψ, N_ψ')`` each shape ``(4,)`` (derivatives with respect to x)."""
    c = 1 / (1 + phi)
    x2, x3 = xi**2, xi**3
    n_w = c * jnp.stack(
        [
            2 * x3 - 3 * x2 - phi * xi + 1 + phi,
            length * (x3 - (2 + phi / 2) * x2 + (1 + phi / 2) * xi),
            -(2 * x3 - 3 * x2 - phi * xi),
            length * (x3 - (1 - phi / 2) * x2 - phi / 2 * xi),
        ]
    )
    dn_w = (
        c
        / length
        * jnp.stack(
            [
                6 * x2 - 6 * xi - phi,
                length * (3 * x2 - (4 + phi) * xi + 1 + phi / 2),
                -(6 * x2 - 6 * xi - phi),
                length * (3 * x2 - (2 - phi) * xi - phi / 2),
            ]
        )
    )
    n_psi = c * jnp.stack(
        [
            6 * (x2 - xi) / length,
            3 * x2 - (4 + phi) * xi + 1 + phi,
            -6 * (x2 - xi) / length,
            3 * x2 - (2 - phi) * xi,
        ]
    )
    dn_psi = (
        c
        / length
        * jnp.stack(
            [
                6 * (2 * xi - 1) / length,
                6 * xi - 4 - phi,
                -6 * (2 * xi - 1) / length,
                6 * xi - 2 + phi,
            ]
        )
    )
    return n_w, dn_w, n_psi, dn_psi


def _local_rows(xi: Array, length: Array, phi_y: Array, phi_z: Array) -> dict[str, Array]:
    """All interpolation rows of the element at ``ξ``, each shape (12,): displacements ``u v
    w``, rotations ``tx ty tz`` and their x-derivatives (``du`` …)."""
    lin = jnp.stack([1 - xi, xi])
    dlin = jnp.stack([-1 / length, 1 / length])
    v, dv, tz, dtz = (f @ _PLANE_XY for f in _bending_functions(xi, length, phi_y))
    w, dw, psi, dpsi = (f @ _PLANE_XZ for f in _bending_functions(xi, length, phi_z))
    return {
        "u": lin @ _AXIAL,
        "du": dlin @ _AXIAL,
        "tx": lin @ _TWIST,
        "dtx": dlin @ _TWIST,
        "v": v,
        "dv": dv,
        "tz": tz,
        "dtz": dtz,
        "w": w,
        "dw": dw,
        "ty": -psi,
        "dty": -dpsi,
    }


def _element_frame(xa: Array, xb: Array, up: Array) -> tuple[Array, Array]:
    """Length and rotation ``R`` (rows: local x, y, z in global components)."""
    d = xb - xa
    length = jnp.linalg.norm(d)
    ex = d / length
    ez = up - jnp.dot(up, ex) * ex
    ez = ez / jnp.linalg.norm(ez)
    ey = jnp.cross(ez, ex)
    return length, jnp.stack([ex, ey, ez])


def _element_matrices(
    xa: Array,
    xb: Array,
    up: Array,
    material: Material,
    props: SectionProperties,
    theory: AbstractBeamTheory,
) -> tuple[Array, Array, Array]:
    """Global stiffness and mass (12, 12) of one element, and its transformation T (12, 12)."""
    length, rot = _element_frame(xa, xb, up)
    phi_y, phi_z = theory.shear_parameters(material, props, length)
    e, g, rho = material.E, material.G, material.rho

    shear = 1.0 if theory.shear_energy else 0.0
    rotary = 1.0 if theory.rotary_inertia else 0.0
    k_weights = jnp.stack(
        [
            e * props.area,
            g * props.torsion,
            e * props.iz,
            e * props.iy,
            shear * g * props.shear_area_y,
            shear * g * props.shear_area_z,
        ]
    )
    m_weights = rho * jnp.stack(
        [props.area, props.area, props.area, props.polar, rotary * props.iz, rotary * props.iy]
    )

    def integrands(xi):
        r = _local_rows(xi, length, phi_y, phi_z)
        b_k = jnp.stack(
            [r["du"], r["dtx"], r["dtz"], r["dty"], r["dv"] - r["tz"], r["dw"] + r["ty"]]
        )
        b_m = jnp.stack([r["u"], r["v"], r["w"], r["tx"], r["tz"], r["ty"]])
        return b_k.T @ (k_weights[:, None] * b_k), b_m.T @ (m_weights[:, None] * b_m)

    k_all, m_all = jax.vmap(integrands)(jnp.asarray(_GAUSS_X))
    w = jnp.asarray(_GAUSS_W) * length
    k_loc = jnp.einsum("q,qij->ij", w, k_all)
    m_loc = jnp.einsum("q,qij->ij", w, m_all)
    t = jnp.kron(jnp.eye(4, dtype=rot.dtype), rot)
    return t.T @ k_loc @ t, t.T @ m_loc @ t, t


def beam_line(start: ArrayLike, end: ArrayLike, n_elements: int) -> tuple[Array, np.ndarray]:
    """Nodes ``(n_elements + 1, 3)`` (m) evenly spaced from ``start`` to ``end`` and the element
    connectivity ``(n_elements, 2)`` (node rows)."""
    s = jnp.linspace(0.0, 1.0, n_elements + 1)[:, None]
    start, end = jnp.asarray(start, float), jnp.asarray(end, float)
    nodes = start + s * (end - start)
    elements = np.stack([np.arange(n_elements), np.arange(1, n_elements + 1)], axis=1)
    return nodes, elements


def _default_orientation(nodes: Array, elements: np.ndarray) -> Array:
    """Global Z, or global X for elements within 25° of Z."""
    d = nodes[elements[:, 1]] - nodes[elements[:, 0]]
    vertical = jnp.abs(d[:, 2]) > np.cos(np.radians(25.0)) * jnp.linalg.norm(d, axis=1)
    return jnp.where(vertical[:, None], jnp.array([1.0, 0.0, 0.0]), jnp.array([0.0, 0.0, 1.0]))


@eqx.filter_jit
def _all_element_matrices(beam: BeamModel) -> tuple[Array, Array, Array]:
    xa, xb, up, mat, props = beam.element_data()
    return jax.vmap(lambda *a: _element_matrices(*a, beam.theory))(xa, xb, up, mat, props)


class BeamModel(eqx.Module):
    """A frame of straight beam elements; ``assemble()`` gives its :class:`FEModel`.

    Fields (SI):

    - ``nodes`` ``(n_nodes, 3)`` m, in the body frame of the future flexible body;
    - ``elements`` (static) ``((a, b), …)`` node rows of each element;
    - ``sections`` and ``materials``: tuples; element ``e`` uses
      ``sections[element_section[e]]`` and ``materials[element_material[e]]`` (static index
      tuples, default all 0);
    - ``orientation`` ``(n_elements, 3)``: a vector in each element's local x–z plane (it
      fixes local z, the direction of the section height). Default: global Z, or global X for
      elements within 25° of Z;
    - ``theory``: :class:`EulerBernoulli` or :class:`Timoshenko` (default).

    Construct with ``BeamModel(nodes, elements, section, material, ...)``; a single section or
    material is wrapped in a tuple.
    """

    nodes: Array
    sections: tuple[AbstractSection, ...]
    materials: tuple[Material, ...]
    orientation: Array
    theory: AbstractBeamTheory
    elements: tuple[tuple[int, int], ...] = eqx.field(static=True)
    element_section: tuple[int, ...] = eqx.field(static=True)
    element_material: tuple[int, ...] = eqx.field(static=True)

    def __init__(
        self,
        nodes: ArrayLike,
        elements: ArrayLike,
        section: AbstractSection | Sequence[AbstractSection],
        material: Material | Sequence[Material],
        *,
        theory: AbstractBeamTheory | None = None,
        orientation: ArrayLike | None = None,
        element_section: Sequence[int] | None = None,
        element_material: Sequence[int] | None = None,
    ):
        conn = np.asarray(elements, dtype=int).reshape(-1, 2)
        n_el = conn.shape[0]
        nodes = jnp.asarray(nodes, dtype=float)
        if nodes.ndim != 2 or nodes.shape[1] != 3:
            raise FlexDataError(f"nodes: expected shape (n_nodes, 3), got {nodes.shape}")
        if n_el == 0 or conn.min() < 0 or conn.max() >= nodes.shape[0]:
            raise FlexDataError(f"elements: node rows must lie in 0…{nodes.shape[0] - 1}")
        self.nodes = nodes
        self.elements = tuple((int(a), int(b)) for a, b in conn)
        self.sections = tuple(section) if isinstance(section, Sequence) else (section,)
        self.materials = tuple(material) if isinstance(material, Sequence) else (material,)
        self.theory = Timoshenko() if theory is None else theory
        if orientation is None:
            orientation = _default_orientation(nodes, conn)
        self.orientation = jnp.broadcast_to(jnp.asarray(orientation, float), (n_el, 3))
        self.element_section = tuple(element_section or (0,) * n_el)
        self.element_material = tuple(element_material or (0,) * n_el)
        for name, index, pool in (
            ("element_section", self.element_section, self.sections),
            ("element_material", self.element_material, self.materials),
        ):
            if len(index) != n_el or min(index) < 0 or max(index) >= len(pool):
                raise FlexDataError(f"{name}: need {n_el} indices into a pool of {len(pool)}")

    @property
    def n_nodes(self) -> int:
        return self.nodes.shape[0]

    def element_data(self) -> tuple[Array, Array, Array, Material, SectionProperties]:
        """Per-element arrays, stacked over elements: end coordinates ``xa``, ``xb``
        ``(n_el, 3)``, ``orientation`` ``(n_el, 3)``, and the material and section properties
        with leaves of shape ``(n_el,)``."""
        conn = np.asarray(self.elements)
        props = [s.properties() for s in self.sections]
        stack = lambda items, index: jax.tree.map(
            lambda *leaves: jnp.stack([jnp.asarray(x, float) for x in leaves])[np.asarray(index)],
            *items,
        )
        return (
            self.nodes[conn[:, 0]],
            self.nodes[conn[:, 1]],
            self.orientation,
            stack(self.materials, self.element_material),
            stack(props, self.element_section),
        )

    def element_matrices(self) -> tuple[Array, Array, Array]:
        """Global-axis stiffness and mass ``(n_el, 12, 12)`` and transformations
        ``(n_el, 12, 12)`` (local DOFs = T · global DOFs) of every element (compiled)."""
        return _all_element_matrices(self)

    def element_dofs(self) -> np.ndarray:
        """Global DOF indices of each element, ``(n_el, 12)``."""
        conn = np.asarray(self.elements)
        six = np.arange(6)
        return np.concatenate([6 * conn[:, :1] + six, 6 * conn[:, 1:] + six], axis=1)

    def assemble(self) -> FEModel:
        """The :class:`FEModel` (6 DOFs per node, node ``p`` owns DOFs ``6p … 6p + 5``)."""
        mass, stiffness = _assemble(self)
        return FEModel(
            mass=mass,
            stiffness=stiffness,
            nodes=self.nodes,
            dof_nodes=tuple(int(p) for p in np.repeat(np.arange(self.n_nodes), 6)),
            dof_components=tuple(int(c) for c in np.tile(np.arange(6), self.n_nodes)),
            node_ids=tuple(range(self.n_nodes)),
        )


@eqx.filter_jit
def _assemble(beam: BeamModel) -> tuple[Array, Array]:
    k_el, m_el, _ = _all_element_matrices(beam)
    n = 6 * beam.n_nodes
    dofs = beam.element_dofs()
    rows = np.repeat(dofs[:, :, None], 12, axis=2)
    cols = np.repeat(dofs[:, None, :], 12, axis=1)
    k = jnp.zeros((n, n), k_el.dtype).at[rows, cols].add(k_el)
    m = jnp.zeros((n, n), m_el.dtype).at[rows, cols].add(m_el)
    return 0.5 * (m + m.T), 0.5 * (k + k.T)
