"""The execution metrics' own cost per job, without a worker around it (a benchmark, not a test).

    ./dev bench metrics_record [--jobs 200000] [--classes 3] [--rounds 5]

Times ``ExecutionMetrics.record`` (what a processor thread pays per job) and
``take`` (what the heartbeat thread pays per recorded job at each beat),
each the median of --rounds. A drain's CPU per job (``./dev bench
cpu_per_job --metrics both``) is the figure to compare these with.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from djwork.worker.metrics import ExecutionMetrics


def round_once(jobs: int, classes: int) -> tuple[float, float]:
    names = [f"app.jobs.job_{number}" for number in range(classes)]
    recorder = ExecutionMetrics()
    record = recorder.record
    began = time.perf_counter()
    for number in range(jobs):
        record(names[number % classes], 12.5, number % 50 == 0)
    recorded = time.perf_counter()
    recorder.take()
    taken = time.perf_counter()
    return (recorded - began) / jobs * 1e6, (taken - recorded) / jobs * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--classes", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    rounds = [round_once(options.jobs, options.classes) for _ in range(options.rounds)]
    print(f"record: {statistics.median(r[0] for r in rounds):.3f} us/job (loop included); "
          f"take: {statistics.median(r[1] for r in rounds):.3f} us/job; "
          f"{options.jobs:,} jobs over {options.classes} classes, median of {options.rounds}")


if __name__ == "__main__":
    main()
