"""The `diffmbs srs` command end to end, its errors and help, and the demo."""

import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

from diffmbs.app import _srs_command, cli, demo
from diffmbs.srs import KINDS, octave_frequencies, shock_response_spectrum

G = 9.80665
FS = 20_000.0


@pytest.fixture(scope="module")
def half_sine_csv(tmp_path_factory) -> Path:
    """A 50 g, 2 ms half-sine on channel x (y = −0.5 x), 20 kHz, 30 ms, in g."""
    t = np.arange(600) / FS
    pulse = np.where((t >= 0.005) & (t <= 0.007), 50.0 * np.sin(np.pi * (t - 0.005) / 0.002), 0.0)
    path = tmp_path_factory.mktemp("input") / "half_sine.csv"
    np.savetxt(
        path,
        np.column_stack([t, pulse, -0.5 * pulse]),
        delimiter=",",
        header="time_s,x,y",
        comments="",
    )
    return path


def _srs(args, capsys) -> tuple[int, str, str]:
    code = cli.main(["srs", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def _read_output(path: Path) -> tuple[list[str], np.ndarray]:
    header = path.read_text().splitlines()[0].split(",")
    return header, np.loadtxt(path, delimiter=",", skiprows=1)


def test_srs_end_to_end_matches_direct_call(half_sine_csv, tmp_path, capsys):
    code, out, err = _srs(
        [half_sine_csv, "--units", "g", "--fmax", "2000", "--out", tmp_path], capsys
    )
    assert code == 0, err
    csv_path, png_path = tmp_path / "half_sine_srs.csv", tmp_path / "half_sine_srs.png"
    assert out.split() == [str(csv_path), str(png_path)]
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    header, table = _read_output(csv_path)
    assert header == ["frequency_Hz", "half_sine:x [g]", "half_sine:y [g]"]
    freqs = octave_frequencies(10.0, 2000.0, 12)
    np.testing.assert_allclose(table[:, 0], freqs, rtol=1e-15)

    data = np.loadtxt(half_sine_csv, delimiter=",", skiprows=1)
    direct = np.asarray(shock_response_spectrum(data[:, 1:].T, 1 / FS, freqs))
    # the command filters the record in m/s² and converts back: equal up to the recursion's
    # round-off on data scaled by g₀
    np.testing.assert_allclose(table[:, 1:], direct.T, rtol=1e-10)
    np.testing.assert_allclose(table[:, 2], 0.5 * table[:, 1], rtol=1e-12)


def test_srs_says_what_it_does_on_long_work(half_sine_csv, tmp_path, capsys, monkeypatch):
    from diffmbs.app import _srs_command

    monkeypatch.setattr(_srs_command, "LONG_WORK", 0)  # every record counts as long here
    code, _, err = _srs([half_sine_csv, "--fmax", "2000", "--out", tmp_path], capsys)
    assert code == 0 and err.startswith("diffmbs srs: ") and " samples × " in err


def test_srs_output_units_differ_by_standard_gravity(half_sine_csv, tmp_path, capsys):
    common = [half_sine_csv, "--units", "g", "--fmax", "2000", "--out", tmp_path]
    assert _srs([*common, "--name", "in_g"], capsys)[0] == 0
    assert _srs([*common, "--name", "in_si", "--output-units", "m/s2"], capsys)[0] == 0
    header, in_si = _read_output(tmp_path / "in_si_srs.csv")
    _, in_g = _read_output(tmp_path / "in_g_srs.csv")
    assert header[1] == "half_sine:x [m/s2]"
    np.testing.assert_allclose(in_si[:, 1:] / in_g[:, 1:], 9.80665, rtol=1e-13)


def test_srs_q_and_damping_and_kinds(half_sine_csv, tmp_path, capsys):
    common = [half_sine_csv, "--units", "g", "--fmax", "2000", "--out", tmp_path]
    for name, extra in [
        ("d", ["--damping", "0.05"]),
        ("q10", ["--q", "10"]),
        ("q20", ["--q", "20"]),
        ("pv", ["--kind", "pseudo_velocity"]),
    ]:
        assert _srs([*common, "--name", name, *extra], capsys)[0] == 0
    d, q10, q20 = (_read_output(tmp_path / f"{n}_srs.csv")[1] for n in ("d", "q10", "q20"))
    np.testing.assert_array_equal(d, q10)
    channels = np.loadtxt(half_sine_csv, delimiter=",", skiprows=1)[:, 1:].T
    direct = shock_response_spectrum(channels, 1 / FS, q20[:, 0], damping=0.025)
    np.testing.assert_allclose(q20[:, 1:], np.asarray(direct).T, rtol=1e-12)
    assert np.max(q20[:, 1] / q10[:, 1]) > 1.02
    header, pv = _read_output(tmp_path / "pv_srs.csv")
    assert header[1] == "half_sine:x [m/s]"
    direct = shock_response_spectrum(channels * G, 1 / FS, pv[:, 0], kind="pseudo_velocity")
    np.testing.assert_allclose(pv[:, 1:], np.asarray(direct).T, rtol=1e-12)


def test_srs_default_fmax_and_reference(half_sine_csv, tmp_path, capsys):
    ref = tmp_path / "spec.csv"
    ref.write_text("frequency_Hz,limit_g\n10,1\n100,10\n1000,100\n8000,100\n")
    code, out, err = _srs(
        [half_sine_csv, "--units", "g", "--reference", ref, "--out", tmp_path], capsys
    )
    assert code == 0, err
    assert "fs/2.5" in err and "8000 Hz" in err
    freqs = _read_output(tmp_path / "half_sine_srs.csv")[1][:, 0]
    assert freqs[0] == 10.0 and 7000 < freqs[-1] <= 8000
    assert (tmp_path / "half_sine_srs.png").stat().st_size > 10_000


def _one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("diffmbs: error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_srs_errors_are_one_line_with_status_2(half_sine_csv, tmp_path, capsys):
    code, _, err = _srs([tmp_path / "missing.csv"], capsys)
    _one_line_error(code, err, "missing.csv", "does not exist")
    code, _, err = _srs([half_sine_csv, "--units", "furlongs"], capsys)
    _one_line_error(code, err, "--units", "furlongs")
    code, _, err = _srs([half_sine_csv, "--fmax", "10000", "--out", tmp_path], capsys)
    _one_line_error(code, err, "Nyquist", "10000 Hz", "half_sine")
    code, _, err = _srs([half_sine_csv, "--q", "0.2", "--out", tmp_path], capsys)
    _one_line_error(code, err, "--q")
    code, _, err = _srs([half_sine_csv, "--damping", "0.05", "--q", "10"], capsys)
    _one_line_error(code, err, "not allowed")

    bad = tmp_path / "bad.csv"
    bad.write_text("time,a\n0,1\n0.1,oops\n0.2,1\n")
    code, _, err = _srs([bad, "--out", tmp_path], capsys)
    _one_line_error(code, err, "bad.csv", "row 2", "'a'", "'oops'")
    assert not (tmp_path / "bad_srs.csv").exists()


def test_help_explains_srs_for_test_engineers(capsys):
    assert cli.main(["srs", "--help"]) == 0
    text = capsys.readouterr().out
    for fragment in [
        "maximax",
        "Q = 1/(2ζ)",
        "Q = 10",
        "5 %",
        "MIL-STD-810",
        "header row",
        "seconds",
        "9.80665",
        "example",
        *KINDS,
    ]:
        assert fragment in text, fragment
    assert set(_srs_command.KIND_HELP) == set(KINDS)
    assert cli.main(["--help"]) == 0
    assert "srs" in capsys.readouterr().out


def test_python_dash_m_diffmbs(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["diffmbs", "srs", "--help"])
    with pytest.raises(SystemExit) as info:
        runpy.run_module("diffmbs", run_name="__main__")
    assert info.value.code == 0
    assert "maximax" in capsys.readouterr().out


def test_demo_writes_spectra_close_to_published(tmp_path, capsys):
    assert demo.main(["--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "max |difference|" in out
    for component in ("h1", "h2"):
        assert (tmp_path / f"RSN8883_{component}_srs.png").stat().st_size > 10_000
        header, table = _read_output(tmp_path / f"RSN8883_{component}_srs.csv")
        assert header[0] == "frequency_Hz" and header[1].endswith("[g]")
        assert table[0, 0] == pytest.approx(0.05) and 40 / 2 ** (1 / 12) < table[-1, 0] <= 40
        assert np.all(np.isfinite(table)) and np.all(table > 0)

    header, comparison = _read_output(tmp_path / "RSN8883_comparison.csv")
    assert header == [
        "frequency_Hz",
        "h1_computed_g",
        "h1_published_g",
        "h2_computed_g",
        "h2_published_g",
    ]
    assert comparison[-1, 0] == pytest.approx(20.0)  # fs/fn >= 10 only
    for computed, published in ((1, 2), (3, 4)):
        diff = np.abs(comparison[:, computed] / comparison[:, published] - 1)
        assert diff.max() < 0.005
