"""Command-line interface: ``diffmbs <command> ...`` (also ``python -m diffmbs``).

Each command is one ``add_<command>_command(subparsers)`` function that builds its parser and
sets ``run`` to the function doing the work; :data:`COMMANDS` lists them. Adding a command is
adding one such function and one entry.

Errors the user can fix (bad files, bad options) surface as ``ValueError`` and are printed as a
single line ``diffmbs: error: <message>`` with exit status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from diffmbs._settings import configure
from diffmbs.io import (
    AccelerationRecord,
    acceleration_scale,
    read_spectrum_csv,
    write_csv_atomic,
)

from ._runs import (
    output_lock,
    run_fit_job,
    run_sensitivity_job,
    simulate_experiment,
)
from ._schema import load_job
from ._srs_command import add_srs_command, run_srs
from ._sweep_job import join_processes, run_sweep_job
from ._wear_job import add_wear_command

__all__ = ["COMMANDS", "build_parser", "main"]

PROG = "diffmbs"


class _Parser(argparse.ArgumentParser):
    """Argument parser whose usage errors are one line on stderr, exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{PROG}: error: {message} (see '{self.prog} --help')\n")


JOB_FILE_HELP = """\
The job file (TOML) names the model: a lumped shock-machine model, "multibody" with a model
description file, an installed model (entry point "diffmbs.models") or "package.module:function";
then [simulation], [srs], [[experiments]], [[parameters]], [fit], [sweep] and [wear]. See
diffmbs/app/_schema.py, data/mwsm/fit_demo.toml and data/multibody/drop_fit.toml.
"""


def _add_job_command(subparsers, name: str, help_text: str, description: str):
    """A sub-parser taking a TOML job file and ``--out``, shared by the job commands."""
    parser = subparsers.add_parser(
        name,
        help=help_text,
        description=description + "\n" + JOB_FILE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("config", type=Path, metavar="CONFIG", help="TOML job file")
    parser.add_argument(
        "--out", type=Path, default=None, help="output folder (default runs/<job file stem>)"
    )
    return parser


def _out_dir(args: argparse.Namespace) -> Path:
    return args.out or Path("runs") / args.config.stem


# --------------------------------------------------------------------------------------------
# simulate
# --------------------------------------------------------------------------------------------

SIMULATE_DESCRIPTION = """\
Simulate a shock test from a TOML job file: one run per [[experiments]] table (or one run),
from the model's initial state.

For every experiment it writes under --out:
  NAME_timehistory.csv  time_s and every sensor of the model; accelerations in the [srs] unit
  NAME_srs.csv/.png     the SRS of the [simulation] sensor, at the frequencies of the
                        experiment's measured SRS file if it has one (drawn as the reference
                        with +/-3 and +/-6 dB bands), else over [srs] f_min..f_max
"""


def add_simulate_command(subparsers) -> None:
    parser = _add_job_command(
        subparsers, "simulate",
        "simulate the tests of a TOML job file; write time histories and SRS",
        SIMULATE_DESCRIPTION,
    )  # fmt: skip
    parser.set_defaults(run=_run_simulate_command)


def _run_simulate_command(args: argparse.Namespace) -> None:
    from tqdm import tqdm

    job = load_job(args.config)
    out_dir = _out_dir(args)
    units = job.srs.units
    for experiment in tqdm(job.experiments, desc="simulate", unit="test", disable=None):
        ts, sensors, freqs = simulate_experiment(job, experiment)
        scale = {k: acceleration_scale(units) if "acceleration" in k else 1.0 for k in sensors}
        write_csv_atomic(
            out_dir / f"{experiment.name}_timehistory.csv",
            ["time_s", *(f"{k} [{units if 'acceleration' in k else 'SI'}]" for k in sensors)],
            [ts, *(v / scale[k] for k, v in sensors.items())],
        )
        record = AccelerationRecord(
            experiment.name, float(ts[1] - ts[0]),
            {job.simulation.sensor: sensors[job.simulation.sensor]}, ts,
        )  # fmt: skip
        reference = None
        if experiment.srs_path is not None:
            ref_freqs, ref_values = read_spectrum_csv(experiment.srs_path)
            reference = (ref_freqs, ref_values, f"measured ({experiment.srs_path.name})")
        csv_path, png_path, _ = run_srs(
            [record], freqs, damping=job.srs.damping, kind=job.srs.kind, output_units=units,
            out_dir=out_dir, name=experiment.name, reference=reference,
        )  # fmt: skip
        print(csv_path)
        print(png_path)


# --------------------------------------------------------------------------------------------
# fit, sensitivity, sweep
# --------------------------------------------------------------------------------------------

FIT_DESCRIPTION = """\
Fit model parameters to measured shock response spectra, all tests of a TOML job file jointly.

The misfit is the mean square of 20 log10(SRS_simulated / SRS_measured) over the measured
frequencies of every experiment; gradients come from the simulation itself (forward-mode
automatic differentiation), or with [fit] jacobian = "differences" are slopes over a step (a
misfit rough on a finer scale). The job file's [[parameters]] name the fitted model parameters
with bounds and transforms (per_experiment = true gives each test its own value). With finite
bounds a global search runs first (CMA-ES, each generation one batch of simulations), then the
local fitter ([fit] method: levenberg_marquardt, gauss_newton, adam, lbfgs) from the best
distinct candidates; [fit] global = "none" skips it. With [fit] stages both run in the first
stage (a band or window of the records), the local fitter then through the rest.

Writes into --out: result.json last (parameters, standard deviations and correlations from the
Gauss-Newton covariance, widened when the residuals show model discrepancy; loss history;
per-frequency dB residuals; fraction of points within +/-3 and +/-6 dB), srs_<test>.png (fit
over measurement with +/-3/+/-6 dB bands), convergence.png, correlation.png,
sensitivity_<test>.csv/.png (dB per unit ln(parameter)), identifiability.csv/.png (where in
frequency each parameter acts, per octave band, beside its relative std), with [fit] profiles the
profile-likelihood intervals and with [fit] posterior = "nuts" a NUTS posterior (corner.png,
posterior_samples.csv), and checkpoints of every phase: after an interruption, run the same
command with --resume. One run at a time writes into a folder.
"""

SENSITIVITY_DESCRIPTION = """\
Sensitivity of every test's simulated SRS to each [[parameters]] entry at its initial value:
dB per unit change of ln(parameter), by forward-mode automatic differentiation. Measured SRS
files are not needed (without one, the [srs] f_min..f_max band is used).

Writes into --out: sensitivity_<test>.csv (frequency_hz, one column per parameter) and .png;
identifiability.csv and .png (the rms sensitivity in each octave band, per parameter).
"""

SWEEP_DESCRIPTION = """\
Evaluate the job at many parameter sets over the [[parameters]] bounds, in batches on every
device: a Latin hypercube, scrambled Sobol' points or a full grid ([sweep] design, samples,
seed, chunk_size). With measured SRS files for every test it records the misfit (mean square
dB), else the simulated SRS of every test.

Several processes (on one machine or several) share the work: start the same command in each
with --coordinator HOST:PORT (where process 0 listens), --processes N and --process-id I; they
must share --out. A killed sweep continues with --resume.

Writes into --out: sweep.csv and sweep.parquet, one row per parameter set (the parameters in SI,
then loss_dB2 or one column per test and frequency, in the [srs] unit); sweep.png; the
finished chunks in sweep_chunks/.
"""


def _positive_integer(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def add_fit_command(subparsers) -> None:
    parser = _add_job_command(
        subparsers, "fit", "fit model parameters to measured SRS (TOML job file)", FIT_DESCRIPTION
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue from the checkpoint in --out"
    )
    parser.add_argument(
        "--max-iterations", type=_positive_integer, default=None, metavar="N",
        help="override [fit] max_iterations",
    )  # fmt: skip
    parser.set_defaults(run=_run_fit_command)


def _run_fit_command(args: argparse.Namespace) -> None:
    out_dir = _out_dir(args)
    result = run_fit_job(
        args.config, out_dir, resume=args.resume, max_iterations=args.max_iterations
    )
    print(result.summary())
    print(f"report: {out_dir / 'result.json'}")


def add_sensitivity_command(subparsers) -> None:
    parser = _add_job_command(
        subparsers, "sensitivity", "SRS sensitivity to each parameter (TOML job file)",
        SENSITIVITY_DESCRIPTION,
    )  # fmt: skip
    parser.set_defaults(
        run=lambda args: print(*run_sensitivity_job(args.config, _out_dir(args)).values(), sep="\n")
    )


def add_sweep_command(subparsers) -> None:
    parser = _add_job_command(
        subparsers, "sweep", "batched runs over the parameter bounds (TOML job file)",
        SWEEP_DESCRIPTION,
    )  # fmt: skip
    parser.add_argument(
        "--resume", action="store_true", help="skip the chunks already finished in --out"
    )
    parser.add_argument("--coordinator", metavar="HOST:PORT", default=None,
                        help="join a multi-process sweep through process 0 at this address")
    parser.add_argument("--processes", type=_positive_integer, default=1, metavar="N",
                        help="processes in the run (with --coordinator)")
    parser.add_argument("--process-id", type=int, default=0, metavar="I",
                        help="this process's index, 0 … N-1 (with --coordinator)")  # fmt: skip
    parser.set_defaults(run=_run_sweep_command)


def _run_sweep_command(args: argparse.Namespace) -> None:
    if args.coordinator is not None:
        join_processes(args.coordinator, args.processes, args.process_id)
    elif args.processes > 1:
        raise ValueError("--processes > 1 needs --coordinator HOST:PORT")
    csv = run_sweep_job(args.config, _out_dir(args), resume=args.resume,
                        progress=args.process_id == 0)  # fmt: skip
    if args.process_id == 0:
        print(csv)


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------

COMMANDS: dict[str, Callable[[argparse._SubParsersAction], None]] = {
    "srs": add_srs_command,
    "simulate": add_simulate_command,
    "fit": add_fit_command,
    "sweep": add_sweep_command,
    "sensitivity": add_sensitivity_command,
    "wear": lambda subparsers: add_wear_command(subparsers, _add_job_command),
}
"""Command name → function adding its sub-parser (which sets ``run``)."""


def build_parser() -> argparse.ArgumentParser:
    """The ``diffmbs`` argument parser with one sub-parser per entry of :data:`COMMANDS`."""
    parser = _Parser(
        prog=PROG,
        description="diffmbs: differentiable multibody dynamics and shock response spectra.",
        epilog="Run 'diffmbs COMMAND --help' for the options of a command.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add_command in COMMANDS.values():
        add_command(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``diffmbs`` with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    0 on success (and for ``--help``), 2 for usage errors and for invalid inputs, which are
    reported as one line ``diffmbs: error: <message>`` on stderr.
    """
    configure()  # float64 and the XLA CPU options, before any computation
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, or a usage error already printed
        return exit_.code if isinstance(exit_.code, int) else 2
    try:
        out = getattr(args, "out", None)
        if getattr(args, "config", None) is not None:
            out = _out_dir(args)  # the job commands' default folder
        if out is None or getattr(args, "process_id", 0) != 0:  # process 0 holds the lock
            args.run(args)
        else:
            with output_lock(out):  # one run per output folder
                args.run(args)
    except (ValueError, OSError) as err:
        message = " ".join(str(err).split())
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
