"""Per-item cost of an iterable job's walk against a plain loop over the same items (a benchmark, not a test).

    ./dev bench iterable [--items 1000000] [--rounds 5]

Runs, in this process against a private redis-server, ``--items`` items with an empty ``each``:
``plain`` is a job body's own loop (``for item, cursor in iterate.numbers(...): each(item)``);
``walk, no checkpoint`` is ``IterableJob.run`` with checkpoints pushed out of reach (the walk's own
bookkeeping); ``walk, default checkpoints`` with the defaults (ITERABLE_CHECKPOINT_ITEMS 1000,
ITERABLE_CHECKPOINT_SECONDS 5: one SET per 1000 items), the cursor written to Redis as in a worker;
``walk, checkpoint every item`` the same with ``checkpoint_items = 1``, the price of one write;
``resumable, default checkpoints`` is the Django Tasks form (``for item in djwork.resumable(context, ...)``
with the loop's own empty body) as a worker's run walks it. Every walk runs as a worker's run would
(a hostname, and a run slot for the Tasks form), so the checkpoints are written.
Medians of ``--rounds`` in items per second; docs/iterable.md quotes a run of it.
"""

from __future__ import annotations

import argparse
import statistics
import time
from types import SimpleNamespace

from common import setup_django, start_redis


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    server = start_redis()
    try:
        setup_django()
        import djwork
        from djwork.iterable.walk import RunSlot, worker_run
        from djwork.jobs.task_class import Request

        class EmptyEach(djwork.IterableJob):
            def build_iterator(self, cursor, count):
                return djwork.iterate.numbers(0, count, cursor)

            def each(self, item, count):
                pass

        class NeverSaves(EmptyEach):
            checkpoint_items = 10**12
            checkpoint_seconds = 10.0**12

            def build_iterator(self, cursor, count):
                return djwork.iterate.numbers(0, count, cursor)

        class EveryItem(EmptyEach):
            checkpoint_items = 1

            def build_iterator(self, cursor, count):
                return djwork.iterate.numbers(0, count, cursor)

        def plain(count: int) -> None:
            each = EmptyEach.instance().each
            for item, _cursor in djwork.iterate.numbers(0, count):
                each(item, count)

        def walk(job: type, count: int) -> None:
            # A hostname makes it a worker's run: without one the walk saves nothing (a direct call).
            job.instance().run(Request(id=f"bench-{time.monotonic_ns()}", args=[count], kwargs={},
                                       hostname="bench:1:walk"))

        def resumable(count: int) -> None:
            jid = f"bench-{time.monotonic_ns()}"
            token = worker_run.set(RunSlot(jid, lambda: False))  # what the run hook sets around a task's run
            try:
                context = SimpleNamespace(task_result=SimpleNamespace(id=jid))
                for _item in djwork.resumable(context, lambda cursor: djwork.iterate.numbers(0, count, cursor)):
                    pass
            finally:
                worker_run.reset(token)

        count = options.items
        small = max(1, count // 20)  # a write per item is slow: fewer items, the same per-item rate
        shapes = [("plain loop", lambda: plain(count), count),
                  ("walk, no checkpoint", lambda: walk(NeverSaves, count), count),
                  ("walk, default checkpoints", lambda: walk(EmptyEach, count), count),
                  ("walk, checkpoint every item", lambda: walk(EveryItem, small), small),
                  ("resumable, default checkpoints", lambda: resumable(count), count)]
        rates: dict[str, list[float]] = {name: [] for name, _, _ in shapes}
        for _ in range(options.rounds):
            for name, run, items in shapes:  # interleaved: a busy moment of the machine hits every shape
                began = time.perf_counter()
                run()
                rates[name].append(items / (time.perf_counter() - began))
        for name, values in rates.items():
            print(f"{name:30s} median {statistics.median(values):12,.0f} items/s   "
                  f"({', '.join(f'{v:,.0f}' for v in values)})")
        base = statistics.median(rates["plain loop"])
        for name in ("walk, no checkpoint", "walk, default checkpoints", "resumable, default checkpoints"):
            print(f"{name}: {(1 / statistics.median(rates[name]) - 1 / base) * 1e9:.0f} ns per item over the plain "
                  f"loop ({count:,} items, {options.rounds} rounds)")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
