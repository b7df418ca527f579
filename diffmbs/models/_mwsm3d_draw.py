"""Pictures of the 3-D shock machine: a 3-D view of one state, and an animation of a run.

Engineers check a model by looking at it. The bodies are drawn as the boxes their inertias come
from (bed, anvil table, equipment block, the hammer's head and arm), the supporting channels and
the beam of test 2 as lines through their deformed FE nodes (deformation magnified by
``magnify``), the stops as points. matplotlib only (Agg canvas; the animation with matplotlib's
Pillow writer, a GIF), with a progress bar (tqdm) while the frames render.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

import diffmbs.multibody as mb
from diffmbs.io import atomic_write
from diffmbs.models._mwsm3d_parts import Geometry
from diffmbs.rotations import quat_to_matrix

__all__ = ["animate_blow", "draw_machine"]

_EDGES = [(0, 1), (1, 3), (3, 2), (2, 0), (4, 5), (5, 7), (7, 6), (6, 4), (0, 4), (1, 5), (2, 6),
          (3, 7)]  # fmt: skip


def _box(size, centre, rotation) -> np.ndarray:
    """The 8 corners (8, 3) of a box of ``size`` (3,) about ``centre`` with axes ``rotation``."""
    half = np.asarray(size) / 2
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
    return centre + (signs * half) @ rotation.T


def _segments(model, q: np.ndarray, magnify: float) -> list[tuple[np.ndarray, str]]:
    """Polylines (k, 3) with colours: the machine at state ``q``."""
    out = []

    def pose(name):
        qs = q[model.q_slice(name)]
        return qs[:3], np.asarray(quat_to_matrix(qs[3:7])), qs

    boxes = {
        "bed": Geometry.bed_box,
        "anvil": (*Geometry.anvil_plan, Geometry.anvil_thickness()),
        "equipment": (*Geometry.block_plan, Geometry.block_thickness()),
    }
    colours = {"bed": "0.45", "anvil": "tab:blue", "equipment": "tab:green"}
    for name, size in boxes.items():
        centre, rot, _ = pose(name)
        corners = _box(size, centre, rot)
        out.extend((corners[[a, b]], colours[name]) for a, b in _EDGES)
    head, rot, _ = pose("hammer")
    pivot = head - rot @ np.array([Geometry.hammer_arm, 0.0, 0.0])
    out.append((np.stack([pivot, head]), "tab:red"))
    corners = _box((Geometry.head_size,) * 3, head, rot)
    out.extend((corners[[a, b]], "tab:red") for a, b in _EDGES)
    for body in model.modal_bodies:
        _, rot, qs = pose(body.name)
        data = body.modal_data
        local = np.asarray(data.nodes) + magnify * np.asarray(data.translations) @ qs[7:]
        out.append((qs[:3] + local @ rot.T, "tab:orange"))
    return out


def _draw(ax, model, q, magnify: float) -> None:
    for line, colour in _segments(model, np.asarray(q), magnify):
        ax.plot(line[:, 0], line[:, 1], line[:, 2], color=colour, lw=1.2)
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_zlabel("z (m)")
    ax.set_xlim(-3.0, 1.5)
    ax.set_ylim(-1.5, 1.5)
    ax.set_zlim(-1.0, 3.2)
    ax.set_box_aspect((4.5, 3.0, 4.2))


def _full_states(model, qs: np.ndarray) -> tuple[object, np.ndarray]:
    """``(ShockMachine3D, its q (n, n̄_q))`` of states ``qs`` (n, n_q) of ``model``, in full
    or in joint coordinates."""
    qs = np.atleast_2d(np.asarray(qs))
    if isinstance(model, mb.JointCoordinateModel):
        return model.full, np.asarray(jax.vmap(lambda q: model.to_maximal(q)[0])(qs))
    return model, qs


def draw_machine(model, q, path, *, magnify: float = 1.0, title: str = "3-D MWSM") -> Path:
    """Save a 3-D picture of ``model`` (:func:`~diffmbs.models.mwsm3d.mwsm3d`'s, in joint or
    full coordinates) at state ``q`` to ``path`` (PNG, atomically); channel deformation
    ×``magnify``."""
    model, (q,) = _full_states(model, q)
    fig = Figure(figsize=(7.0, 6.0), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(projection="3d")
    _draw(ax, model, q, magnify)
    ax.set_title(title)
    return atomic_write(path, lambda tmp: fig.savefig(tmp))


def animate_blow(model, ts, qs, path, *, fps: int = 20, magnify: float = 1.0,
                 progress: bool = True) -> Path:  # fmt: skip
    """Write an animated GIF of the states ``qs`` (n, n_q) at times ``ts`` (n,) s, one frame
    each (pick the frames before: a blow is a few ms in a run of seconds), with a tqdm bar."""
    from matplotlib.animation import PillowWriter
    from tqdm.auto import tqdm

    fig = Figure(figsize=(6.0, 5.0), dpi=90)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(projection="3d")
    model, qs = _full_states(model, qs)
    frames = list(zip(np.asarray(ts), qs, strict=True))

    def write(tmp: Path) -> None:
        writer = PillowWriter(fps=fps)
        with writer.saving(fig, str(tmp), dpi=90):
            for t, q in tqdm(frames, desc="frames", unit="frame", disable=not progress):
                ax.cla()
                _draw(ax, model, q, magnify)
                ax.set_title(f"t = {t:.4f} s")
                writer.grab_frame()

    return atomic_write(path, write)
