"""A linear finite-element model: dense mass and stiffness matrices with a DOF map.

Every source of modal data — the beam elements of :mod:`diffmbs.flex._beam` and matrices
imported from other codes — ends as an :class:`FEModel`; the reductions and the FFR invariants
only see this. DOFs are numbered ``0 … n_dof − 1``; DOF ``d`` is component
``dof_components[d]`` (0–2: translations ``ux, uy, uz`` in m, 3–5: small rotations
``rx, ry, rz`` in rad, all along the model's axes) of node ``dof_nodes[d]`` (a row of
``nodes``). The matrices are in SI units (kg, kg·m, kg·m²; N/m, N, N·m/rad).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from diffmbs.rotations import skew

__all__ = ["COMPONENTS", "FEModel", "FlexDataError", "rigid_body_modes"]

COMPONENTS = ("ux", "uy", "uz", "rx", "ry", "rz")
"""Names of the six nodal components, in DOF-component order."""

_GROUPS = {"all": (0, 1, 2, 3, 4, 5), "translations": (0, 1, 2), "rotations": (3, 4, 5)}


class FlexDataError(ValueError):
    """Invalid finite-element or modal data; the message starts with the item at fault."""


class FEModel(eqx.Module):
    """Mass ``M`` and stiffness ``K`` (each ``(n_dof, n_dof)``, SI) of a free structure.

    - ``nodes`` (n_nodes, 3) m: coordinates in the body frame of the future flexible body;
    - ``dof_nodes``, ``dof_components`` (static tuples of length n_dof): the DOF map;
    - ``node_ids`` (static tuple, n_nodes): the node labels of the source model.

    Supports and interfaces are not part of the model: a reduction says which DOFs it holds.
    """

    mass: Array
    stiffness: Array
    nodes: Array
    dof_nodes: tuple[int, ...] = eqx.field(static=True)
    dof_components: tuple[int, ...] = eqx.field(static=True)
    node_ids: tuple[int, ...] = eqx.field(static=True)

    @property
    def n_dof(self) -> int:
        return len(self.dof_nodes)

    @property
    def n_nodes(self) -> int:
        return len(self.node_ids)

    def node_index(self, node_id: int) -> int:
        """Row of ``nodes`` that holds the node labelled ``node_id`` in the source model."""
        try:
            return self.node_ids.index(int(node_id))
        except ValueError:
            raise FlexDataError(f"node {node_id}: no such node label in the model") from None

    def dofs(
        self, nodes: int | Iterable[int], components: str | Sequence[int | str] = "all"
    ) -> tuple[int, ...]:
        """Global DOF indices of ``components`` at the node rows ``nodes``, sorted.

        ``components``: ``"all"``, ``"translations"``, ``"rotations"`` or a sequence of
        indices 0–5 / names from :data:`COMPONENTS`. Components the model lacks at a node are
        skipped (a solid node has no rotations)."""
        rows = {int(nodes)} if np.isscalar(nodes) else {int(n) for n in nodes}
        bad = [n for n in rows if not 0 <= n < self.n_nodes]
        if bad:
            raise FlexDataError(f"nodes: rows {bad} out of range 0…{self.n_nodes - 1}")
        if isinstance(components, str):
            if components not in _GROUPS:
                raise FlexDataError(f"components: unknown group {components!r}")
            comps = set(_GROUPS[components])
        else:
            comps = {COMPONENTS.index(c) if isinstance(c, str) else int(c) for c in components}
        return tuple(
            d
            for d, (n, c) in enumerate(zip(self.dof_nodes, self.dof_components, strict=True))
            if n in rows and c in comps
        )

    def dof_mask(self) -> np.ndarray:
        """``(n_nodes, 6)`` bool: which components each node has."""
        mask = np.zeros((self.n_nodes, 6), dtype=bool)
        mask[np.asarray(self.dof_nodes, int), np.asarray(self.dof_components, int)] = True
        return mask

    def node_vectors(self, shapes: Array) -> tuple[Array, Array]:
        """DOF-ordered shapes ``(n_dof, m)`` → nodal translations and rotations, each
        ``(n_nodes, 3, m)`` (zero where the model has no such component)."""
        six = jnp.zeros((self.n_nodes, 6, shapes.shape[1]), shapes.dtype)
        six = six.at[np.asarray(self.dof_nodes), np.asarray(self.dof_components)].set(shapes)
        return six[:, :3], six[:, 3:]


def rigid_body_modes(fe: FEModel) -> Array:
    """The six rigid-body motions about the body-frame origin, shape ``(n_dof, 6)``.

    Columns 0–2: unit translations along x, y, z (m); columns 3–5: unit small rotations about
    x, y, z (rad), which move node ``p`` by ``θ × x_p`` and turn its rotation DOFs by ``θ``.
    """
    comp = np.asarray(fe.dof_components)
    c3 = comp % 3
    is_t = jnp.asarray(comp < 3)[:, None]
    eye = jnp.eye(3, dtype=fe.nodes.dtype)[c3]
    rot_t = -skew(fe.nodes[np.asarray(fe.dof_nodes)])[np.arange(fe.n_dof), c3]
    trans = jnp.where(is_t, eye, 0.0)
    rot = jnp.where(is_t, rot_t, eye)
    return jnp.concatenate([trans, rot], axis=1)
