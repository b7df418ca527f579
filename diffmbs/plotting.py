"""Figures of shock response spectra and of a journal's orbit in its bearing, written atomically
as image files.

Figures are built on matplotlib's Agg canvas directly (no ``pyplot``), so plotting works without a
display and leaves no global figure state behind.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from diffmbs.io import atomic_write

__all__ = ["db_factor", "plot_journal_orbit", "plot_srs"]

_FIGSIZE_IN = (9.0, 6.0)
_DPI = 150
_BAND_ALPHAS = (0.35, 0.15)  # innermost band darkest


def db_factor(db: float) -> float:
    """Amplitude ratio of a level difference in dB: 10^(dB/20) (3 dB → 1.41, 6 dB → 2.0)."""
    return 10.0 ** (db / 20.0)


def plot_srs(
    freqs,
    curves: dict[str, np.ndarray],
    *,
    units_label: str,
    title: str,
    path,
    reference: tuple[np.ndarray, np.ndarray, str] | None = None,
    bands_db: tuple[float, ...] = (3.0, 6.0),
    quantity: str = "Peak acceleration",
) -> Path:
    """Plot shock response spectra on log–log axes and save the figure atomically.

    Args:
        freqs: natural frequencies, Hz, shape ``(n_freq,)``.
        curves: curve label → spectrum, each of shape ``(n_freq,)``, in ``units_label``.
        units_label: unit of the spectra, e.g. ``"g"``; the y axis reads
            ``f"{quantity} ({units_label})"``.
        title: figure title.
        path: output image file; the format follows its suffix (``.png``).
        reference: optional ``(freqs_hz, values, label)`` of a reference spectrum (same unit),
            drawn as a dashed black line (on top of the curves) with shaded tolerance bands.
        bands_db: half-widths of the tolerance bands in dB, each shaded between
            reference × 10^(−dB/20) and reference × 10^(+dB/20); ignored without a reference.
        quantity: what the spectra are, for the y-axis label.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    fig = Figure(figsize=_FIGSIZE_IN, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if reference is not None:
        _draw_reference(ax, *reference, bands_db=bands_db)
    freqs = np.asarray(freqs, dtype=np.float64)
    for label, values in curves.items():
        ax.loglog(freqs, np.asarray(values, dtype=np.float64), linewidth=1.4, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("Natural frequency (Hz)")
    ax.set_ylabel(f"{quantity} ({units_label})")
    ax.set_title(title)
    ax.grid(True, which="major", linewidth=0.8, alpha=0.6)
    ax.grid(True, which="minor", linewidth=0.4, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    return atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=_DPI))


def _draw_reference(ax, freqs, values, label: str, *, bands_db) -> None:
    """Dashed reference line plus shaded ±dB bands, each band a ring around the narrower one."""
    freqs = np.asarray(freqs, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    inner = 1.0
    for rank, db in enumerate(sorted(bands_db)):
        outer = db_factor(db)
        style = {
            "color": "tab:gray",
            "alpha": _BAND_ALPHAS[min(rank, len(_BAND_ALPHAS) - 1)],
            "linewidth": 0,
        }
        ax.fill_between(freqs, values * inner, values * outer, label=f"±{db:g} dB", **style)
        ax.fill_between(freqs, values / outer, values / inner, **style)
        inner = outer
    ax.loglog(freqs, values, color="black", linestyle="--", linewidth=1.2, label=label, zorder=3)


def plot_journal_orbit(
    orbits: dict[str, np.ndarray],
    clearance: float,
    *,
    title: str,
    path,
    axes_labels: tuple[str, str] = ("X", "Z"),
) -> Path:
    """Plot the orbit of a journal's centre inside its bearing and save the figure atomically.

    Args:
        orbits: curve label → the journal centre relative to the bearing's, in the bearing's
            plane, m, shape ``(n, 2)`` (e.g. the X and Z columns of the slider-crank's
            ``journal`` sensor).
        clearance: radial clearance c, m: the circle the centre cannot leave without
            penetrating, drawn dashed.
        title: figure title.
        path: output image file; the format follows its suffix (``.png``).
        axes_labels: the names of the two in-plane axes.

    Returns:
        ``path`` as a :class:`~pathlib.Path`. Lengths are drawn in mm, axes equal.
    """
    if not np.isfinite(clearance) or clearance <= 0:
        raise ValueError(f"plot_journal_orbit: clearance must be positive, got {clearance!r}")
    fig = Figure(figsize=(6.5, 6.0), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    angle = np.linspace(0.0, 2.0 * np.pi, 361)
    ax.plot(1e3 * clearance * np.cos(angle), 1e3 * clearance * np.sin(angle), "k--",
            linewidth=1.0, label=f"clearance {1e3 * clearance:g} mm")  # fmt: skip
    for label, orbit in orbits.items():
        orbit = np.asarray(orbit, dtype=np.float64)
        if orbit.ndim != 2 or orbit.shape[1] != 2:
            raise ValueError(f"plot_journal_orbit: orbits[{label!r}] must be (n, 2), got "
                             f"{orbit.shape}")  # fmt: skip
        ax.plot(1e3 * orbit[:, 0], 1e3 * orbit[:, 1], linewidth=0.8, label=label)
    ax.set_aspect("equal")
    ax.set_xlabel(f"{axes_labels[0]} (mm)")
    ax.set_ylabel(f"{axes_labels[1]} (mm)")
    ax.set_title(title)
    ax.grid(True, linewidth=0.6, alpha=0.5)
    ax.legend(loc="upper right", fontsize="small")
    return atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=_DPI))
