"""Client side of bench/compare.py for the Python systems: enqueue and time it, or push latency probes.

    python -m bench.others.client SYSTEM ACTION COUNT [--job incr|noop] [--batch 1000] [--rate 200]

SYSTEM: djwork | rq | celery | dramatiq. ACTION:
  single    COUNT --job jobs one by one from this thread (djwork delay(), RQ Queue.enqueue,
            Celery task.delay, Dramatiq actor.send);
  bulk      COUNT --job jobs in batches of --batch (djwork delay_many, RQ enqueue_many);
  probe     COUNT probe jobs at --rate per second, each carrying time.time() at the push;
  pipeline  djwork only: COUNT round trips of what one push is on the wire, LPUSH queue:bench +
            SADD queues bench in one non-transactional pipeline, with a payload as delay() writes
            it (issue #20's bar for delay(): no job building, no options, no script).

Every action first sends one untimed warm-up --job job (connections, declarations,
imports; an incr job for "probe"), so the queue then holds COUNT + 1 jobs. "probe"
also waits for a worker to run that warm-up before it starts. Prints one JSON line: seconds (the timed
part only), count, total (jobs left in the queue incl. the warm-up).
Runs from the repository root with BENCH_REDIS_URL set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))


def load(system: str, job: str):
    """(push_one, probe_one, bulk or None) for a system; bulk(n) enqueues n `job` jobs in one call."""
    if system == "djwork":
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
        import django

        django.setup()
        from bench import jobs

        task = jobs.incr if job == "incr" else jobs.nearly_noop
        return task.delay, jobs.probe.delay, lambda n: task.delay_many([()] * n)
    if system == "rq":
        import redis
        from rq import Queue

        from bench.others import rq_jobs

        queue = Queue("bench", connection=redis.Redis.from_url(os.environ["BENCH_REDIS_URL"]))
        function = getattr(rq_jobs, job)

        def bulk(n: int) -> None:
            queue.enqueue_many([Queue.prepare_data(function) for _ in range(n)])

        return (lambda: queue.enqueue(function), lambda sent_at: queue.enqueue(rq_jobs.probe, sent_at), bulk)
    if system == "celery":
        from bench.others import celery_app

        return getattr(celery_app, job).delay, celery_app.probe.delay, None
    if system == "dramatiq":
        from bench.others import dramatiq_actors

        return getattr(dramatiq_actors, job).send, dramatiq_actors.probe.send, None
    raise SystemExit(f"unknown system {system!r}")


def pipeline_loop(count: int) -> float:
    """Seconds for `count` LPUSH + SADD pipelines, one per job, from this thread (djwork's wire, no framework)."""
    from bench import jobs
    from bench.others.counter import client
    from djwork.payload import dumps
    from djwork.redis import keys

    payload, _at = jobs.nearly_noop.build_payload([], {})
    payload["enqueued_at"] = time.time()
    body = dumps(payload)
    raw = client()  # plain redis-py (with hiredis when installed), as an app would write the loop
    queue = keys.queue("bench")
    started = time.perf_counter()
    for _ in range(count):
        pipe = raw.pipeline(transaction=False)
        pipe.lpush(queue, body)
        pipe.sadd(keys.QUEUES, "bench")
        pipe.execute()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("system")
    parser.add_argument("action", choices=["single", "bulk", "probe", "pipeline"])
    parser.add_argument("count", type=int)
    parser.add_argument("--job", choices=["incr", "noop"], default="incr")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--ready-timeout", type=float, default=60)
    args = parser.parse_args()
    push_one, probe_one, bulk = load(args.system, "incr" if args.action == "probe" else args.job)

    push_one()  # warm-up: connect, declare, import; untimed
    count = args.count
    if args.action == "pipeline":
        if args.system != "djwork":
            raise SystemExit("the pipeline loop is djwork's wire format: run it with SYSTEM djwork")
        seconds = pipeline_loop(count)
    elif args.action == "single":
        started = time.perf_counter()
        for _ in range(count):
            push_one()
        seconds = time.perf_counter() - started
    elif args.action == "bulk":
        if bulk is None:
            raise SystemExit(f"{args.system} has no bulk enqueue")
        started = time.perf_counter()
        for done in range(0, count, args.batch):
            bulk(min(args.batch, count - done))
        seconds = time.perf_counter() - started
    else:
        from bench.others.counter import COUNTER, client

        deadline = time.monotonic() + args.ready_timeout
        while int(client().get(COUNTER) or 0) < 1:
            if time.monotonic() > deadline:
                raise SystemExit("probe: no worker ran the warm-up job")
            time.sleep(0.01)
        time.sleep(0.5)  # let every worker thread get back to its fetch
        interval = 1.0 / args.rate
        next_at = started = time.perf_counter()
        for _ in range(count):
            now = time.perf_counter()
            if now < next_at:
                time.sleep(next_at - now)
            probe_one(time.time())
            next_at += interval
        seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "count": count, "total": count + 1}), flush=True)


if __name__ == "__main__":
    main()
