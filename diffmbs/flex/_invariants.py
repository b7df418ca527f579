"""Inertia invariants of the floating frame of reference (FFR), from the FE mass matrix.

A flexible body's material points sit at ``x̄ = x̄₀ + Ψ q_f`` in the body frame (position
``R``, rotation ``A``). In FE form, with the body-frame nodal velocity vector ``V̄`` (translations
and rotation rates of every node, shape ``(n_dof,)``) the kinetic energy is ``T = ½ V̄ᵀ M V̄``
and, for the generalized velocities ``(ν = Aᵀ Ṙ, ω̄, q̇_f)``::

    V̄ = Tr ν + (Rθ + Σ_k q_k S_k) ω̄ + Ψ q̇_f

- ``Tr`` ``(n_dof, 3)``: unit rigid translations;
- ``Rθ`` ``(n_dof, 3)``: unit rigid rotations about the frame origin (node ``p`` moves by
  ``ω̄ × x̄₀ₚ``, its rotation DOFs turn at ``ω̄``);
- ``S_k`` ``(n_dof, 3)``: the rigid rotation of mode ``k``: ``ω̄ ×`` every nodal translation and
  rotation vector of ``ψ_k`` (``S_k ω̄`` has nodal entries ``ω̄ × ψ_k,p``).

Every invariant is one of the products below (``M`` the FE mass matrix, ``Ψ`` the shapes
``(n_dof, m)``), the discrete form of the integral given with it:

===================== ============ =============================== ==========================
field                 shape        FE product                      integral (Shabana)
===================== ============ =============================== ==========================
``mass``              ()           ``tr(Trᵀ M Tr)/3``              ``m = ∫ρ dV``
``first_moment``      (3,)         ``vee(−Trᵀ M Rθ)``              ``S̄₀ = ∫ρ x̄₀ dV = m r̄_G``
``inertia``           (3, 3)       ``Rθᵀ M Rθ``                    ``J₀ = ∫ρ [x̄₀]ᵀ[x̄₀] dV``
``psi_integral``      (3, m)       ``Trᵀ M Ψ``                     ``i1 = S̄ = ∫ρ Ψ dV``
``rotation_coupling`` (3, m)       ``Rθᵀ M Ψ``                     ``Ī_θf = ∫ρ [x̄₀] Ψ dV``
``inertia_linear``    (m, 3, 3)    ``Rθᵀ M S_k``                   ``∫ρ [x̄₀]ᵀ[ψ_k] dV``
``inertia_quadratic`` (m, m, 3, 3) ``S_kᵀ M S_l``                  ``∫ρ [ψ_k]ᵀ[ψ_l] dV``
``coupling_linear``   (m, 3, m)    ``S_kᵀ M Ψ``                    ``∫ρ [ψ_k] Ψ dV``
``modal_mass``        (m, m)       ``Ψᵀ M Ψ``                      ``∫ρ Ψᵀ Ψ dV``
===================== ============ =============================== ==========================

(``[a]`` is the cross-product matrix ``[a]×``; "+ rotary inertia" is implied wherever the
element has rotation DOFs: the FE products contain it.) The seed's ``i2 = ∫ r̄ ⊗ Ψ dm`` is
contained in ``rotation_coupling`` and ``inertia_linear``, ``i3 = ∫ Ψᵀ ⊗ Ψ dm`` in
``inertia_quadratic``, ``coupling_linear`` and ``modal_mass``.

With them the deformed body has first moment ``S̄(q) = S̄₀ + i1 q``, inertia about the frame
origin ``J(q) = J₀ + Σ_k q_k (J1_k + J1_kᵀ) + Σ_kl q_k q_l J2_kl`` and rotation–deformation
coupling ``G(q) = Ī_θf + Σ_k q_k G1_k``; :mod:`diffmbs.flex._ffr` builds the mass matrix and the
quadratic velocity forces from these arrays only.

Exactness: ``mass``, ``first_moment``, ``inertia``, ``psi_integral``, ``rotation_coupling`` and
``modal_mass`` are the exact integrals of the FE displacement field (the beam elements
reproduce rigid motion exactly). The terms in ``q_f`` (``inertia_linear``,
``inertia_quadratic``, ``coupling_linear``) use the FE interpolation of the rotated nodal
vectors ``ω̄ × ψ_k``: exact for solid elements with a mass matrix ``M̄ ⊗ I₃`` (as in Exudyn's
``ObjectFFRFreducedOrder``), and for beams an approximation that converges with the mesh. The
translation–rotation block is not taken from ``Trᵀ M S_k`` but written as ``−[S̄(q)]×``, which
keeps the equations Galilean invariant for any mass matrix.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from diffmbs.flex._fe import FEModel, rigid_body_modes
from diffmbs.rotations import skew

__all__ = ["FFRInvariants", "ffr_invariants"]


class FFRInvariants(eqx.Module):
    """The constant inertia arrays of an FFR body (SI; see the module table for shapes).

    ``m`` = number of modes, which may be 0 (a rigid body)."""

    mass: Array
    first_moment: Array
    inertia: Array
    psi_integral: Array
    rotation_coupling: Array
    inertia_linear: Array
    inertia_quadratic: Array
    coupling_linear: Array
    modal_mass: Array

    @property
    def n_modes(self) -> int:
        return self.psi_integral.shape[1]

    @classmethod
    def rigid(cls, mass, first_moment, inertia) -> FFRInvariants:
        """A body without modes: ``mass`` (kg), ``first_moment`` m·r̄_G (kg·m, (3,)),
        ``inertia`` about the frame origin (kg·m², (3, 3))."""
        dt = jnp.result_type(float)
        z = lambda *shape: jnp.zeros(shape, dt)
        return cls(
            jnp.asarray(mass, dt),
            jnp.asarray(first_moment, dt),
            jnp.asarray(inertia, dt),
            z(3, 0),
            z(3, 0),
            z(0, 3, 3),
            z(0, 0, 3, 3),
            z(0, 3, 0),
            z(0, 0),
        )

    def first_moment_at(self, q_f: Array) -> Array:
        """``S̄(q) = S̄₀ + i1 q`` (kg·m), shape (3,)."""
        return self.first_moment + self.psi_integral @ q_f

    def inertia_at(self, q_f: Array) -> Array:
        """``J(q)`` about the frame origin, body axes (kg·m²), shape (3, 3)."""
        lin = jnp.einsum("k,kab->ab", q_f, self.inertia_linear)
        quad = jnp.einsum("k,l,klab->ab", q_f, q_f, self.inertia_quadratic)
        return self.inertia + lin + lin.T + quad

    def coupling_at(self, q_f: Array) -> Array:
        """``G(q) = Ī_θf + Σ q_k G1_k`` (angular momentum per unit q̇_f), shape (3, m)."""
        return self.rotation_coupling + jnp.einsum("k,kal->al", q_f, self.coupling_linear)


def _vee(w: Array) -> Array:
    """Axial vector of the skew part of a 3×3 matrix."""
    s = 0.5 * (w - w.T)
    return jnp.stack([s[2, 1], s[0, 2], s[1, 0]])


@eqx.filter_jit
def ffr_invariants(fe: FEModel, shapes: Array) -> FFRInvariants:
    """The :class:`FFRInvariants` of the shapes ``Ψ`` ``(n_dof, m)`` on the FE model ``fe``
    (body frame = the model's axes and origin). Pure JAX: differentiable in ``fe`` and
    ``shapes``."""
    m_fe = fe.mass
    rigid = rigid_body_modes(fe)
    tr, rth = rigid[:, :3], rigid[:, 3:]
    comp = np.asarray(fe.dof_components)
    trans, rot = fe.node_vectors(shapes)  # (n_nodes, 3, m) each
    nodal = jnp.where(
        jnp.asarray(comp < 3)[:, None, None],
        trans[np.asarray(fe.dof_nodes)],
        rot[np.asarray(fe.dof_nodes)],
    )  # (n_dof, 3, m): the nodal vector each DOF is a component of
    cross = -skew(jnp.moveaxis(nodal, 2, 0))  # (m, n_dof, 3, 3)
    s = cross[:, np.arange(fe.n_dof), comp % 3, :]  # (m, n_dof, 3)
    m_s = jnp.einsum("ij,kjb->kib", m_fe, s)
    m_psi = m_fe @ shapes
    m_rth = m_fe @ rth
    inertia = rth.T @ m_rth
    modal = shapes.T @ m_psi
    return FFRInvariants(
        mass=jnp.trace(tr.T @ m_fe @ tr) / 3,
        first_moment=_vee(-(tr.T @ m_rth)),
        inertia=0.5 * (inertia + inertia.T),
        psi_integral=tr.T @ m_psi,
        rotation_coupling=rth.T @ m_psi,
        inertia_linear=jnp.einsum("ia,kib->kab", rth, m_s),
        inertia_quadratic=jnp.einsum("kia,lib->klab", s, m_s),
        coupling_linear=jnp.einsum("kia,il->kal", s, m_psi),
        modal_mass=0.5 * (modal + modal.T),
    )
