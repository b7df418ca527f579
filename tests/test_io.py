"""Readers and writers of diffmbs.io: round trips, unit conversion, and every validation error."""

import re
from pathlib import Path

import numpy as np
import pytest

from diffmbs.io import (
    STANDARD_GRAVITY,
    AccelerationRecord,
    atomic_write,
    column_unit,
    read_acceleration_csv,
    read_peer_at2,
    read_record,
    read_spectrum_csv,
    write_csv_atomic,
)

PEER_DIR = Path(__file__).parent / "data" / "peer_nga_west2"
AT2_H2 = PEER_DIR / "RSN8883_14383980_13849090.AT2"


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _record_csv(tmp_path: Path, n: int = 50, dt: float = 1e-4) -> tuple[Path, np.ndarray]:
    rng = np.random.default_rng(0)
    data = np.column_stack([np.arange(n) * dt, rng.normal(size=n), rng.normal(size=n)])
    path = tmp_path / "shock.csv"
    np.savetxt(path, data, delimiter=",", header="time_s,ax,ay", comments="")
    return path, data


# --------------------------------------------------------------------------------------------
# CSV records
# --------------------------------------------------------------------------------------------


def test_csv_round_trip_in_si(tmp_path):
    path, data = _record_csv(tmp_path)
    record = read_acceleration_csv(path)
    assert isinstance(record, AccelerationRecord)
    assert record.name == "shock"
    assert record.source_unit == "m/s2"
    assert record.dt == pytest.approx(1e-4, rel=1e-12)
    assert list(record.channels) == ["ax", "ay"]
    np.testing.assert_array_equal(record.time, data[:, 0])
    np.testing.assert_array_equal(record.channels["ax"], data[:, 1])
    np.testing.assert_array_equal(record.channels["ay"], data[:, 2])


def test_csv_in_g_is_converted_to_m_per_s2(tmp_path):
    path, data = _record_csv(tmp_path)
    record = read_acceleration_csv(path, units="g")
    assert record.source_unit == "g"
    np.testing.assert_allclose(record.channels["ax"], data[:, 1] * 9.80665, rtol=1e-15)
    assert STANDARD_GRAVITY == 9.80665


def test_csv_time_column_by_name(tmp_path):
    path = _write(tmp_path / "r.csv", "a, t ,b\n1,0.0,4\n2,0.5,5\n3,1.0,6\n")
    record = read_acceleration_csv(path, time_column="t")
    assert record.dt == 0.5
    assert list(record.channels) == ["a", "b"]
    np.testing.assert_array_equal(record.channels["b"], [4.0, 5.0, 6.0])


@pytest.mark.parametrize(
    "name, dt", [("time_ms", 0.5e-3), ("t [us]", 0.5e-6), ("Time (s)", 0.5), ("time", 0.5)]
)
def test_csv_time_column_in_the_unit_its_name_gives(tmp_path, name, dt):
    path = _write(tmp_path / "r.csv", f"{name},a\n0,1\n0.5,2\n1.0,3\n")
    record = read_acceleration_csv(path)
    assert record.dt == pytest.approx(dt, rel=1e-15)
    np.testing.assert_allclose(record.time, [0.0, dt, 2 * dt], rtol=1e-15)


@pytest.mark.parametrize(
    "name, unit",
    [("top_g", "g"), ("accel [g]", "g"), ("Accel_G", "g"), ("a (m/s^2)", "m/s2"),
     ("base_m/s2", "m/s2"), ("base_mps2", "m/s2"), ("a m/s²", "m/s2"), ("accel", None),
     ("leg", None), ("channel_mg", "mg"), ("g", "g"), ("a [ft/s^2]", "ft/s2"),
     ("a_in/s2", "in/s2"), ("pga (gal)", "cm/s2")],
)  # fmt: skip
def test_column_unit_is_read_from_the_end_of_the_name(name, unit):
    assert column_unit(name) == unit


def test_csv_units_of_other_systems_are_converted_exactly(tmp_path):
    """milli-g, ft/s² and in/s² by their definitions (g₀ = 9.80665 m/s², ft = 0.3048 m,
    in = 0.0254 m), not read as m/s²."""
    path = _write(tmp_path / "r.csv", "t,top_mg,a [ft/s^2],b (in/s2)\n0,1000,1,1\n1,0,0,0\n")
    record = read_acceleration_csv(path)
    np.testing.assert_allclose(record.channels["top_mg"], [9.80665, 0.0], rtol=1e-15)
    np.testing.assert_allclose(record.channels["a [ft/s^2]"], [0.3048, 0.0], rtol=1e-15)
    np.testing.assert_allclose(record.channels["b (in/s2)"], [0.0254, 0.0], rtol=1e-15)


@pytest.mark.parametrize(
    "header, column, unit",
    [("t,a [V]", "column 'a [V]'", "'V'"), ("t,a (km/h)", "column 'a (km/h)'", "'km/h'"),
     ("t [samples],a", "time column 't [samples]'", "'samples'")],
)  # fmt: skip
def test_csv_unit_in_brackets_that_is_not_one_is_an_error_naming_the_column(
    tmp_path, header, column, unit
):
    path = _write(tmp_path / "r.csv", f"{header}\n0,1\n1,2\n")
    with pytest.raises(ValueError, match=f"r.csv: {re.escape(column)} states the unit {unit}"):
        read_acceleration_csv(path)


def test_csv_channel_units_come_from_the_header(tmp_path):
    """``top_g`` in g, ``base [m/s^2]`` and a bare ``raw`` in m/s²; a given unit applies to the
    bare columns, and one that contradicts a stated unit is an error naming the column."""
    path = _write(tmp_path / "r.csv", "time_ms,top_g,base [m/s^2],raw\n0,1,2,3\n1,4,5,6\n")
    record = read_acceleration_csv(path)
    assert record.dt == pytest.approx(1e-3, rel=1e-15)
    np.testing.assert_allclose(record.channels["top_g"], [9.80665, 4 * 9.80665], rtol=1e-15)
    np.testing.assert_array_equal(record.channels["base [m/s^2]"], [2.0, 5.0])
    np.testing.assert_array_equal(record.channels["raw"], [3.0, 6.0])
    assert record.source_unit == "mixed"
    with pytest.raises(ValueError, match=r"r.csv: column 'base \[m/s\^2\]' is in m/s2 by its"):
        read_record(path, units="g")
    in_g = read_record(_write(tmp_path / "g.csv", "t,top_g,raw\n0,1,2\n1,3,4\n"), units="g")
    np.testing.assert_allclose(in_g.channels["raw"], [2 * 9.80665, 4 * 9.80665], rtol=1e-15)
    assert in_g.source_unit == "g"


def test_bundled_records_are_read_in_the_unit_their_header_states():
    """The bundled records name their channel ``equipment_accel_g``: read without a unit they
    come back in m/s², the file's numbers times g₀."""
    path = Path(__file__).parents[1] / "data" / "mwsm" / "test_1ft_accel.csv"
    values = np.loadtxt(path, delimiter=",", skiprows=1)
    record = read_record(path)
    assert record.source_unit == "g"
    np.testing.assert_allclose(record.channels["equipment_accel_g"], values[:, 1] * 9.80665,
                               rtol=1e-15)  # fmt: skip


def test_csv_messages_print_plain_numbers(tmp_path):
    path = _write(tmp_path / "r.csv", "time,a\n0,1\n2,1\n1,1\n")
    with pytest.raises(ValueError, match=r"row 3 has 1 s after 2 s in row 2") as info:
        read_acceleration_csv(path)
    assert "np.float64" not in str(info.value)


def test_csv_tolerates_bom_and_blank_lines(tmp_path):
    path = tmp_path / "r.csv"
    path.write_bytes("\ufefftime,a\n0,1\n\n1,2\n\n".encode())
    record = read_acceleration_csv(path)
    assert list(record.channels) == ["a"]
    np.testing.assert_array_equal(record.time, [0.0, 1.0])


@pytest.mark.parametrize(
    ("text", "kwargs", "expected"),
    [
        ("", {}, ["empty", "header"]),
        ("0,1\n1,2\n", {}, ["no header"]),
        ("time\n0\n1\n", {}, ["at least 2 columns"]),
        ("time,a\n0,1\n", {}, ["at least 2 data rows"]),
        ("time,a,a\n0,1,2\n1,2,3\n", {}, ["duplicate", "'a'"]),
        ("time,a\n0,1\n1,x7\n2,3\n", {}, ["row 2", "line 3", "'a'", "'x7'"]),
        ("time,a\n0,1\n1,\n", {}, ["row 2", "'a'", "not a number"]),
        ("time,a\n0,1\n1,nan\n", {}, ["row 2", "'a'", "not a finite"]),
        ("time,a\n0,inf\n1,1\n", {}, ["row 1", "'a'", "not a finite"]),
        ("time,a\n0,1\n1,2,3\n", {}, ["row 2", "3 cells", "2 columns"]),
        ("time,a\n0,1\n2,1\n1,1\n", {}, ["'time'", "strictly increasing", "row 3"]),
        ("time,a\n0,1\n0,1\n", {}, ["strictly increasing", "row 2"]),
        ("t,a\n0,1\n1,1\n2,1\n3.5,1\n4.5,1\n", {}, ["'t'", "uniformly", "row 3 to row 4"]),
        ("time,a\n0,1\n1,1\n", {"units": "furlong/fortnight2"}, ["unit", "'furlong/fortnight2'"]),
        ("time,a\n0,1\n1,1\n", {"time_column": "seconds"}, ["'seconds'", "time", "['time', 'a']"]),
    ],
)
def test_csv_validation_errors_name_file_row_and_column(tmp_path, text, kwargs, expected):
    path = _write(tmp_path / "bad.csv", text)
    with pytest.raises(ValueError) as info:
        read_acceleration_csv(path, **kwargs)
    message = str(info.value)
    for fragment in expected:
        assert fragment in message, message
    if "units" not in kwargs:
        assert "bad.csv" in message


def test_csv_missing_file(tmp_path):
    with pytest.raises(ValueError, match=r"nope\.csv.*does not exist"):
        read_acceleration_csv(tmp_path / "nope.csv")


def test_csv_directory_is_not_a_file(tmp_path):
    with pytest.raises(ValueError, match="directory"):
        read_acceleration_csv(tmp_path)


def test_csv_binary_garbage_is_a_value_error(tmp_path):
    path = tmp_path / "junk.csv"
    path.write_bytes(b"\xff\xfe\x00\x81time,a\n")
    with pytest.raises(ValueError, match=r"junk\.csv"):
        read_acceleration_csv(path)


def test_sampling_jitter_below_tolerance_is_accepted(tmp_path):
    t = np.arange(100) * 1e-3
    t[50] += 1e-13  # relative jitter 1e-10
    path = tmp_path / "ok.csv"
    np.savetxt(
        path, np.column_stack([t, np.ones_like(t)]), delimiter=",", header="t,a", comments=""
    )
    assert read_acceleration_csv(path).dt == pytest.approx(1e-3, rel=1e-9)


# --------------------------------------------------------------------------------------------
# PEER AT2
# --------------------------------------------------------------------------------------------


def test_at2_bundled_record_matches_its_text():
    lines = AT2_H2.read_text().splitlines()
    assert "NPTS=  16396, DT=   0.005 SEC" in lines[3]
    tokens = " ".join(lines[4:]).split()
    assert tokens[0] == "8.6900441E-08"

    record = read_peer_at2(AT2_H2)
    (values,) = record.channels.values()
    assert record.name == AT2_H2.stem
    assert list(record.channels) == [AT2_H2.stem]
    assert record.source_unit == "g"
    assert record.dt == 0.005
    assert values.shape == (16396,) == (len(tokens),)
    assert values[0] == pytest.approx(8.6900441e-08 * 9.80665, rel=1e-15)
    assert values[-1] == pytest.approx(float(tokens[-1]) * 9.80665, rel=1e-15)
    np.testing.assert_allclose(record.time[[0, 1, -1]], [0.0, 0.005, 16395 * 0.005])


def _at2(tmp_path: Path, header4: str, values: str, name: str = "rec.AT2") -> Path:
    return _write(tmp_path / name, f"PEER\nrecord\nACCELERATION IN G\n{header4}\n{values}\n")


def test_at2_npts_mismatch(tmp_path):
    path = _at2(tmp_path, "NPTS=  4, DT=   0.01 SEC", "1.0 2.0 3.0")
    with pytest.raises(ValueError, match=r"rec\.AT2.*NPTS=4.*3 values"):
        read_peer_at2(path)


def test_at2_bad_header_and_bad_value(tmp_path):
    with pytest.raises(ValueError, match=r"line 4.*NPTS"):
        read_peer_at2(_at2(tmp_path, "nothing here", "1.0 2.0"))
    with pytest.raises(ValueError, match=r"line 6.*'abc'"):
        read_peer_at2(_at2(tmp_path, "NPTS= 3, DT= 0.01 SEC", "1.0 2.0\nabc"))
    with pytest.raises(ValueError, match="fewer than 4 lines"):
        read_peer_at2(_write(tmp_path / "short.AT2", "PEER\n"))


def test_read_record_dispatches_on_suffix(tmp_path):
    at2 = _at2(tmp_path, "NPTS= 3, DT= 0.01 SEC", "1.0 2.0\n3.0", name="lower.at2")
    record = read_record(at2)
    assert record.source_unit == "g"
    np.testing.assert_allclose(record.channels["lower"], [9.80665, 2 * 9.80665, 3 * 9.80665])
    assert read_record(at2, units="g").dt == 0.01
    with pytest.raises(ValueError, match="in g"):
        read_record(at2, units="m/s2")
    with pytest.raises(ValueError, match="time column"):
        read_record(at2, time_column="t")

    csv_path, data = _record_csv(tmp_path)
    np.testing.assert_array_equal(read_record(csv_path).channels["ax"], data[:, 1])
    in_g = read_record(csv_path, units="g")
    np.testing.assert_allclose(in_g.channels["ax"], data[:, 1] * 9.80665, rtol=1e-15)


# --------------------------------------------------------------------------------------------
# Reference spectra and writing
# --------------------------------------------------------------------------------------------


def test_spectrum_csv_columns_and_sorting(tmp_path):
    path = _write(tmp_path / "ref.csv", "f_Hz,lo,hi\n100,1,2\n10,3,4\n1000,5,6\n")
    freqs, values = read_spectrum_csv(path)
    np.testing.assert_array_equal(freqs, [10, 100, 1000])
    np.testing.assert_array_equal(values, [3, 1, 5])
    np.testing.assert_array_equal(read_spectrum_csv(path, "hi")[1], [4, 2, 6])
    with pytest.raises(ValueError, match=r"ref\.csv.*'mid'"):
        read_spectrum_csv(path, "mid")
    with pytest.raises(ValueError, match="frequency column"):
        read_spectrum_csv(path, "f_Hz")


def test_spectrum_csv_rejects_non_positive_frequency(tmp_path):
    path = _write(tmp_path / "ref.csv", "f,v\n10,1\n0,1\n")
    with pytest.raises(ValueError, match=r"row 2.*'f'.*positive"):
        read_spectrum_csv(path)


def test_published_psa_is_the_5_percent_peer_spectrum():
    freqs, h1 = read_spectrum_csv(PEER_DIR / "published_psa.csv", "h1_g")
    assert freqs.size == 111
    assert np.all(np.diff(freqs) > 0)
    assert freqs[0] == pytest.approx(0.05) and freqs[-1] == pytest.approx(100.0)
    assert h1[-1] == 0.1602728  # PSA at T = 0.01 s, from peer.json.gz


def test_write_csv_atomic_round_trip_is_exact(tmp_path):
    rng = np.random.default_rng(1)
    columns = [np.linspace(1, 2, 7), rng.normal(size=7) * 1e-7, rng.normal(size=7) * 1e5]
    path = tmp_path / "sub" / "out.csv"
    write_csv_atomic(path, ["frequency_Hz", "a [g]", "b [g]"], columns)
    assert path.read_text().splitlines()[0] == "frequency_Hz,a [g],b [g]"
    np.testing.assert_array_equal(np.loadtxt(path, delimiter=",", skiprows=1).T, columns)
    write_csv_atomic(path, ["x", "y"], [np.arange(3.0), np.arange(3.0)])  # overwrite
    assert path.read_text().splitlines()[0] == "x,y"
    assert [p.name for p in path.parent.iterdir()] == ["out.csv"]  # no temporary left


def test_write_csv_atomic_validates_shapes(tmp_path):
    with pytest.raises(ValueError, match="header"):
        write_csv_atomic(tmp_path / "x.csv", ["a"], [np.ones(2), np.ones(2)])
    with pytest.raises(ValueError, match="equal length"):
        write_csv_atomic(tmp_path / "x.csv", ["a", "b"], [np.ones(2), np.ones(3)])
    assert not list(tmp_path.iterdir())


def test_atomic_write_bytes_text_and_callable(tmp_path):
    target = tmp_path / "f.txt"
    atomic_write(target, b"one")
    assert target.read_bytes() == b"one"
    atomic_write(target, "two")
    assert target.read_text() == "two"
    atomic_write(target, lambda tmp: Path(tmp).write_text(f"three{Path(tmp).suffix}"))
    assert target.read_text() == "three.txt"  # the temporary keeps the suffix

    def failing(tmp):
        Path(tmp).write_text("partial")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(target, failing)
    assert target.read_text() == "three.txt"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]
