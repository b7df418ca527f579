"""Stress recovery: modal stresses of beam elements, ``σ(t) = Σ_k S_k q_f,k(t)``.

The normal stress at section point ``(y, z)`` (local axes, m from the centroid) of element
``e`` at station ``ξ = x/L`` is Hooke's law on the axial strain of the element's displacement
field::

    σ_x = E (u' − y θz' + z θy')

(``u'`` axial strain, ``θz' = κz`` and ``θy' = κy`` the curvatures from the element's rotation
interpolation: ``v''`` and ``−w''`` for Euler–Bernoulli). For end loads this is exact: the
element's curvature is linear, as is the bending moment. Shear stresses are not recovered.

:func:`beam_stress_matrix` gives the rows ``B`` ``(s, n_dof)`` with ``σ = B u``;
:func:`beam_stress_modes` gives ``S = B Ψ`` ``(s, m)`` (Pa per unit modal amplitude) to store in
:class:`~diffmbs.flex.ModalData`, and :func:`stress_history` evaluates ``σ(t)`` from the
modal amplitudes of a simulation. All differentiable (section dimensions, E, the modes).
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from diffmbs.flex._beam import BeamModel, _element_frame, _local_rows
from diffmbs.flex._fe import FlexDataError
from diffmbs.flex._reduction import ModalBasis

__all__ = [
    "BeamStressPoint",
    "beam_stress_matrix",
    "beam_stress_modes",
    "section_stress_points",
    "stress_history",
]


class BeamStressPoint(eqx.Module):
    """A point where the normal stress is recovered: element ``element`` (static), station
    ``xi`` ∈ [0, 1] (static; 0 at the element's first node), section coordinates ``y``, ``z``
    (m, local axes from the centroid), and a ``label`` (static)."""

    y: Array = eqx.field(converter=lambda x: jnp.asarray(x, jnp.result_type(float)))
    z: Array = eqx.field(converter=lambda x: jnp.asarray(x, jnp.result_type(float)))
    element: int = eqx.field(static=True, default=0)
    xi: float = eqx.field(static=True, default=0.0)
    label: str = eqx.field(static=True, default="")


def section_stress_points(
    beam: BeamModel, element: int, xi: float, label: str = ""
) -> list[BeamStressPoint]:
    """The outline points (extreme fibres) of the element's section at station ``xi``."""
    section = beam.sections[beam.element_section[element]]
    out = section.outline()
    name = label or f"e{element}@{xi:g}"
    return [
        BeamStressPoint(out[j, 0], out[j, 1], element, xi, f"{name}#{j}")
        for j in range(out.shape[0])
    ]


def beam_stress_matrix(beam: BeamModel, points: Sequence[BeamStressPoint]) -> Array:
    """Rows ``B`` ``(s, n_dof)`` with ``σ_x = B u`` (Pa per m or rad of the global DOFs)."""
    return _stress_matrix(beam, tuple(points))


@eqx.filter_jit
def _stress_matrix(beam: BeamModel, points: tuple[BeamStressPoint, ...]) -> Array:
    if not points:
        raise FlexDataError("points: need at least one stress point")
    n_el = len(beam.elements)
    for p in points:
        if not (0 <= p.element < n_el and 0.0 <= p.xi <= 1.0):
            raise FlexDataError(
                f"stress point {p.label or p.element}: element must lie in 0…{n_el - 1} "
                f"and xi in [0, 1]"
            )
    xa, xb, up, mat, props = beam.element_data()
    idx = np.array([p.element for p in points])
    pick = lambda tree: jax.tree.map(lambda leaf: leaf[idx], tree)
    xa, xb, up, mat, props = xa[idx], xb[idx], up[idx], pick(mat), pick(props)
    xi = jnp.asarray([p.xi for p in points], dtype=xa.dtype)
    y = jnp.stack([p.y for p in points])
    z = jnp.stack([p.z for p in points])

    def row(xa, xb, up, mat, props, xi, y, z):
        length, rot = _element_frame(xa, xb, up)
        phi_y, phi_z = beam.theory.shear_parameters(mat, props, length)
        r = _local_rows(xi, length, phi_y, phi_z)
        local = mat.E * (r["du"] - y * r["dtz"] + z * r["dty"])
        return local @ jnp.kron(jnp.eye(4, dtype=rot.dtype), rot)

    rows = jax.vmap(row)(xa, xb, up, mat, props, xi, y, z)  # (s, 12)
    dofs = beam.element_dofs()[idx]
    out = jnp.zeros((len(points), 6 * beam.n_nodes), rows.dtype)
    return out.at[np.arange(len(points))[:, None], dofs].add(rows)


def beam_stress_modes(
    beam: BeamModel, basis: ModalBasis, points: Sequence[BeamStressPoint]
) -> Array:
    """Modal stresses ``S = B Ψ`` ``(s, m)`` (Pa per unit modal amplitude)."""
    return beam_stress_matrix(beam, points) @ basis.shapes


def stress_history(stress_modes: Array, q_f: Array) -> Array:
    """``σ(t) = S q_f(t)``: ``stress_modes`` ``(s, m)``, ``q_f`` ``(n_t, m)`` → ``(n_t, s)``
    (Pa)."""
    return q_f @ stress_modes.T
