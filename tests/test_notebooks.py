"""The worked-example notebooks run end to end (QUICK settings) and reach their goal."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
CELL_TIMEOUT_S = 300


def _execute(path: Path, env: dict[str, str]):
    """Execute the notebook at ``path`` in a kernel of this interpreter, with ``env`` set."""
    nb = nbformat.read(path, as_version=4)
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        client = nbclient.NotebookClient(
            nb,
            timeout=CELL_TIMEOUT_S,
            kernel_name="python3",  # jupyter_client runs the native kernel with sys.executable
            resources={"metadata": {"path": str(ROOT)}},
            allow_errors=False,
        )
        client.execute()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return nb


def _stdout(nb) -> str:
    chunks = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream" and output.get("name") == "stdout":
                chunks.append(output.get("text", ""))
    return "".join(chunks)


def _quick_summary(path: Path) -> dict:
    """Run the notebook in quick mode; its last cell prints one ``NOTEBOOK_SUMMARY`` JSON."""
    env = {
        "DIFFMBS_NOTEBOOK_QUICK": "1",
        "MPLBACKEND": "Agg",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    nb = _execute(path, env)
    lines = [line for line in _stdout(nb).splitlines() if line.startswith("NOTEBOOK_SUMMARY ")]
    assert len(lines) == 1, "the last cell prints one NOTEBOOK_SUMMARY line"
    return json.loads(lines[0].removeprefix("NOTEBOOK_SUMMARY "))


def test_notebooks_are_committed_without_outputs():
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs, f"{path.name}: stored outputs"
                assert cell.execution_count is None, f"{path.name}: stored execution count"


@pytest.mark.skipif(sys.platform == "win32", reason="kernel start-up is slow and flaky there")
def test_srs_notebook_reproduces_the_published_spectrum_of_a_real_record():
    """PEER NGA-West2's published PSA of record 8883 (data/peer_nga_west2): 0.5 % where the
    record has at least 10 samples per cycle, as test_srs checks; 2.3 % at most above (3 %
    allowed); the 100 Hz point, the Nyquist frequency, is the peak ground acceleration."""
    summary = _quick_summary(NOTEBOOKS / "00_srs_of_a_record.ipynb")
    assert summary["quick"] is True and summary["n_well_sampled"] > 90
    assert summary["max_db_well_sampled"] < 20 * math.log10(1.005)
    assert summary["max_db_all"] < 20 * math.log10(1.03)
    assert summary["maximax_is_envelope"]
    assert summary["gradient_error"] < 1e-10  # the SRS is linear in the record's scale
    # the published 0.01 s point: a 100 Hz oscillator nearly follows the ground (0.3 %)
    assert summary["pga_ratio"] == pytest.approx(1.0, rel=1e-2)


@pytest.mark.skipif(sys.platform == "win32", reason="kernel start-up is slow and flaky there")
def test_multibody_basics_notebook_meets_the_pendulums_closed_form():
    """A physical pendulum released from the horizontal, in full and joint coordinates: the
    elliptic-integral period, energy, the hinge reaction by Newton, and dT/dI_yy = T/(2 I_O)
    by forward mode (measured 1e-12, 3e-11, 2e-11, 9e-13)."""
    summary = _quick_summary(NOTEBOOKS / "00b_multibody_basics.ipynb")
    assert summary["quick"] is True and summary["n_q"] == {"full": 7, "joint": 1}
    for name in ("full", "joint"):
        assert summary["period_error"][name] < 1e-8
        assert summary["energy_drift"][name] < 1e-9
    assert summary["reaction_error"] < 1e-8
    assert summary["derivative_error"] < 1e-7


@pytest.mark.skipif(sys.platform == "win32", reason="kernel start-up is slow and flaky there")
def test_lumped_mwsm_identification_notebook_runs_and_fits():
    path = NOTEBOOKS / "01_lumped_mwsm_identification.ipynb"
    summary = _quick_summary(path)
    assert summary["quick"] is True
    assert 1 <= summary["iterations"] <= 3
    assert summary["final_loss"] < summary["initial_loss"]
    assert set(summary["rms_db"]) == {"drop_1ft", "drop_2ft"}
    for name, rms in summary["rms_db"].items():
        assert 0.0 < rms < 6.0, (name, rms)


@pytest.mark.long
@pytest.mark.skipif(sys.platform == "win32", reason="kernel start-up is slow and flaky there")
def test_mwsm_3d_notebook_builds_simulates_and_draws():
    """Quick mode: the channels lumped, the run from just before the blow, in joint coordinates
    (bed, anvil, equipment floating: 3 × 7, the hammer's angle)."""
    path = NOTEBOOKS / "02_mwsm_3d.ipynb"
    summary = _quick_summary(path)
    assert summary["quick"] is True and summary["n_q"] == 3 * 7 + 1
    # the hammer starts 1 mm below the anvil at sqrt(2 g h) for 2 ft: 3.46 m/s
    assert summary["hammer_speed_m_s"] == pytest.approx((2 * 9.80665 * 0.6096) ** 0.5, rel=0.01)
    assert 10.0 < summary["peak_g"] < 1000.0 and summary["srs_peak_g"] > summary["peak_g"] * 0.5
