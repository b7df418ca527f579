"""The lab-format readers (``diffmbs.io.read_record`` on TDMS, MDF 4, UFF 58, MATLAB and HDF5):
each reads back a file written here by that format's own library (npTDMS, asammdf, pyuff,
SciPy, h5py), channels converted to m/s² by the unit the file states."""

from pathlib import Path

import numpy as np
import pytest

from diffmbs.io import STANDARD_GRAVITY, read_record

RATE = 2000.0
TIME = np.arange(400) / RATE
TOP_G = np.sin(2 * np.pi * 50.0 * TIME)  # g
ANVIL = 30.0 * np.cos(2 * np.pi * 120.0 * TIME)  # m/s²


def check(record, names=("top", "anvil"), rtol=1e-12):
    assert list(record.channels) == list(names)
    assert record.dt == pytest.approx(1 / RATE, rel=rtol)
    np.testing.assert_allclose(record.time, TIME, atol=rtol)
    np.testing.assert_allclose(record.channels["top"], TOP_G * STANDARD_GRAVITY, rtol=rtol,
                               atol=rtol)  # fmt: skip
    if "anvil" in names:
        np.testing.assert_allclose(record.channels["anvil"], ANVIL, rtol=rtol, atol=rtol)


def write_tdms(path, times=None):
    from nptdms import ChannelObject, TdmsWriter

    def wave(name, data, unit):
        props = {"wf_increment": 1 / RATE, "wf_start_offset": 0.0, "unit_string": unit}
        return ChannelObject("accel", name, data, properties=props)

    with TdmsWriter(path) as writer:
        writer.write_segment([wave("top", TOP_G, "g"), wave("anvil", ANVIL, "m/s^2")])
    return path


def test_tdms_channels_by_group_and_unit(tmp_path):
    path = write_tdms(tmp_path / "blow.tdms")
    record = read_record(path)
    record.channels["top"] = record.channels.pop("accel/top")
    record.channels["anvil"] = record.channels.pop("accel/anvil")
    check(record)
    one = read_record(path, channels=["accel/anvil"])
    assert list(one.channels) == ["accel/anvil"]
    with pytest.raises(ValueError, match=r"blow.tdms: no channel 'top'; the file has accel/top"):
        read_record(path, channels=["top"])
    with pytest.raises(ValueError, match=r"channel 'accel/top' is in 'g' by the file, not 'm/s2'"):
        read_record(path, units="m/s2")


def test_mdf4_channels_with_their_units_and_master_times(tmp_path):
    """A logger's MDF 4 file: two channels in one data group, and a second group at half the
    rate whose channel repeats a name (``top@1``)."""
    from asammdf import MDF, Signal

    path = tmp_path / "logger.mf4"
    mdf = MDF(version="4.10")
    mdf.append([Signal(TOP_G, TIME, name="top", unit="g"),
                Signal(ANVIL, TIME, name="anvil", unit="m/s^2")])  # fmt: skip
    mdf.append([Signal(TOP_G[::2], TIME[::2], name="top", unit="g")])
    mdf.save(path, overwrite=True)
    mdf.close()
    check(read_record(path, channels=["top", "anvil"]))
    slow = read_record(path, channels=["top@1"])
    assert slow.dt == pytest.approx(2 / RATE, rel=1e-12)
    with pytest.raises(ValueError, match=r"channel 'top@1' is not sampled at the times of 'top'"):
        read_record(path)
    with pytest.raises(ValueError, match=r"channel 'top' is in 'g' by the file, not 'm/s2'"):
        read_record(path, channels=["top"], units="m/s2")
    bad = tmp_path / "bad.mf4"
    bad.write_bytes(b"TDSm" + bytes(64))
    with pytest.raises(ValueError, match=r"bad.mf4: not a readable MDF file"):
        read_record(bad)


def test_uff58_sets_named_by_id1(tmp_path):
    import pyuff

    common = dict(func_type=1, rsp_node=1, rsp_dir=3, ref_node=0, ref_dir=0,
                  ordinate_spec_data_type=12, orddenom_spec_data_type=0,
                  z_axis_spec_data_type=0, abscissa_spec_data_type=17,
                  abscissa_axis_units_lab="s")  # fmt: skip
    path = tmp_path / "blow.uff"
    pyuff.UFF(str(path)).write_sets(
        [pyuff.prepare_58(id1="top", data=TOP_G, x=TIME, ordinate_axis_units_lab="g", **common),
         pyuff.prepare_58(id1="anvil", data=ANVIL, x=TIME, ordinate_axis_units_lab="m/s^2",
                          **common)],
        mode="add",
    )  # fmt: skip
    check(read_record(path), rtol=1e-10)  # text with 13 significant digits


def test_mat_time_in_ms_and_channels_in_the_unit_given(tmp_path):
    import scipy.io

    path = tmp_path / "blow.mat"
    scipy.io.savemat(path, {"time_ms": TIME * 1e3, "top": TOP_G, "anvil": ANVIL / STANDARD_GRAVITY,
                            "note": "drop 2 ft"})  # fmt: skip
    record = read_record(path, units="g")
    check(record)
    with pytest.raises(ValueError, match=r"blow.mat: no time variable 'clock'; it has"):
        read_record(path, time_column="clock")


def test_hdf5_units_from_attributes_and_resampling(tmp_path):
    import h5py

    path = tmp_path / "blow.h5"
    with h5py.File(path, "w") as f:
        f["time"] = TIME
        f.create_dataset("top", data=TOP_G).attrs["units"] = "g"
        f.create_dataset("anvil", data=ANVIL).attrs["units"] = "m/s²"
        f.create_dataset("strain", data=np.ones(3))  # another length: not a channel
    assert sorted(read_record(path).channels) == ["anvil", "top"]  # HDF5 lists names sorted
    check(read_record(path, channels=["top", "anvil"]))

    jittered = TIME + 1e-6 * np.sin(np.arange(TIME.size))  # a logger's clock: not uniform
    with h5py.File(tmp_path / "jitter.h5", "w") as f:
        f["t"] = jittered
        f.create_dataset("top", data=TOP_G).attrs["units"] = "g"
    with pytest.raises(ValueError, match=r"the time of channel 'top' is not uniformly sampled"):
        read_record(tmp_path / "jitter.h5")
    record = read_record(tmp_path / "jitter.h5", resample=True)
    np.testing.assert_allclose(np.diff(record.time), np.median(np.diff(jittered)), rtol=1e-9)
    expected = np.interp(record.time, jittered, TOP_G) * STANDARD_GRAVITY
    np.testing.assert_allclose(record.channels["top"], expected, rtol=1e-12, atol=1e-12)


def test_unreadable_and_unknown_units_are_named(tmp_path):
    bad = tmp_path / "broken.tdms"
    bad.write_bytes(b"not a tdms file at all")
    with pytest.raises(ValueError, match=r"broken.tdms: not a readable TDMS file"):
        read_record(bad)
    import h5py

    with h5py.File(tmp_path / "volts.h5", "w") as f:
        f["time"] = TIME
        f.create_dataset("top", data=TOP_G).attrs["units"] = "V"
    with pytest.raises(ValueError, match=r"channel 'top' is in 'V', not an acceleration unit"):
        read_record(tmp_path / "volts.h5")


def test_a_job_fits_one_channel_of_a_lab_file(tmp_path):
    """``history = "blow.h5"`` with ``history_channel``: the test's time-domain experiment takes
    that channel, in m/s² by the file's own unit (not the job's [srs] unit); without the key a
    file of two channels is refused with the key to set."""
    import h5py

    from diffmbs.app import ConfigError, load_job, problem_from_job

    with h5py.File(tmp_path / "blow.h5", "w") as f:
        f["time"] = TIME
        f.create_dataset("top", data=TOP_G).attrs["units"] = "g"
        f.create_dataset("anvil", data=ANVIL).attrs["units"] = "m/s^2"
    demo = Path(__file__).parents[1] / "data" / "mwsm" / "fit_demo.toml"
    text = demo.read_text()
    for name in ("test_1ft_srs.csv", "test_2ft_srs.csv"):
        text = text.replace(f'"{name}"', f'"{(demo.parent / name).as_posix()}"')
    text = text.replace('srs = "', 'history = "blow.h5"\nhistory_channel = "top"\nsrs = "', 1)
    job = tmp_path / "job.toml"
    job.write_text(text)
    history = problem_from_job(load_job(job)).experiment("drop_1ft:history")
    kept = TIME <= 0.15 + 1e-9  # the job's duration_s: later samples are not fitted
    np.testing.assert_allclose(history.ts, TIME[kept], rtol=1e-12)
    np.testing.assert_allclose(history.measured, TOP_G[kept] * STANDARD_GRAVITY, rtol=1e-12)
    job.write_text(text.replace('history_channel = "top"\n', ""))
    with pytest.raises(ConfigError, match=r"experiments\[0\].history: blow.h5 has the channels "
                                          r"anvil, top; name .* with history_channel"):  # fmt: skip
        problem_from_job(load_job(job))


def test_srs_command_reads_a_tdms_file(tmp_path):
    """``diffmbs srs blow.tdms``: one curve per channel, in g as asked (the file's channels are
    in g and m/s²), equal to the SRS of the same samples written as CSV."""
    from diffmbs.app import main
    from diffmbs.io import write_csv_atomic

    write_tdms(tmp_path / "blow.tdms")
    write_csv_atomic(tmp_path / "blow.csv", ["time", "accel/top", "accel/anvil"],
                     [TIME, TOP_G * STANDARD_GRAVITY, ANVIL])  # fmt: skip
    for source in ("blow.tdms", "blow.csv"):
        args = ["srs", str(tmp_path / source), "--output-units", "g", "--fmin", "20",
                "--fmax", "500", "--out", str(tmp_path / source.replace(".", "_"))]  # fmt: skip
        assert main(args) == 0
    tdms = np.genfromtxt(tmp_path / "blow_tdms" / "blow_srs.csv", delimiter=",", names=True)
    csv = np.genfromtxt(tmp_path / "blow_csv" / "blow_srs.csv", delimiter=",", names=True)
    assert tdms.dtype.names == csv.dtype.names and len(tdms.dtype.names) == 3
    for name in tdms.dtype.names:
        np.testing.assert_allclose(tdms[name], csv[name], rtol=1e-12)
