"""``diffmbs sweep`` throughput: one process, one process over two CPU devices, and two
processes joined by ``jax.distributed`` (loopback), side by side on the same job.

The job is the demo's (the lumped MWSM, two tests, measured SRS: every row is two simulations
and their SRS misfit) with a Latin hypercube of ``--samples`` rows, ``--per-device`` rows per
device in each chunk (the same batch on every device in every configuration: on a CPU a
batched adaptive solve costs its slowest row's steps, so the batch size alone moves the
throughput). Each configuration starts fresh processes (as ``diffmbs sweep`` would) that
run :func:`identification.sweep` once on one chunk (compile, timed apart) and then
``--repeats`` times on every row; process 0 reports. Prints a table (median and spread of the
throughput after compiling) and writes ``results/sweep.json``.

    python benchmarks/sweep.py [--samples 1024] [--per-device 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_info, print_table, utc_timestamp, write_json_atomic  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "data" / "mwsm"


def job_file(folder: Path, samples: int, chunk_size: int) -> Path:
    text = (DEMO / "fit_demo.toml").read_text()
    for name in ("test_1ft_srs.csv", "test_2ft_srs.csv"):
        text = text.replace(f'"{name}"', f'"{(DEMO / name).as_posix()}"')
    text += f'\n[sweep]\ndesign = "lhs"\nsamples = {samples}\nchunk_size = {chunk_size}\n'
    path = folder / "sweep_bench.toml"
    path.write_text(text)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(job: Path, repeats: int, coordinator: str | None, processes: int, rank: int) -> None:
    """One process of a configuration: compile on one chunk, then time whole sweeps."""
    from diffmbs import configure

    configure()
    from diffmbs.app import join_processes, load_job, problem_from_job
    from identification import sample_values, sweep

    if coordinator:
        join_processes(coordinator, processes, rank)
    import jax

    spec = load_job(job)
    problem = problem_from_job(spec, measured=True)
    values = sample_values(problem.space, spec.sweep.samples, seed=spec.sweep.seed)
    chunk = spec.sweep.chunk_size
    t0 = time.perf_counter()
    sweep(problem, values[:chunk], output="loss", chunk_size=chunk)
    compile_s = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        losses = sweep(problem, values, output="loss", chunk_size=chunk)
        times.append(time.perf_counter() - t0)
    if jax.process_index() == 0:
        print(json.dumps({"compile_s": compile_s, "times_s": times,
                          "devices": len(jax.devices()),
                          "finite": int(sum(map(bool, losses == losses)))}))  # fmt: skip


def run(folder: Path, samples: int, per_device: int, processes: int, devices: int,
        repeats: int) -> dict:
    job = job_file(folder, samples, per_device * processes * devices)
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}  # fmt: skip
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    command = [sys.executable, __file__, "--worker", str(job), "--repeats", str(repeats)]
    if processes > 1:
        command += ["--coordinator", f"127.0.0.1:{free_port()}", "--processes", str(processes)]
    procs = [subprocess.Popen([*command, "--rank", str(i)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for i in range(processes)]  # fmt: skip
    outs = [p.communicate() for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        if p.returncode != 0:
            raise RuntimeError(err[-2000:])
    line = [x for x in outs[0][0].splitlines() if x.startswith("{")][-1]
    return json.loads(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=1024)
    parser.add_argument("--per-device", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "results" / "sweep.json")
    parser.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--coordinator", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--processes", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        return worker(args.worker, args.repeats, args.coordinator, args.processes, args.rank)
    configs = [("1 process, 1 device", 1, 1), ("1 process, 2 CPU devices", 1, 2),
               ("2 processes (jax.distributed), 1 device each", 2, 1)]  # fmt: skip
    rows, records = [], []
    with tempfile.TemporaryDirectory() as tmp:
        baseline = None
        for label, processes, devices in configs:
            result = run(Path(tmp), args.samples, args.per_device, processes, devices,
                         args.repeats)  # fmt: skip
            times = result["times_s"]
            median = statistics.median(times)
            baseline = baseline or median
            rate = args.samples / median
            rows.append([label, f"{result['compile_s']:.1f} s", f"{median:.2f} s",
                         f"{min(times):.2f}–{max(times):.2f} s", f"{rate:.0f}",
                         f"{baseline / median:.2f}×"])  # fmt: skip
            records.append({"configuration": label, "processes": processes,
                            "devices_per_process": devices, **result,
                            "median_s": median, "rows_per_s": rate})  # fmt: skip
            print(rows[-1], flush=True)
    print(f"\nidentification.sweep of the demo job: {args.samples} rows (each two simulations "
          f"and their SRS misfit), {args.per_device} rows per device in a chunk, median of "
          f"{args.repeats}")
    print_table(["configuration", "first chunk (compile)", "sweep", "spread", "rows per s",
                 "vs one process"], rows)  # fmt: skip
    write_json_atomic(args.out, {"benchmark": "sweep", "utc": utc_timestamp(),
                                 "machine": machine_info(), "samples": args.samples,
                                 "per_device": args.per_device, "results": records})  # fmt: skip


if __name__ == "__main__":
    main()
