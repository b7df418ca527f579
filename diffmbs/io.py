"""Reading acceleration records and reference spectra; writing result files atomically.

Everything this module returns is in SI: accelerations in m/s², times in s, frequencies in Hz.
Other units (g) are converted here, at the edge, and nowhere else.

Readers raise ``ValueError`` with a message that names the file and, where it applies, the column
and the row, so a command-line tool can print it as is.
"""

from __future__ import annotations

import csv
import os
import re
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from diffmbs import _lab_formats
from diffmbs._records import (
    ACCELERATION_UNITS,
    STANDARD_GRAVITY,
    AccelerationRecord,
    _check_uniform_time,
    _existing_file,
    acceleration_scale,
    column_unit,
    time_unit_scale,
)

__all__ = [
    "ACCELERATION_UNITS",
    "LAB_FORMATS",
    "STANDARD_GRAVITY",
    "AccelerationRecord",
    "acceleration_scale",
    "atomic_write",
    "column_unit",
    "read_acceleration_csv",
    "read_peer_at2",
    "read_record",
    "read_spectrum_csv",
    "time_unit_scale",
    "write_csv_atomic",
]

# --------------------------------------------------------------------------------------------
# CSV tables
# --------------------------------------------------------------------------------------------


def _parse_cell(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _read_table(path) -> tuple[list[str], np.ndarray]:
    """Read a comma-separated table with one header row of column names.

    Returns ``(header, data)`` with ``data`` of shape ``(n_rows, n_columns)``, float64, every
    cell finite. Blank lines are skipped; rows are numbered from 1 after the header and the file
    line is given alongside in error messages.
    """
    path = _existing_file(path)
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            lines = [(n, row) for n, row in enumerate(csv.reader(f), start=1) if any(row)]
    except (UnicodeDecodeError, csv.Error) as err:
        raise ValueError(f"{path}: not a readable CSV text file ({err})") from None
    if not lines:
        raise ValueError(f"{path}: the file is empty; expected a header row of column names")
    header = [name.strip() for name in lines[0][1]]
    if all(_parse_cell(name) is not None for name in header):
        raise ValueError(
            f"{path}: no header row; the first line must name the columns "
            f"(e.g. 'time_s,accel_x'), found numbers {lines[0][1][:3]}"
        )
    _check_header(path, header)
    rows = lines[1:]
    if len(rows) < 2:
        raise ValueError(f"{path}: needs at least 2 data rows below the header, found {len(rows)}")
    data = np.empty((len(rows), len(header)), dtype=np.float64)
    for i, (line_no, cells) in enumerate(rows):
        data[i] = _parse_row(path, header, i + 1, line_no, cells)
    return header, data


def _check_header(path: Path, header: list[str]) -> None:
    if len(header) < 2:
        raise ValueError(
            f"{path}: needs at least 2 columns (time and one channel, or frequency and one "
            f"spectrum), found {len(header)}: {header}"
        )
    for k, name in enumerate(header, start=1):
        if not name:
            raise ValueError(f"{path}: column {k} of the header has no name")
    duplicates = sorted({name for name in header if header.count(name) > 1})
    if duplicates:
        raise ValueError(f"{path}: duplicate column name(s) in the header: {duplicates}")


def _parse_row(path: Path, header: list[str], row: int, line_no: int, cells: list[str]):
    where = f"{path}: row {row} (line {line_no})"
    if len(cells) != len(header):
        raise ValueError(f"{where} has {len(cells)} cells, the header has {len(header)} columns")
    values = []
    for name, text in zip(header, cells, strict=True):
        value = _parse_cell(text)
        if value is None:
            raise ValueError(f"{where}, column {name!r}: {text.strip()!r} is not a number")
        if not np.isfinite(value):
            raise ValueError(f"{where}, column {name!r}: {text.strip()!r} is not a finite number")
        values.append(value)
    return values


def _column_index(path: Path, header: list[str], column: str | None, default: int, role: str):
    if column is None:
        return default
    if column not in header:
        raise ValueError(f"{path}: no {role} column named {column!r}; the columns are {header}")
    return header.index(column)


def read_acceleration_csv(path, time_column: str | None = None, units: str | None = None):
    """Read a uniformly sampled acceleration record from a CSV file.

    Layout: one header row of column names, then one row per sample. The time column (the
    first column unless ``time_column`` names another; in the unit its name ends with, e.g.
    ``time_ms``, else seconds: :func:`time_unit_scale`) must increase with a constant step
    (relative spread ≤ 1e-6); every other column is one accelerometer channel, in the unit its
    name ends with (``top_g``, ``base [m/s^2]``: :func:`column_unit`), else in ``units``.

    Args:
        path: the CSV file.
        time_column: name of the time column; ``None`` for the first column.
        units: unit of the channels, a key of :data:`ACCELERATION_UNITS` (``"m/s2"``, ``"g"``,
            ``"mg"``, ``"ft/s2"`` …); ``None`` (default): the units the column names state, m/s²
            for a column that states none. A column whose name states
            another unit than a given ``units`` is an error that names it.

    Returns:
        :class:`AccelerationRecord` named after the file stem, channels in m/s², each of shape
        ``(n_samples,)``; its ``source_unit`` is ``"mixed"`` when the columns differ.
    """
    if units is not None:
        acceleration_scale(units)  # an unknown unit is named before the file is read
    path = Path(path)
    header, data = _read_table(path)
    t_index = _column_index(path, header, time_column, 0, "time")
    try:
        time_scale = time_unit_scale(header[t_index])
        stated_units = {name: column_unit(name) for k, name in enumerate(header) if k != t_index}
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    time = data[:, t_index] * time_scale
    dt = _check_uniform_time(path, header[t_index], time)
    channels, unit_of = {}, {}
    for k, name in enumerate(header):
        if k == t_index:
            continue
        stated = stated_units[name]
        if stated is not None and units is not None and stated != units:
            raise ValueError(f"{path}: column {name!r} is in {stated} by its name, but the "
                             f"record was asked for in {units}")  # fmt: skip
        unit_of[name] = stated or units or "m/s2"
        channels[name] = data[:, k] * acceleration_scale(unit_of[name])
    found = set(unit_of.values())
    source_unit = found.pop() if len(found) == 1 else "mixed"
    return AccelerationRecord(path.stem, dt, channels, time, source_unit=source_unit)


def read_spectrum_csv(path, column: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Read a reference spectrum (e.g. an SRS specification) from a CSV file.

    Layout: one header row, the first column natural frequency in Hz, further columns spectrum
    values. No unit conversion is applied: the values come back in the file's unit.

    Args:
        path: the CSV file.
        column: name of the spectrum column; ``None`` for the second column.

    Returns:
        ``(freqs_hz, values)``, each of shape ``(n,)``, sorted by ascending frequency.
    """
    path = Path(path)
    header, data = _read_table(path)
    k = _column_index(path, header, column, 1, "spectrum")
    if k == 0:
        raise ValueError(f"{path}: column {column!r} is the frequency column, not a spectrum")
    freqs, values = data[:, 0], data[:, k]
    if np.any(freqs <= 0):
        i = int(np.argmax(freqs <= 0))
        raise ValueError(
            f"{path}: row {i + 1}, column {header[0]!r}: frequency {freqs[i]!r} Hz must be positive"
        )
    order = np.argsort(freqs, kind="stable")
    return freqs[order], values[order]


# --------------------------------------------------------------------------------------------
# PEER NGA AT2
# --------------------------------------------------------------------------------------------

_AT2_HEADER_LINES = 4
_AT2_NPTS_DT = re.compile(
    r"NPTS\s*=\s*(?P<npts>\d+)\s*,\s*DT\s*=\s*(?P<dt>[-+0-9.eE]+)", re.IGNORECASE
)


def read_peer_at2(path) -> AccelerationRecord:
    """Read a PEER NGA strong-motion record (``.AT2``: acceleration in g).

    Format: four header lines, the fourth holding ``NPTS=  16396, DT=   0.005 SEC``, then the
    NPTS values in g, several per line. The single channel is named after the file stem.

    Returns:
        :class:`AccelerationRecord` with one channel in m/s², shape ``(NPTS,)``.
    """
    path = _existing_file(path)
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    if len(lines) < _AT2_HEADER_LINES:
        raise ValueError(f"{path}: not a PEER AT2 file: fewer than {_AT2_HEADER_LINES} lines")
    match = _AT2_NPTS_DT.search(lines[_AT2_HEADER_LINES - 1])
    if match is None:
        raise ValueError(
            f"{path}: line {_AT2_HEADER_LINES} should read like 'NPTS=  16396, DT=   0.005 SEC', "
            f"found {lines[_AT2_HEADER_LINES - 1].strip()!r}"
        )
    npts = int(match["npts"])
    dt = _parse_cell(match["dt"])
    if dt is None or not (np.isfinite(dt) and dt > 0):
        raise ValueError(f"{path}: line {_AT2_HEADER_LINES}: DT={match['dt']} is not positive")
    values = _at2_values(path, lines)
    if values.size != npts:
        raise ValueError(
            f"{path}: the header says NPTS={npts}, but the file holds {values.size} values"
        )
    if npts < 2:
        raise ValueError(f"{path}: needs at least 2 samples, NPTS={npts}")
    time = np.arange(npts) * dt
    channels = {path.stem: values * STANDARD_GRAVITY}
    return AccelerationRecord(path.stem, dt, channels, time, source_unit="g")


def _at2_values(path: Path, lines: list[str]) -> np.ndarray:
    values = []
    for line_no, line in enumerate(lines[_AT2_HEADER_LINES:], start=_AT2_HEADER_LINES + 1):
        for text in line.split():
            value = _parse_cell(text)
            if value is None or not np.isfinite(value):
                raise ValueError(f"{path}: line {line_no}: {text!r} is not a finite number")
            values.append(value)
    return np.asarray(values, dtype=np.float64)


LAB_FORMATS = {".tdms": "read_tdms", ".mf4": "read_mdf", ".mdf": "read_mdf", ".uff": "read_uff58",
               ".unv": "read_uff58", ".mat": "read_mat", ".h5": "read_hdf5",
               ".hdf5": "read_hdf5"}  # fmt: skip
"""Suffixes :func:`read_record` hands to :mod:`diffmbs._lab_formats`, and the reader."""


def read_record(
    path, *, time_column: str | None = None, units: str | None = None,
    channels: Sequence[str] | None = None, resample: bool = False,
) -> AccelerationRecord:
    """Read an acceleration record, choosing the reader by suffix.

    ``.AT2`` (any case) → :func:`read_peer_at2` (always in g; ``units`` may only be ``None`` or
    ``"g"`` and ``time_column`` must be ``None``); ``.tdms``, ``.mf4``/``.mdf`` (ASAM MDF),
    ``.uff``/``.unv`` (data set 58), ``.mat`` and ``.h5``/``.hdf5`` → the lab-format readers
    of :mod:`diffmbs._lab_formats` (``time_column`` names a ``.mat``/HDF5 time variable;
    ``resample`` interpolates a non-uniform record onto a uniform grid); anything else →
    :func:`read_acceleration_csv`
    (channel units from the column names, else ``units``, else m/s²). ``channels``: the
    channels to keep, by name.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in LAB_FORMATS:
        reader = getattr(_lab_formats, LAB_FORMATS[suffix])
        options = dict(channels=channels, units=units, resample=resample)
        if suffix in (".mat", ".h5", ".hdf5"):
            options["time"] = time_column or ""
        elif time_column is not None:
            raise ValueError(f"{path}: {suffix} files carry their own times; there is no time "
                             "column to choose")  # fmt: skip
        return reader(path, **options)
    if resample:
        raise ValueError(f"{path}: resampling is for the lab formats ({', '.join(LAB_FORMATS)}); "
                         "a CSV record must be uniformly sampled")  # fmt: skip
    if suffix == ".at2":
        if units not in (None, "g"):
            raise ValueError(f"{path}: PEER AT2 files are in g; units={units!r} does not apply")
        if time_column is not None:
            raise ValueError(f"{path}: PEER AT2 files have no time column to choose")
        record = read_peer_at2(path)
    else:
        record = read_acceleration_csv(path, time_column=time_column, units=units)
    if channels is None:
        return record
    missing = [c for c in channels if c not in record.channels]
    if missing:
        raise ValueError(f"{path}: no channel {missing[0]!r}; the file has "
                         f"{', '.join(record.channels)}")  # fmt: skip
    kept = {c: record.channels[c] for c in channels}
    return AccelerationRecord(record.name, record.dt, kept, record.time, record.source_unit)


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def atomic_write(path, content: bytes | str | Callable[[Path], object]) -> Path:
    """Write a file so that readers see either the old file or the complete new one.

    The content goes to a temporary file in the same directory, which then replaces ``path``
    (``os.replace``). Missing parent directories are created.

    Args:
        path: the destination.
        content: bytes or text (UTF-8) to write, or a callable that writes the file at the
            temporary path it is given (which keeps ``path``'s suffix, so e.g.
            ``figure.savefig`` infers the format).

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{secrets.token_hex(6)}.tmp{path.suffix}")
    try:
        if callable(content):
            content(tmp)
        else:
            data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
            with open(tmp, "xb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_csv_atomic(path, header: list[str], columns: list[np.ndarray]) -> Path:
    """Write equal-length 1-D columns as a CSV file with a header row, atomically.

    Numbers are written with the shortest text that reads back to the same float64.
    """
    columns = [np.asarray(c, dtype=np.float64) for c in columns]
    if len(header) != len(columns):
        raise ValueError(f"{len(header)} header names for {len(columns)} columns")
    lengths = {c.shape for c in columns}
    if len(lengths) > 1 or any(len(s) != 1 for s in lengths):
        raise ValueError(f"columns must be 1-D and of equal length, got shapes {sorted(lengths)}")

    def write(tmp: Path) -> None:
        with open(tmp, "x", newline="", encoding="utf-8") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(header)
            writer.writerows([repr(float(v)) for v in row] for row in zip(*columns, strict=True))

    return atomic_write(path, write)
