"""Batches of simulations split over several CPU devices (``diffmbs.configure(cpu_devices=N)``,
the command line's ``--cpu-devices``): a Jacobian by differences and a global search's losses
computed on two devices in a fresh process equal those of one device in this one."""

import argparse
import json
import subprocess
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import diffmbs
import identification as idf
from diffmbs.app import load_job, problem_from_job
from diffmbs.app.cli import _cpu_devices

DEMO_JOB = Path(__file__).parents[1] / "data" / "mwsm" / "fit_demo.toml"

PROBE = """
import json, sys
import diffmbs
diffmbs.configure(cpu_devices=2)
import jax, jax.numpy as jnp, numpy as np
import identification as idf
from identification._kernels import kernel_arguments, sum_squares_batch_kernel
from diffmbs.app import load_job, problem_from_job
base = problem_from_job(load_job(sys.argv[1]))
problem = idf.Problem(base.space, base.experiments, jac="differences", difference_step=0.02)
r, jac = problem.residuals_and_jacobian(jnp.asarray(problem.initial_z))
zs = np.asarray(json.loads(sys.argv[2]))
experiment = problem.experiments[0]
indices, paths = kernel_arguments(problem.space, experiment)
values = problem.space.from_unconstrained(jnp.asarray(zs[:4]))[:, jnp.asarray(indices)]
sum_squares = sum_squares_batch_kernel(experiment, paths, values)[0]
print(json.dumps({"devices": len(jax.devices()), "used": len(sum_squares.sharding.device_set),
                  "r": np.asarray(r).tolist(), "jac": np.asarray(jac).tolist(),
                  "losses": idf.batched_loss(problem, zs).tolist()}))
"""


def test_batches_on_two_cpu_devices_equal_one_device():
    """The demo fit's Jacobian by differences (11 runs a test, an odd count: padded) and the
    losses of 5 candidates, on two CPU devices, equal this process's one-device values; the
    batch really ran on both devices."""
    base = problem_from_job(load_job(DEMO_JOB))
    problem = idf.Problem(base.space, base.experiments, jac="differences", difference_step=0.02)
    z0 = np.asarray(problem.initial_z)
    zs = z0 + 0.1 * np.random.default_rng(0).standard_normal((5, z0.size))
    out = subprocess.run([sys.executable, "-c", PROBE, str(DEMO_JOB), json.dumps(zs.tolist())],
                         capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    two = json.loads(out.stdout.strip().splitlines()[-1])
    assert two["devices"] == 2 and two["used"] == 2
    r, jac = map(np.asarray, problem.residuals_and_jacobian(jnp.asarray(z0)))
    # Each device runs a smaller batch, a different compiled program: its rounding may differ,
    # and adaptive steps carry that to ~1e-7 at most.
    np.testing.assert_allclose(two["r"], r, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(two["jac"], jac, rtol=1e-6, atol=1e-6 * np.abs(jac).max())
    np.testing.assert_allclose(two["losses"], idf.batched_loss(problem, zs), rtol=1e-6)


def test_cpu_devices_of_a_run_and_configure_errors():
    """``--cpu-devices`` wins; a multi-process sweep takes one device a process (several may
    share a machine); in a process whose backend has started the devices stay as they are.
    ``configure`` refuses a count below 1 and warns when it comes too late to change it."""
    assert _cpu_devices(argparse.Namespace(cpu_devices=3, processes=2)) == 3
    assert _cpu_devices(argparse.Namespace(cpu_devices=None, processes=2)) == 1
    jax.devices()  # the backend starts
    assert _cpu_devices(argparse.Namespace(cpu_devices=None)) is None  # started: as they are
    with pytest.raises(ValueError, match="cpu_devices must be >= 1, got 0"):
        diffmbs.configure(cpu_devices=0)
    current = len(jax.devices("cpu"))
    with pytest.warns(UserWarning, match=f"cpu_devices={current + 1} takes no effect"):
        diffmbs.configure(cpu_devices=current + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        diffmbs.configure(cpu_devices=current)  # what it already is: nothing to say
