"""``diffmbs srs``: the shock response spectrum of measured records, and the SRS computation
and report (CSV and figure) it shares with ``diffmbs simulate`` and the demo."""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from diffmbs.io import (
    ACCELERATION_UNITS,
    STANDARD_GRAVITY,
    AccelerationRecord,
    acceleration_scale,
    read_record,
    read_spectrum_csv,
    write_csv_atomic,
)
from diffmbs.plotting import plot_srs
from diffmbs.srs import KINDS, octave_frequencies, shock_response_spectrum

__all__ = ["add_srs_command", "compute_srs", "run_srs", "spectrum_unit"]

DEFAULT_DAMPING = 0.05
DEFAULT_FMAX_DIVISOR = 2.5
"""Without --fmax, the spectrum stops at fs/2.5 of the slowest-sampled input."""

KIND_HELP = {
    "maximax": "largest |absolute acceleration| of the oscillator, during the shock or in the "
    "free ringing after it (the usual shock-test SRS; default)",
    "primary": "largest |absolute acceleration| while the input lasts",
    "primary_positive": "largest positive absolute acceleration while the input lasts",
    "primary_negative": "largest negative absolute acceleration (as a magnitude) while the "
    "input lasts",
    "residual": "largest |absolute acceleration| of the free ringing after the input ends",
    "pseudo_velocity": "PV = 2πfn × peak relative displacement, always reported in m/s",
    "pseudo_acceleration": "PSA = (2πfn)² × peak relative displacement, as in seismic "
    "response spectra",
}


# --------------------------------------------------------------------------------------------
# The SRS computation shared by `diffmbs srs` and the demo
# --------------------------------------------------------------------------------------------


def curve_label(record: AccelerationRecord, channel: str) -> str:
    """``"stem:channel"``, or just the stem for single-channel files named after it (AT2)."""
    return record.name if channel == record.name else f"{record.name}:{channel}"


def spectrum_unit(kind: str, output_units: str) -> tuple[str, float]:
    """(unit label, size of that unit in SI) of an SRS of ``kind`` requested in ``output_units``.

    Acceleration-like kinds come in ``output_units`` (``"g"`` or ``"m/s2"``); pseudo velocity is
    always in m/s.
    """
    if kind == "pseudo_velocity":
        return "m/s", 1.0
    return output_units, acceleration_scale(output_units)


def spectrum_quantity(kind: str) -> str:
    """Axis label of an SRS of ``kind``, without the unit."""
    return {
        "pseudo_velocity": "Pseudo velocity",
        "pseudo_acceleration": "Pseudo acceleration",
    }.get(kind, "Peak acceleration")


def compute_srs(
    records: Sequence[AccelerationRecord], freqs, *, damping: float, kind: str
) -> dict[str, np.ndarray]:
    """SRS of every channel of every record, in SI.

    Args:
        records: acceleration records (channels in m/s²).
        freqs: natural frequencies, Hz, shape ``(n_freq,)``.
        damping: damping ratio ζ.
        kind: one of :data:`diffmbs.srs.KINDS`.

    Returns:
        curve label (see :func:`curve_label`) → SRS of shape ``(n_freq,)``, in m/s² (m/s for
        ``kind="pseudo_velocity"``), in the order of the records and their channels.
    """
    curves: dict[str, np.ndarray] = {}
    for record in records:
        accel = np.stack(list(record.channels.values()))
        srs = np.asarray(
            shock_response_spectrum(accel, record.dt, freqs, damping=damping, kind=kind)
        )
        for channel, values in zip(record.channels, srs, strict=True):
            label = curve_label(record, channel)
            if label in curves:
                raise ValueError(f"two inputs give the same curve name {label!r}; rename a file")
            curves[label] = values
    return curves


def run_srs(
    records: Sequence[AccelerationRecord],
    freqs,
    *,
    damping: float,
    kind: str,
    output_units: str,
    out_dir,
    name: str,
    reference: tuple[np.ndarray, np.ndarray, str] | None = None,
    title: str | None = None,
) -> tuple[Path, Path, dict[str, np.ndarray]]:
    """Compute the SRS of all channels and write ``<out_dir>/<name>_srs.csv`` and ``.png``.

    Args:
        records, freqs, damping, kind: as for :func:`compute_srs`.
        output_units: ``"g"`` or ``"m/s2"`` (pseudo velocity is in m/s regardless).
        out_dir: output directory, created if missing.
        name: stem of the output files.
        reference: optional ``(freqs_hz, values, label)`` in the output unit, drawn with ±3 and
            ±6 dB bands.
        title: figure title; a default names the kind and the damping.

    Returns:
        ``(csv_path, png_path, curves)`` with ``curves`` in the output unit.
    """
    unit, scale = spectrum_unit(kind, output_units)
    curves_si = compute_srs(records, freqs, damping=damping, kind=kind)
    curves = {label: values / scale for label, values in curves_si.items()}
    out_dir = Path(out_dir)
    csv_path = write_csv_atomic(
        out_dir / f"{name}_srs.csv",
        ["frequency_Hz", *(f"{label} [{unit}]" for label in curves)],
        [np.asarray(freqs, dtype=np.float64), *curves.values()],
    )
    if title is None:
        kind_text = kind.replace("_", " ").capitalize()
        title = f"{kind_text} SRS, Q = {1 / (2 * damping):.3g} (ζ = {damping:.3g})"
    png_path = plot_srs(
        freqs,
        curves,
        units_label=unit,
        title=title,
        reference=reference,
        path=out_dir / f"{name}_srs.png",
        quantity=spectrum_quantity(kind),
    )
    return csv_path, png_path, curves


# --------------------------------------------------------------------------------------------
# diffmbs srs
# --------------------------------------------------------------------------------------------

_KINDS_TEXT = "\n".join(
    textwrap.fill(text, 96, initial_indent=f"  {kind:<21} ", subsequent_indent=" " * 24)
    for kind, text in KIND_HELP.items()
)

_SRS_DESCRIPTION = f"""\
Compute the shock response spectrum (SRS) of measured acceleration records.

The SRS is the peak response of a bank of single-degree-of-freedom oscillators, one per natural
frequency fn, all with the same damping, whose base follows the measured acceleration. It is
computed exactly for a piecewise-linear input (Smallwood's ramp-invariant filter, ISO 18431-4).

kinds (--kind):
{_KINDS_TEXT}

damping: give either --damping ζ (fraction of critical) or --q Q, with Q = 1/(2ζ).
  The default is ζ = 5 %, i.e. Q = 10.
frequencies: log-spaced from --fmin to --fmax with --per-octave points per octave (default 12,
  the minimum MIL-STD-810 asks for). Without --fmax the spectrum stops at fs/2.5 of the
  slowest-sampled input; an --fmax at or above a record's Nyquist frequency fs/2 is an error.
  Frequencies with fewer than 10 samples per cycle are computed on an internally resampled
  (band-limited) record.

input files:
  CSV: one header row naming the columns, then one row per sample; the first column is time
    (or the column named by --time-column), uniformly sampled, in seconds or the unit its name
    ends with (time_ms); every other column is one accelerometer channel, in the unit its
    name ends with (top_g, base [m/s^2]), else in --units (g or m/s2, default m/s2).
  PEER NGA .AT2: read as such (always in g).
  Lab formats, by suffix: NI .tdms (channels GROUP/CHANNEL, times from wf_increment, units
    from unit_string), ASAM MDF .mf4/.mdf (every numeric channel with its group's master
    times and its own unit), Universal File .uff/.unv (data sets 58, named by their id1,
    units from the ordinate label), MATLAB .mat and HDF5 .h5/.hdf5 (a time vector named t or
    time..., or by --time-column; one vector of its length per channel; HDF5 units from a
    "units" attribute). A unit the file states wins over --units; a conflict is an error.
  Each channel of each file becomes one curve, named FILE_STEM:COLUMN.

units: g means standard gravity, 1 g = {STANDARD_GRAVITY} m/s^2. The spectra are written in
  --output-units (default: the unit of the inputs).

output: OUT/NAME_srs.csv (frequency_Hz, then one column per channel, headed
  "FILE_STEM:COLUMN [unit]") and OUT/NAME_srs.png (log-log plot; with --reference, the reference
  curve with shaded +/-3 dB and +/-6 dB bands). The two paths are printed.
"""

_SRS_EPILOG = """\
example:
  diffmbs srs drop_test.csv --units g --fmin 10 --fmax 10000 --q 10 \\
      --reference spec.csv --out runs/srs --name drop_test
"""


def add_srs_command(subparsers) -> None:
    p = subparsers.add_parser(
        "srs",
        help="shock response spectrum of acceleration records (CSV, AT2, TDMS, UFF, MAT, HDF5)",
        description=_SRS_DESCRIPTION,
        epilog=_SRS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        type=Path,
        help="acceleration record: CSV, PEER .AT2 or a lab format (see above)",
    )
    p.add_argument(
        "--units",
        choices=list(ACCELERATION_UNITS),
        default=None,
        help="unit of the acceleration channels where the file does not state one (CSV: the "
        "unit a column's name ends with, as in top_g or base [m/s^2]; m/s2 where it states "
        "none; a lab file's stated unit must agree; PEER .AT2 records are in g)",
    )
    p.add_argument(
        "--time-column",
        metavar="NAME",
        default=None,
        help="name of the time column of CSV inputs (default: the first column)",
    )
    p.add_argument(
        "--fmin",
        type=float,
        default=10.0,
        metavar="HZ",
        help="lowest natural frequency, Hz (default 10)",
    )
    p.add_argument(
        "--fmax",
        type=float,
        default=None,
        metavar="HZ",
        help="highest natural frequency, Hz (default: fs/2.5 of the slowest-sampled input)",
    )
    p.add_argument(
        "--per-octave",
        type=int,
        default=12,
        metavar="N",
        help="natural frequencies per octave (default 12, as MIL-STD-810 asks)",
    )
    damping = p.add_mutually_exclusive_group()
    damping.add_argument(
        "--damping",
        type=float,
        default=None,
        metavar="ZETA",
        help="damping ratio ζ, fraction of critical (default 0.05)",
    )
    damping.add_argument(
        "--q",
        type=float,
        default=None,
        metavar="Q",
        help="quality factor Q = 1/(2ζ) instead of --damping (default 10)",
    )
    p.add_argument(
        "--kind",
        choices=KINDS,
        default="maximax",
        metavar="KIND",
        help=f"which peak response to report: {', '.join(KINDS)}; see above (default maximax)",
    )
    p.add_argument(
        "--output-units",
        choices=list(ACCELERATION_UNITS),
        default=None,
        help="unit of the written spectra (default: the unit of the inputs)",
    )
    p.add_argument(
        "--reference",
        type=Path,
        default=None,
        metavar="REF.csv",
        help="reference spectrum to overlay with +/-3 and +/-6 dB bands: CSV with a "
        "header row, frequency in Hz in the first column, values in the output unit",
    )
    p.add_argument(
        "--reference-column",
        default=None,
        metavar="NAME",
        help="column of --reference to use (default: the second column)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("runs/srs"),
        metavar="DIR",
        help="output directory (default runs/srs)",
    )
    p.add_argument(
        "--name",
        default=None,
        metavar="STEM",
        help="stem of the output file names (default: the first input's stem)",
    )
    p.set_defaults(run=_run_srs_command)


def _damping_ratio(args: argparse.Namespace) -> float:
    if args.q is not None:
        if not args.q > 0.5:
            raise ValueError(f"--q must be greater than 0.5 (damping below critical), got {args.q}")
        return 1.0 / (2.0 * args.q)
    return DEFAULT_DAMPING if args.damping is None else args.damping


def _frequency_grid(args: argparse.Namespace, records: Sequence[AccelerationRecord]) -> np.ndarray:
    slowest = min(records, key=lambda r: r.sample_rate)
    nyquist = slowest.sample_rate / 2
    if args.fmax is None:
        fmax = slowest.sample_rate / DEFAULT_FMAX_DIVISOR
        print(
            f"note: --fmax not given; using {fmax:g} Hz = fs/{DEFAULT_FMAX_DIVISOR:g} of "
            f"{slowest.name} (fs = {slowest.sample_rate:g} Hz)",
            file=sys.stderr,
        )
    elif args.fmax >= nyquist:
        raise ValueError(
            f"--fmax {args.fmax:g} Hz is at or above the Nyquist frequency {nyquist:g} Hz of "
            f"{slowest.name} (fs = {slowest.sample_rate:g} Hz); choose --fmax below {nyquist:g}"
        )
    else:
        fmax = args.fmax
    if not 0 < args.fmin <= fmax:
        raise ValueError(f"need 0 < --fmin <= --fmax, got --fmin {args.fmin:g}, fmax {fmax:g} Hz")
    return octave_frequencies(args.fmin, fmax, args.per_octave)


def _output_units(args: argparse.Namespace, records: Sequence[AccelerationRecord]) -> str:
    if args.output_units is not None:
        return args.output_units
    units = {r.source_unit for r in records}
    if len(units) == 1 and "mixed" not in units:  # (a lab file can hold both units)
        return units.pop()
    print(
        "note: the inputs are in different units; writing m/s2 (see --output-units)",
        file=sys.stderr,
    )
    return "m/s2"


LONG_WORK = 2e7
"""Samples × frequencies above which ``diffmbs srs`` says what it is doing (about 2 s)."""


def _run_srs_command(args: argparse.Namespace) -> None:
    damping = _damping_ratio(args)
    records = [read_record(p, time_column=args.time_column, units=args.units) for p in args.inputs]
    freqs = _frequency_grid(args, records)
    reference = None
    if args.reference is not None:
        ref_freqs, ref_values = read_spectrum_csv(args.reference, args.reference_column)
        label = args.reference_column or f"reference ({args.reference.stem})"
        reference = (ref_freqs, ref_values, label)
    elif args.reference_column is not None:
        raise ValueError("--reference-column needs --reference")
    samples = sum(len(c) for r in records for c in r.channels.values())
    if samples * len(freqs) > LONG_WORK:  # say what a long silence is
        print(f"diffmbs srs: {samples:,} samples × {len(freqs)} frequencies ...", file=sys.stderr,
              flush=True)  # fmt: skip
    csv_path, png_path, _ = run_srs(
        records,
        freqs,
        damping=damping,
        kind=args.kind,
        output_units=_output_units(args, records),
        out_dir=args.out,
        name=args.name or args.inputs[0].stem,
        reference=reference,
    )
    print(csv_path)
    print(png_path)
