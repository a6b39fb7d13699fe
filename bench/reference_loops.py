"""The issue's reference rows on this machine: one bare Python thread per loop (a benchmark, not a test).

    ./dev bench reference_loops [--jobs 20000] [--runs 3]

Issue #6's bar table was measured on another machine of the same kind. Its
last two rows are loops any Python worker is built from, with no job system
around them; running them here tells whether this machine is faster or
slower than that one before its numbers are compared with ours:

- enqueue: one thread, ``LPUSH`` of a JSON job per call (issue: 5,942/s);
- drain, basic: ``BRPOP`` + ``json.loads`` + the job's ``INCR`` (issue: 3,715/s);
- drain, reliable: ``BLMOVE`` into an in-progress list + ``json.loads`` +
  ``INCR`` + ``LREM`` (issue: 2,724/s).

redis-py with hiredis, as djwork uses it. Best of ``--runs``.
"""

from __future__ import annotations

import argparse
import json
import time

import redis
from common import start_redis, table

ISSUE = {"enqueue": 5_942, "drain, basic": 3_715, "drain, reliable": 2_724}


def payload(number: int) -> str:
    return json.dumps({"class": "Incr", "args": [], "jid": f"{number:024x}", "queue": "reference",
                       "retry": True, "created_at": time.time(), "enqueued_at": time.time()})


def enqueue(client: redis.Redis, jobs: int) -> float:
    client.delete("queue:reference")
    bodies = [payload(number) for number in range(jobs)]
    began = time.perf_counter()
    for body in bodies:
        client.lpush("queue:reference", body)
    return jobs / (time.perf_counter() - began)


def drain_basic(client: redis.Redis, jobs: int) -> float:
    began = time.perf_counter()
    for _ in range(jobs):
        _key, raw = client.brpop(["queue:reference"], timeout=2)
        json.loads(raw)
        client.incr("reference:counter")
    return jobs / (time.perf_counter() - began)


def drain_reliable(client: redis.Redis, jobs: int) -> float:
    began = time.perf_counter()
    for _ in range(jobs):
        raw = client.blmove("queue:reference", "reference:in-progress", 2, "RIGHT", "LEFT")
        json.loads(raw)
        client.incr("reference:counter")
        client.lrem("reference:in-progress", 1, raw)
    return jobs / (time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    server = start_redis()
    try:
        client = redis.Redis.from_url(server.url)
        best = dict.fromkeys(ISSUE, 0.0)
        for _ in range(options.runs):
            best["enqueue"] = max(best["enqueue"], enqueue(client, options.jobs))
            best["drain, basic"] = max(best["drain, basic"], drain_basic(client, options.jobs))
            enqueue(client, options.jobs)
            best["drain, reliable"] = max(best["drain, reliable"], drain_reliable(client, options.jobs))
        rows = [(name, f"{rate:,.0f}/s here, {ISSUE[name]:,}/s in the issue ({rate / ISSUE[name]:.2f}x)")
                for name, rate in best.items()]
        print(table(rows, f"one Python thread, {options.jobs:,} jobs, best of {options.runs}"))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
