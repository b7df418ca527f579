"""``diffmbs sweep`` at scale: resumable after a crash, and split over two processes joined by
``jax.distributed`` on the loopback address. References: the same sweep run whole in one
process, and the loss recomputed row by row by :func:`identification.Problem.loss`."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from diffmbs.app import load_job, problem_from_job, run_sweep_job

DEMO = Path(__file__).parents[1] / "data" / "mwsm"
SWEEP = pytest.mark.xdist_group("sweep_job")  # one worker compiles the demo's batch once


def demo_job(tmp_path: Path, samples: int = 6, chunk_size: int = 2, design: str = "lhs") -> Path:
    """The bundled demo job (lumped MWSM, two tests, measured SRS) with a ``[sweep]`` table."""
    text = (DEMO / "fit_demo.toml").read_text()
    for name in ("test_1ft_srs.csv", "test_2ft_srs.csv"):
        text = text.replace(f'"{name}"', f'"{(DEMO / name).as_posix()}"')
    text += f'\n[sweep]\ndesign = "{design}"\nsamples = {samples}\nseed = 3\n'
    text += f"chunk_size = {chunk_size}\n"
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return path


def read_table(csv: Path) -> tuple[list[str], np.ndarray]:
    with open(csv) as f:
        header = f.readline().rstrip("\n").split(",")
    return header, np.loadtxt(csv, delimiter=",", skiprows=1, ndmin=2)


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    """The demo sweep run whole in this process: ``(job, CSV)``."""
    folder = tmp_path_factory.mktemp("sweep")
    job = demo_job(folder)
    return job, run_sweep_job(job, folder / "whole", progress=False)


@SWEEP
def test_sweep_writes_csv_parquet_and_a_picture_and_resumes_after_a_crash(
    tmp_path, monkeypatch, one_process
):
    """Six Latin-hypercube sets in chunks of two. A crash in the third chunk leaves two
    finished chunks; ``resume`` computes only the third and the table equals an uninterrupted
    run's, whose losses are :meth:`Problem.loss` at each row (to 1e-6)."""
    import pyarrow.parquet as pq

    import identification._sweep as sweep_module

    job, whole = one_process
    header, table = read_table(whole)
    assert header[-1] == "loss_dB2" and table.shape == (6, len(header))
    problem = problem_from_job(load_job(job), measured=True)
    space = problem.space
    for row in table[:2]:
        z = space.to_unconstrained(row[:-1])
        # (the round trip through z moves the parameters in their last bits, which the
        # adaptive steps turn into ~1e-8 of the loss)
        assert row[-1] == pytest.approx(float(problem.loss(z)), rel=1e-6)
    parquet = pq.read_table(whole.parent / "sweep.parquet")
    assert parquet.column_names == header
    np.testing.assert_array_equal(np.column_stack([c.to_numpy() for c in parquet.columns]), table)
    assert (whole.parent / "sweep.png").stat().st_size > 10_000

    batched = sweep_module._batched
    calls = []

    def crashing(problem, values, output):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("killed")
        return batched(problem, values, output)

    monkeypatch.setattr(sweep_module, "_batched", crashing)
    with pytest.raises(RuntimeError, match="killed"):
        run_sweep_job(job, tmp_path / "crashed", progress=False)
    assert len(list((tmp_path / "crashed" / "sweep_chunks").glob("chunk_*.npz"))) == 2
    calls.clear()
    resumed = run_sweep_job(job, tmp_path / "crashed", resume=True, progress=False)
    assert len(calls) == 1  # only the unfinished chunk
    np.testing.assert_array_equal(read_table(resumed)[1], table)

    other = demo_job(tmp_path, samples=8)  # a different sweep in the same folder
    with pytest.raises(ValueError, match=r"chunk_00000_p0.npz: values_sha256 .* differs"):
        run_sweep_job(other, tmp_path / "crashed", resume=True, progress=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@SWEEP
@pytest.mark.slow  # two processes over Gloo, ~25 s: make test-slow
def test_two_processes_split_the_sweep_and_agree_with_one(tmp_path, one_process):
    """``diffmbs sweep --coordinator 127.0.0.1:PORT --processes 2 --process-id I``: two CPU
    processes (one device each) compute half of each chunk and gather the other half over
    Gloo; process 0 writes the table, which equals the one-process run's to 1e-6 (each process
    runs batches of one row, a different compiled program from the one-process batch of two:
    its arithmetic rounds differently and the adaptive steps carry that to ~1e-7)."""
    job, one = one_process
    address = f"127.0.0.1:{_free_port()}"
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)  # one CPU device per process
    command = [sys.executable, "-m", "diffmbs.app.cli", "sweep", str(job), "--out",
               str(tmp_path / "two"), "--coordinator", address, "--processes", "2"]  # fmt: skip
    procs = [subprocess.Popen([*command, "--process-id", str(i)], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for i in (0, 1)]  # fmt: skip
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
    assert outs[0][0].strip().endswith("sweep.csv") and "sweep.csv" not in outs[1][0]
    two = read_table(tmp_path / "two" / "sweep.csv")[1]
    np.testing.assert_allclose(two, read_table(one)[1], rtol=1e-6)


CONSTRAINED_SWEEP = """
import json, sys
import jax
jax.config.update("jax_num_cpu_devices", int(sys.argv[1]))
import diffmbs
diffmbs.configure()
sys.path.insert(0, sys.argv[2])
import jax.numpy as jnp, numpy as np
import identification as idf
from multibody_models import pendulum
ts = jnp.linspace(0.0, 0.3, 7)
def reactions(model):  # the hinge's reactions: multipliers of a linear solve (lineax)
    sol = diffmbs.simulate(model, *model.initial_state(), ts, rtol=1e-8, atol=1e-10, throw=False)
    return jnp.sum(jnp.abs(sol.sensors["reaction"]), axis=1) + 1.0
swing = idf.FunctionExperiment("swing", pendulum(), reactions, np.ones(ts.size), misfit="linear")
space = idf.ParameterSpace([idf.Parameter("m", "bob.mass", 0.5, 5.0, 1.0, "log")])
out = idf.sweep(idf.Problem(space, [swing]), np.linspace(0.6, 4.0, 5)[:, None], chunk_size=4)
print(json.dumps({"devices": jax.device_count(), "swing": np.asarray(out["swing"]).tolist()}))
"""


def test_a_sweep_over_two_devices_of_a_model_with_linear_solves_equals_one_device():
    """A pendulum in body coordinates (its joint reactions solve a linear system with lineax,
    which refuses the sharded vectors of ``shard_map``) swept over two CPU devices in a fresh
    process (chunks of 4 rows, 2 per device; the last chunk padded) equals the same sweep on
    one device, row by row."""

    def run(devices: int) -> dict:
        env = {**os.environ, "JAX_PLATFORMS": "cpu"}
        env.pop("XLA_FLAGS", None)
        out = subprocess.run([sys.executable, "-c", CONSTRAINED_SWEEP, str(devices),
                              str(Path(__file__).parent)], env=env, capture_output=True,
                             text=True, timeout=600, check=False)  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    one, two = run(1), run(2)
    assert (one["devices"], two["devices"]) == (1, 2)
    reactions = np.asarray(one["swing"])
    assert reactions.shape == (5, 7) and np.all(np.diff(reactions[:, -1]) > 0)  # heavier bobs
    np.testing.assert_allclose(two["swing"], reactions, rtol=1e-9)


def test_sweep_table_errors_name_the_key(tmp_path):
    from diffmbs.app import ConfigError

    with pytest.raises(ConfigError, match=r"sweep.samples: Sobol' points .* got 6 \(use 8\)"):
        load_job(demo_job(tmp_path, design="sobol"))
    with pytest.raises(ConfigError, match=r"sweep.chunk_size: expected an integer >= 1, got 0"):
        load_job(demo_job(tmp_path, chunk_size=0))


def test_sobol_points_stratify_every_parameter():
    """Scrambled Sobol' points are a (0, m, 1)-net in each coordinate: 2ᵐ points put exactly
    one in each of 2ᵐ equal slices of every parameter's sampling box (log scale for log
    parameters); a count that is not a power of 2 is refused."""
    from identification import Parameter, ParameterSpace, sample_values

    space = ParameterSpace([Parameter("k", "a", lower=1e3, upper=1e6, initial=1e4),
                            Parameter("c", "b", lower=0.0, upper=2.0, initial=1.0,
                                      transform="bounded")])  # fmt: skip
    values = sample_values(space, 16, method="sobol", seed=5)
    box = space.to_box(values)
    for column in box.T:
        assert sorted(np.floor(column * 16).astype(int)) == list(range(16))
    with pytest.raises(ValueError, match="powers of 2; got n = 12"):
        sample_values(space, 12, method="sobol")
