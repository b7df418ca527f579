"""Acceleration records in the formats test labs write: NI TDMS (``npTDMS``), ASAM MDF
(``asammdf``), Universal File Format data set 58 (``pyuff``), MATLAB ``.mat`` (``scipy.io``)
and HDF5 (``h5py``).

Every reader returns an :class:`~diffmbs.io.AccelerationRecord` in SI (m/s², s) and takes the
same options: ``channels`` (names to keep, in that order; default all), ``units`` (the
channels' unit where the file does not say; a unit the file does state wins, and a conflict
is an error) and ``resample`` (a record whose times are not uniform is refused unless this is
set; then it is interpolated linearly onto a uniform grid at its median step). Errors name the
file and the channel, as the CSV reader's do. :func:`diffmbs.io.read_record` picks the reader
by suffix.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from diffmbs._records import (
    UNIT_NAMES,
    AccelerationRecord,
    _check_uniform_time,
    _existing_file,
    acceleration_scale,
    time_unit_scale,
)

__all__ = ["read_hdf5", "read_mat", "read_mdf", "read_tdms", "read_uff58"]


def _unit_of(path: Path, channel: str, stated: str | None, given: str | None) -> str:
    """The channel's unit: the file's (``stated``) if it has one, else ``given``, else m/s²."""
    if stated:
        unit = UNIT_NAMES.get(stated.strip().lower())
        if unit is None:
            known = ", ".join(sorted(UNIT_NAMES))
            raise ValueError(f"{path}: channel {channel!r} is in {stated!r}, not an acceleration "
                             f"unit diffmbs reads ({known})")  # fmt: skip
        if given is not None and acceleration_scale(given) != acceleration_scale(unit):
            raise ValueError(f"{path}: channel {channel!r} is in {stated!r} by the file, not "
                             f"{given!r} as asked")  # fmt: skip
        return unit
    return given or "m/s2"


def _record(path: Path, found: dict[str, tuple[np.ndarray, np.ndarray, str]],
            channels: Sequence[str] | None, resample: bool) -> AccelerationRecord:
    """One record from ``found`` (channel → (time s, values, unit)): the selected channels on
    the first one's time grid (uniform, or resampled), in m/s²."""
    if not found:
        raise ValueError(f"{path}: no acceleration channel found")
    names = list(found) if channels is None else list(channels)
    for name in names:
        if name not in found:
            raise ValueError(f"{path}: no channel {name!r}; the file has {', '.join(found)}")
    time = np.asarray(found[names[0]][0], dtype=np.float64)
    if resample:
        steps = np.diff(time)
        if time.size < 2 or np.any(steps <= 0):
            raise ValueError(f"{path}: channel {names[0]!r}: times must increase to resample")
        step = float(np.median(steps))
        time = time[0] + step * np.arange(int(round((time[-1] - time[0]) / step)) + 1)
    dt = _check_uniform_time(path, names[0], time, what="the time of channel")
    out, units = {}, set()
    for name in names:
        t, values, unit = found[name]
        t, values = np.asarray(t, dtype=np.float64), np.asarray(values, dtype=np.float64)
        if t.shape != values.shape:
            raise ValueError(
                f"{path}: channel {name!r} has {values.size} values for {t.size} times"
            )
        same = t.shape == time.shape and np.allclose(t, time, rtol=0, atol=1e-9 * dt)
        if not same and not resample:
            raise ValueError(f"{path}: channel {name!r} is not sampled at the times of "
                             f"{names[0]!r}; select channels of one rate, or resample")  # fmt: skip
        out[name] = (values if same else np.interp(time, t, values)) * acceleration_scale(unit)
        units.add(unit)
    source = units.pop() if len(units) == 1 else "mixed"
    return AccelerationRecord(path.stem, dt, out, time, source_unit=source)


def read_tdms(path, *, channels=None, units=None, resample=False) -> AccelerationRecord:
    """An NI TDMS file: each channel ``"<group>/<channel>"``, its times from the waveform
    properties (``wf_increment`` s, ``wf_start_offset``) or, failing those, its time track;
    its unit from ``unit_string``."""
    from nptdms import TdmsFile

    path = _existing_file(path)
    with open(path, "rb") as f:
        if f.read(4) != b"TDSm":
            raise ValueError(f"{path}: not a readable TDMS file (no 'TDSm' lead-in)")
    try:
        tdms = TdmsFile.read(path)
    except Exception as err:  # npTDMS raises several kinds on a damaged file
        raise ValueError(f"{path}: not a readable TDMS file ({err})") from None
    found = {}
    for group in tdms.groups():
        for channel in group.channels():
            name = f"{group.name}/{channel.name}"
            values = channel[:]
            if values.size == 0 or not np.issubdtype(values.dtype, np.number):
                continue
            if "wf_increment" not in channel.properties:
                raise ValueError(f"{path}: channel {name!r} has no wf_increment (its sample step)")
            stated = channel.properties.get("unit_string")
            found[name] = (channel.time_track(), values, _unit_of(path, name, stated, units))
    return _record(path, found, channels, resample)


def read_mdf(path, *, channels=None, units=None, resample=False) -> AccelerationRecord:
    """An ASAM MDF file (versions 3 and 4, ``.mf4``/``.mdf``, as data loggers write them):
    every numeric channel of every data group with its group's master times (s); its unit
    from the channel's own. A name that appears in several groups is ``"<name>@<group>"``
    after the first."""
    from asammdf import MDF

    path = _existing_file(path)
    with open(path, "rb") as f:
        if f.read(3) != b"MDF":
            raise ValueError(f"{path}: not a readable MDF file (no 'MDF' identification block)")
    try:
        mdf = MDF(path)
    except Exception as err:  # asammdf raises several kinds on a damaged file
        raise ValueError(f"{path}: not a readable MDF file ({err})") from None
    found = {}
    with mdf:
        for signal in mdf.iter_channels(skip_master=True):
            values = np.asarray(signal.samples)
            if values.ndim != 1 or values.size == 0 or not np.issubdtype(values.dtype, np.number):
                continue
            name = signal.name
            if name in found:
                name = f"{name}@{signal.group_index}"
            stated = signal.unit or None
            found[name] = (signal.timestamps, values, _unit_of(path, name, stated, units))
    return _record(path, found, channels, resample)


def read_uff58(path, *, channels=None, units=None, resample=False) -> AccelerationRecord:
    """A Universal File (``.uff``/``.unv``): its data sets of type 58 (function at nodes) with
    real time-response data; each channel named by the set's ``id1``, its unit the ordinate's
    label."""
    import pyuff

    path = _existing_file(path)
    try:
        sets = pyuff.UFF(str(path)).read_sets()
    except Exception as err:  # pyuff raises bare Exceptions
        raise ValueError(f"{path}: not a readable Universal File ({err})") from None
    found = {}
    for k, s in enumerate(sets if isinstance(sets, list) else [sets]):
        if s.get("type") != 58:
            continue
        name = str(s.get("id1") or f"set {k}").strip()
        if np.iscomplexobj(s["data"]):
            raise ValueError(f"{path}: channel {name!r} is complex (a spectrum), not a record")
        scale = time_unit_scale(str(s.get("abscissa_axis_units_lab", "s")))
        stated = s.get("ordinate_axis_units_lab") or None
        found[name] = (np.asarray(s["x"]) * scale, s["data"], _unit_of(path, name, stated, units))
    return _record(path, found, channels, resample)


def _time_key(path: Path, keys: list[str], time_name: str | None) -> str:
    if time_name is not None:
        if time_name not in keys:
            raise ValueError(f"{path}: no time variable {time_name!r}; it has {', '.join(keys)}")
        return time_name
    for key in keys:
        if key.split("/")[-1].lower().split("_")[0] in ("t", "time"):
            return key
    raise ValueError(f"{path}: no time variable (name it 't' or 'time…', or give its name)")


def read_mat(path, *, time="", channels=None, units=None, resample=False) -> AccelerationRecord:
    """A MATLAB ``.mat`` file (v4–v7.2; v7.3 is HDF5: :func:`read_hdf5`): a time vector
    (``time`` names it; else the first variable called ``t`` or ``time…``, in the unit its name
    ends with, ``time_ms``) and one vector of the same length per channel."""
    import scipy.io

    path = _existing_file(path)
    try:
        data = scipy.io.loadmat(path, squeeze_me=True)
    except NotImplementedError:  # a v7.3 file, which is HDF5
        return read_hdf5(path, time=time, channels=channels, units=units, resample=resample)
    except Exception as err:
        raise ValueError(f"{path}: not a readable MATLAB file ({err})") from None
    keys = [k for k in data if not k.startswith("__")]
    key = _time_key(path, keys, time or None)
    t = np.asarray(data[key], dtype=np.float64) * time_unit_scale(key)
    found = {k: (t, data[k], _unit_of(path, k, None, units)) for k in keys
             if k != key and np.ndim(data[k]) == 1 and np.size(data[k]) == t.size
             and np.issubdtype(np.asarray(data[k]).dtype, np.number)}  # fmt: skip
    return _record(path, found, channels, resample)


def read_hdf5(path, *, time="", channels=None, units=None, resample=False) -> AccelerationRecord:
    """An HDF5 file (also MATLAB v7.3): a time dataset (``time`` names its path; else the
    first one, at any depth, called ``t`` or ``time…``) and every 1-D dataset of its length, named
    by its path; a dataset's unit from its ``units`` or ``unit`` attribute."""
    import h5py

    path = _existing_file(path)
    try:
        handle = h5py.File(path, "r")
    except OSError as err:
        raise ValueError(f"{path}: not a readable HDF5 file ({err})") from None
    with handle:
        datasets = {}

        def collect(name, obj):  # (returning a value would stop the visit)
            if isinstance(obj, h5py.Dataset) and obj.ndim == 1:
                datasets[name] = obj

        handle.visititems(collect)
        key = _time_key(path, list(datasets), time or None)
        t = np.asarray(datasets[key][()], dtype=np.float64) * time_unit_scale(key.split("/")[-1])
        found = {}
        for name, ds in datasets.items():
            if name == key or ds.shape[0] != t.size or not np.issubdtype(ds.dtype, np.number):
                continue
            stated = ds.attrs.get("units", ds.attrs.get("unit"))
            stated = stated.decode() if isinstance(stated, bytes) else stated
            found[name] = (t, ds[()], _unit_of(path, name, stated, units))
    return _record(path, found, channels, resample)
