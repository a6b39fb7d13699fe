"""Celery app for bench/compare.py: Redis broker, no result backend, queue "bench"."""

from __future__ import annotations

import os

from celery import Celery

from bench.others import counter

app = Celery("bench", broker=os.environ["BENCH_REDIS_URL"])
app.conf.update(
    task_default_queue="bench",
    task_ignore_result=True,           # no result backend configured; like djwork, nothing is stored per job
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    worker_redirect_stdouts=False,
)


@app.task(name="bench.incr")
def incr() -> None:
    counter.incr()


@app.task(name="bench.noop")
def noop() -> None:
    counter.noop()


@app.task(name="bench.probe")
def probe(sent_at: float) -> None:
    counter.probe(sent_at)
