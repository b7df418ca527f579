"""Names of the inputs and outputs of the functions :func:`diffmbs.check_derivatives` checks:
``q[3]``, ``v[1]``, parameter paths (``spring.stiffness``, ``bob.inertia[1,1]`` for a
``MultibodyModel``, its ``with_parameter`` names; ``k``, ``legs[0]`` for other systems), ``Q[2]``,
``Φ[0] (joint 'B')``. Uses only the models' public attributes (duck-typed: no import of
:mod:`diffmbs.multibody`, which would load it with ``import diffmbs``)."""

from __future__ import annotations

import sys

import jax
import numpy as np
from jax.tree_util import GetAttrKey, SequenceKey, keystr

__all__ = [
    "element_parameter_names",
    "is_multibody",
    "output_names",
    "parameter_names",
    "row_name",
    "state_names",
]

_AXES = "xyz"
_QUATERNION = "wxyz"


def is_multibody(system) -> bool:
    """Whether ``system`` is a ``MultibodyModel`` (it cannot be one before that is imported)."""
    module = sys.modules.get("diffmbs.multibody._model")
    return module is not None and isinstance(system, module.MultibodyModel)


def _index(idx: tuple[int, ...]) -> str:
    return f"[{','.join(map(str, idx))}]" if idx else ""


def _path(keys) -> str:
    return keystr(tuple(keys)).lstrip(".")


def _leaf_names(tree, name_of) -> tuple[str, ...]:
    out = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        for idx in np.ndindex(np.shape(leaf)):
            out.append(name_of(path, idx))
    return tuple(out)


def parameter_names(system, leaves) -> tuple[str, ...]:
    """One name per entry of the raveled float leaves ``leaves`` of ``system``: for a
    ``MultibodyModel`` (or a model holding one as ``full``, in joint coordinates) its
    parameter paths, otherwise the leaves' attribute paths."""
    full = getattr(system, "full", None)
    if not is_multibody(system) and is_multibody(full):
        inner = _multibody_name(full)
        return _leaf_names(
            leaves,
            lambda path, idx: (
                inner(path[1:], idx)
                if path and path[0] == GetAttrKey("full")
                else _path(path) + _index(idx)
            ),
        )
    if not is_multibody(system):
        return _leaf_names(leaves, lambda path, idx: _path(path) + _index(idx))
    return _leaf_names(leaves, _multibody_name(system))


def _multibody_name(system):
    def name_of(path, idx):
        head = path[0].name if isinstance(path[0], GetAttrKey) else None
        if head in ("force_groups", "joint_groups") and len(path) > 2 and idx:
            assert isinstance(path[1], SequenceKey)
            group = getattr(system, head)[path[1].idx]
            return f"{group.names[idx[0]]}.{_path(path[3:])}{_index(idx[1:])}"
        if head == "bodies" and len(path) > 1 and idx:
            return f"{system.bodies.names[idx[0]]}.{_path(path[1:])}{_index(idx[1:])}"
        return _path(path) + _index(idx)

    return name_of


def element_parameter_names(element_name: str, member) -> tuple[str, ...]:
    """Names of one (unstacked) force element's float leaves: ``cable.law.k``."""
    return _leaf_names(member, lambda path, idx: f"{element_name}.{_path(path)}{_index(idx)}")


def row_name(model, row: int) -> str:
    """The body (or ground, modal body, node) of row ``row`` of ``model.kinematics``."""
    names = (*model.bodies.names, "ground", *model.modal_names, *model.node_names)
    return names[row] if row < len(names) else f"row {row}"


def state_names(system, n_q: int, n_v: int) -> tuple[str, ...]:
    """``q[i]`` then ``v[i]``; a ``MultibodyModel``'s rigid bodies annotated
    (``q[3] ('bob' p.w)``, ``v[4] ('bob' ω̄.y)``)."""
    qs = [f"q[{i}]" for i in range(n_q)]
    vs = [f"v[{i}]" for i in range(n_v)]
    if is_multibody(system):
        for b, body in enumerate(system.bodies.names):
            for j in range(7):
                part = f"r_G.{_AXES[j]}" if j < 3 else f"p.{_QUATERNION[j - 3]}"
                qs[7 * b + j] += f" ('{body}' {part})"
            for j in range(6 if n_v else 0):
                part = f"ṙ_G.{_AXES[j]}" if j < 3 else f"ω̄.{_AXES[j - 3]}"
                vs[6 * b + j] += f" ('{body}' {part})"
    return tuple(qs + vs)


def output_names(system, function: str, n_out: int) -> tuple[str, ...]:
    """Names of the flat outputs of ``function``: ``M[i,j]``, ``Q[i]``, ``Φ[i]``, ``q̇[i]``."""
    if function == "mass":
        n = int(round(np.sqrt(n_out)))
        return tuple(f"M[{i},{j}]" for i in range(n) for j in range(n))
    if function == "constraints":
        out = [f"Φ[{i}]" for i in range(n_out)]
        if is_multibody(system):
            for joint, rows in system.joint_rows().items():
                for i in range(rows.start, rows.stop):
                    out[i] += f" (joint '{joint}')"
        return tuple(out)
    if function == "mass_and_forces":
        n = int(round((np.sqrt(1 + 4 * n_out) - 1) / 2))  # n² + n outputs
        return output_names(system, "mass", n * n) + output_names(system, "forces", n)
    symbol = {"forces": "Q", "qdot": "q̇"}.get(function, "y")
    return tuple(f"{symbol}[{i}]" for i in range(n_out))
