"""Two torch threads beside a busy core: OpenMP's spinning wait against its passive one, side by side in one run.

    .venv/bin/python benchmarks/omp_contention.py [--threads 2] [--repeats 3] [--size 256] [--iters 400]

`make test` runs two pytest workers on two cores; a test that sets two torch threads (the thread-count checks of
tests/doctor and tests/analysis) then shares its cores with the other worker. With OpenMP's default wait policy an
idle thread spins for the lagging one, which the other worker holds. This script starts one busy process per
core but one, then times the same small matmul loop (a draft-sized layer) in fresh processes under
``OMP_WAIT_POLICY=ACTIVE`` and ``PASSIVE``, interleaved, and prints each one's median and the ratio. Nothing is
asserted: tests/conftest.py sets PASSIVE for the suite from what this prints (an order of magnitude on the 2-core
machine; a doctor run of tests/doctor/test_doctor_dtypes.py on two threads beside a workbook build took 75.5 s
spinning and 2.9 s passive).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys

WORKLOAD = """
import json, sys, time, torch
threads, size, iters = (int(x) for x in sys.argv[1:4])
torch.set_num_threads(threads)
a, b = torch.randn(size, size), torch.randn(size, size)
for _ in range(20):
    a @ b
t = time.perf_counter()
for _ in range(iters):
    a @ b
print(json.dumps({"seconds": time.perf_counter() - t, "threads": torch.get_num_threads()}))
"""


def _busy(stop) -> None:
    while not stop.is_set():
        sum(range(10_000))


def _timed(policy: str, threads: int, size: int, iters: int) -> float:
    env = {**os.environ, "OMP_WAIT_POLICY": policy, "OMP_NUM_THREADS": str(threads)}
    out = subprocess.run([sys.executable, "-c", WORKLOAD, str(threads), str(size), str(iters)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["seconds"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--iters", type=int, default=400)
    args = p.parse_args(argv)
    cores = len(os.sched_getaffinity(0))
    stop = mp.Event()
    hogs = [mp.Process(target=_busy, args=(stop,), daemon=True) for _ in range(max(cores - 1, 1))]
    for h in hogs:
        h.start()
    times = {"ACTIVE": [], "PASSIVE": []}
    try:
        for _ in range(args.repeats):           # interleaved: both policies see the same load drift
            for policy in times:
                times[policy].append(_timed(policy, args.threads, args.size, args.iters))
    finally:
        stop.set()
        for h in hogs:
            h.join()
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{cores} cores, {len(hogs)} busy process(es), {args.threads} torch threads, {args.iters} matmuls of "
          f"{args.size}x{args.size} (CPU, float32), median of {args.repeats}:")
    for policy, v in med.items():
        print(f"  OMP_WAIT_POLICY={policy:<8} {v:8.3f} s   (runs: {', '.join(f'{x:.3f}' for x in times[policy])})")
    print(f"  ACTIVE / PASSIVE = {med['ACTIVE'] / med['PASSIVE']:.1f}x")


if __name__ == "__main__":
    main()
