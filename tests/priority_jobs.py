"""Jobs run by real worker subprocesses in tests/test_priority_worker.py: each notes its run in Redis, in order.

Every run RPUSHes ``<key> <delivery_info priority>`` onto ``t:order`` (its place in the run order), so a
test reads the order jobs ran in, and the priority each run saw, from Redis.
"""

from __future__ import annotations

import time

import djwork
from tests.worker_jobs import conn

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the backport
    from django_tasks import task

ORDER = "t:order"  # LIST of "<key> <priority>" in run order
STARTED = "t:started"  # LIST of keys, pushed as a held job starts
RELEASE = "t:release"  # STRING whose existence ends every held job


def run_order(client) -> list[str]:
    return [raw.decode() for raw in client.lrange(ORDER, 0, -1)]


@djwork.job(bind=True)
def ordered(self, key):
    conn().rpush(ORDER, f"{key} {self.request.delivery_info['priority']}")


@djwork.job(bind=True)
def held(self, key):
    """Busy until the test sets RELEASE: the one slot of a -c 1 worker stays taken as long as the test needs."""
    conn().rpush(STARTED, key)
    while not conn().exists(RELEASE):
        time.sleep(0.05)
    conn().rpush(ORDER, f"{key} {self.request.delivery_info['priority']}")


@djwork.job(bind=True, max_retries=1, retry=1)
def retried_once(self, key):
    """Fails its first run (a retry in 0 s), succeeds the second; each run noted with the priority it saw."""
    conn().rpush(ORDER, f"{key} {self.request.delivery_info['priority']} try{self.request.retries}")
    if self.request.retries == 0:
        raise self.retry(countdown=0)


@task()
def django_ordered(key: str) -> None:
    conn().rpush(ORDER, f"{key} django")
