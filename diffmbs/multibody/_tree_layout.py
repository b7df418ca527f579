"""The static layout of a model in joint coordinates: which joints form the tree, which bodies
float, where every coordinate lives (:class:`Layout`, built by :func:`build_layout`).

Tree bodies are the full model's rigid bodies (tree index = body index, ``0 … n−1``), then its
modal bodies' reference frames (``n … n+m−1``); the ground is ``n+m``. A joint attached to a
modal body's node (not its frame) never enters the tree: it stays a constraint. State layout:
the tree joints' coordinates in the full model's joint order, the floating bodies' (COM or frame
origin, quaternion), then every modal body's modal coordinates (``q_slice("<body>.modes")``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from diffmbs.multibody._model import ModelError, MultibodyModel

__all__ = ["Layout", "TreeGroup", "build_layout", "modes_slice_name"]


def modes_slice_name(body: str) -> str:
    """Name of the slice of a modal body's modal coordinates in the joint-coordinate state."""
    return f"{body}.modes"


@dataclasses.dataclass(frozen=True)
class TreeGroup:
    """Tree joints taken from one of the full model's joint groups (static structure)."""

    group: int  # index into full.joint_groups
    members: tuple[int, ...]  # rows of that group
    child: tuple[int, ...]  # tree body moved by each joint
    parent: tuple[int, ...]  # the tree body it moves relative to (the ground is n_tree)
    reversed: tuple[bool, ...]  # True: the parent is body_j (the motion is inverted)
    q_index: tuple[tuple[int, ...], ...]
    v_index: tuple[tuple[int, ...], ...]


@dataclasses.dataclass(frozen=True)
class Layout:
    tree: tuple[TreeGroup, ...]
    loops: tuple[tuple[int, tuple[int, ...]], ...]  # (group, members) kept as constraints
    n_tree: int  # tree bodies: rigid bodies, then modal frames; the ground is n_tree
    free: tuple[int, ...]  # floating tree bodies
    parent: tuple[int, ...]  # parent of every tree body (the ground is n_tree)
    free_q: tuple[int, ...]  # first q index of each floating body (7 each)
    free_v: tuple[int, ...]  # first v index (6 each)
    modal_q: tuple[int, ...]  # first q index of each modal body's modal coordinates
    modal_v: tuple[int, ...]  # first v index of the same
    n_rigid_v: int  # velocities that move tree bodies (the rest are modal rates)
    jumps: tuple[tuple[int, ...], ...]  # ancestor of every row (bodies + ground) per round
    n_q: int
    n_v: int
    q_slices: tuple[tuple[str, int, int], ...]  # (joint or body name, start, stop)
    v_slices: tuple[tuple[str, int, int], ...]
    quaternions: tuple[int, ...]  # first q index of every quaternion block
    column_body: tuple[int, ...]  # tree body whose joint each of the first n_rigid_v drives
    ancestry: tuple[tuple[bool, ...], ...]  # [k][j]: body j is body k or one of its ancestors

    def tree_index(self, n_bodies: int) -> np.ndarray:
        """Tree index of every full-model kinematics row up to the modal frames (bodies,
        ground, modal frames), shape (n_bodies + 1 + n_modal,)."""
        n_modal = self.n_tree - n_bodies
        return np.concatenate([np.arange(n_bodies), [self.n_tree],
                               n_bodies + np.arange(n_modal)])  # fmt: skip


def build_layout(model: MultibodyModel, cut: tuple[str, ...]) -> Layout:
    n, n_modal = model.n_bodies, len(model.modal_bodies)
    n_tree = n + n_modal
    ground = n_tree
    unknown = [c for c in cut if c not in model.joint_names]
    if unknown:
        raise ModelError(f"joint coordinates: cut joint {unknown[0]!r} is not a joint", unknown[0])

    def tree_body(row: int) -> int | None:  # full kinematics row → tree body (None: a node)
        if row < n:
            return row
        if row == n:
            return ground
        return row - 1 if row <= n + n_modal else None

    candidates = []
    for g, group in enumerate(model.joint_groups):
        if type(group.elements).motion_sizes is None:
            continue
        for k, name in enumerate(group.names):
            bi, bj = (tree_body(r) for r in group.body_index[k])
            if name not in cut and bi is not None and bj is not None:
                candidates.append((g, k, (bi, bj)))
    # Breadth-first from the ground: the shallowest spanning tree, fewest pointer-jumping rounds.
    # When it stops, the first body not reached floats (a root: COM position and quaternion)
    # and the search goes on from it, so a floating machine keeps its joints in the tree.
    reached, parent, free = {ground}, {ground: ground}, []
    in_tree: dict[tuple[int, int], bool] = {}  # (g, k) -> reversed
    while True:
        new = {}
        for g, k, (bi, bj) in candidates:
            if (g, k) in in_tree:
                continue
            for par, child, rev in ((bi, bj, False), (bj, bi, True)):
                if par in reached and child not in reached and child not in new:
                    new[child] = (g, k, par, rev)
                    break
        if not new:
            roots = [b for b in range(n_tree) if b not in reached]
            if not roots:
                break
            free.append(roots[0])
            reached.add(roots[0])
            parent[roots[0]] = ground
            continue
        for child, (g, k, par, rev) in new.items():
            reached.add(child)
            parent[child] = par
            in_tree[(g, k)] = rev
    free = tuple(sorted(free))
    tree_names = model.bodies.names + model.modal_names
    q_at = v_at = 0
    q_slices, v_slices, quaternions = [], [], []
    tree, loops, column_body = [], [], []
    for g, group in enumerate(model.joint_groups):
        kind = type(group.elements)
        members = [k for k in range(len(group.names)) if (g, k) in in_tree]
        loop_members = tuple(k for k in range(len(group.names)) if (g, k) not in in_tree)
        if loop_members:
            loops.append((g, loop_members))
        if not members:
            continue
        nq, nv = kind.motion_sizes
        q_index, v_index, child, par, rev = [], [], [], [], []
        for k in members:
            bi, bj = (tree_body(r) for r in group.body_index[k])
            r = in_tree[(g, k)]
            child.append(bi if r else bj)
            par.append(bj if r else bi)
            column_body += [child[-1]] * nv
            rev.append(r)
            q_index.append(tuple(range(q_at, q_at + nq)))
            v_index.append(tuple(range(v_at, v_at + nv)))
            q_slices.append((group.names[k], q_at, q_at + nq))
            v_slices.append((group.names[k], v_at, v_at + nv))
            if nq == 4 and nv == 3:
                quaternions.append(q_at)
            q_at, v_at = q_at + nq, v_at + nv
        tree.append(TreeGroup(g, tuple(members), tuple(child), tuple(par), tuple(rev),
                              tuple(q_index), tuple(v_index)))  # fmt: skip
    free_q, free_v = [], []
    for b in free:
        free_q.append(q_at)
        free_v.append(v_at)
        quaternions.append(q_at + 3)
        column_body += [b] * 6
        q_slices.append((tree_names[b], q_at, q_at + 7))
        v_slices.append((tree_names[b], v_at, v_at + 6))
        q_at, v_at = q_at + 7, v_at + 6
    n_rigid_v = v_at
    modal_q, modal_v = [], []
    for body in model.modal_bodies:
        m = body.n_modes
        modal_q.append(q_at)
        modal_v.append(v_at)
        q_slices.append((modes_slice_name(body.name), q_at, q_at + m))
        v_slices.append((modes_slice_name(body.name), v_at, v_at + m))
        q_at, v_at = q_at + m, v_at + m
    anc = np.array([parent[b] for b in range(n_tree + 1)])
    ancestry = np.eye(n_tree, dtype=bool)
    for k in range(n_tree):
        j = parent[k]
        while j != ground:
            ancestry[k, j] = True
            j = parent[j]
    jumps = []
    while np.any(anc[:n_tree] != ground):
        jumps.append(tuple(int(a) for a in anc))
        anc = anc[anc]
    return Layout(
        tree=tuple(tree), loops=tuple(loops), n_tree=n_tree, free=free,
        parent=tuple(int(parent[b]) for b in range(n_tree)),
        free_q=tuple(free_q), free_v=tuple(free_v), modal_q=tuple(modal_q),
        modal_v=tuple(modal_v), n_rigid_v=n_rigid_v, jumps=tuple(jumps), n_q=q_at, n_v=v_at,
        q_slices=tuple(q_slices), v_slices=tuple(v_slices), quaternions=tuple(quaternions),
        column_body=tuple(column_body),
        ancestry=tuple(tuple(bool(a) for a in row) for row in ancestry),
    )  # fmt: skip
