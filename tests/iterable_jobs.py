"""Iterable jobs run by tests/test_iterable*.py: every item done bumps a per-item marker in the suite's Redis.

``i:marks:<run>`` (HASH item -> times ``each`` finished it) tells exactly-once from lost from repeated;
``i:events:<run>`` (LIST) records the hooks in order. A row job walks ``auth_group`` of the worker's
SQLite file (a real table, by primary key).
"""

from __future__ import annotations

import os
import threading
import time

import redis as redis_py
from django.contrib.auth.models import Group

import djwork
from tests.support.redis_cluster import client_for_url

try:  # Django 6.0+
    from django.tasks import task
except ImportError:  # Django 5.2: the backport
    from django_tasks import task

_local = threading.local()


def conn() -> redis_py.Redis:
    client = getattr(_local, "client", None)
    if client is None or getattr(_local, "pid", None) != os.getpid():
        client = _local.client = client_for_url(os.environ["DJWORK_TEST_REDIS_URL"])
        _local.pid = os.getpid()
    return client


def marks(run: str) -> str:
    return f"i:marks:{run}"


def events(run: str) -> str:
    return f"i:events:{run}"


class Hooked(djwork.IterableJob):
    """Records its hooks; shared by the jobs below."""

    def on_start(self, run: str, *args: object, **kwargs: object) -> None:
        conn().rpush(events(run), "start")

    def on_resume(self, run: str, *args: object, **kwargs: object) -> None:
        conn().rpush(events(run), f"resume:{self.progress.cursor}")

    def on_stop(self, run: str, *args: object, **kwargs: object) -> None:
        conn().rpush(events(run), f"stop:{self.progress.items}")

    def on_complete(self, run: str, *args: object, **kwargs: object) -> None:
        conn().rpush(events(run), f"complete:{self.progress.items}")


class CountTo(Hooked):
    """``count`` integers; ``each`` marks one and, past ``fail_at``, fails once (the retry resumes after it)."""

    def build_iterator(self, cursor, run: str, count: int, fail_at: int = -1):
        return djwork.iterate.numbers(0, count, cursor)

    def each(self, number: int, run: str, count: int, fail_at: int = -1) -> None:
        if number == fail_at and conn().set(f"i:failed:{run}", 1, nx=True):
            raise RuntimeError(f"item {number} fails once")
        conn().hincrby(marks(run), number, 1)


class CancelSelf(Hooked):
    """Revokes itself while doing item ``at``; asks after every item whether it was cancelled."""

    cancel_check_seconds = 0

    def build_iterator(self, cursor, run: str, count: int, at: int):
        return djwork.iterate.numbers(0, count, cursor)

    def each(self, number: int, run: str, count: int, at: int) -> None:
        conn().hincrby(marks(run), number, 1)
        if number == at:
            djwork.revoke(self.request.id)


class Rows(Hooked):
    """Every row of ``auth_group`` by primary key. At each pk of ``gates`` it says so (``i:waiting:<run>``)
    and waits for the test's go (``i:go:<run>:<pk>``) before marking the row: the test signals or kills
    the worker while the row is mid-flight."""

    checkpoint_items = 50
    checkpoint_seconds = 3600.0  # only the item count decides: a kill -9 repeats at most 49 rows

    def build_iterator(self, cursor, run: str, gates: list[int]):
        return djwork.iterate.queryset(Group.objects.all(), cursor, chunk_size=200)

    def each(self, row: Group, run: str, gates: list[int]) -> None:
        if row.pk in gates:
            client = conn()
            client.rpush(f"i:waiting:{run}", row.pk)
            if client.blpop([f"i:go:{run}:{row.pk}"], timeout=120) is None:
                raise RuntimeError(f"row {row.pk}: no go from the test")
        conn().hincrby(marks(run), row.pk, 1)


class SlowOnce(Hooked):
    """Item ``at`` hangs the first time, until the soft time limit ends the segment; later it is quick."""

    job_options = {"soft_time_limit": 2, "time_limit": 120}

    def build_iterator(self, cursor, run: str, count: int, at: int):
        return djwork.iterate.numbers(0, count, cursor)

    def each(self, number: int, run: str, count: int, at: int) -> None:
        if number == at and conn().set(f"i:slow:{run}", 1, nx=True):
            while True:  # Python-level waits: the soft limit's exception lands in this thread
                time.sleep(0.05)
        conn().hincrby(marks(run), number, 1)


class GatedCount(Hooked):
    """``count`` integers; item ``gate`` says so (``i:waiting:<run>``) and waits for the test's go."""

    def build_iterator(self, cursor, run: str, count: int, gate: int):
        return djwork.iterate.numbers(0, count, cursor)

    def each(self, number: int, run: str, count: int, gate: int) -> None:
        if number == gate:
            client = conn()
            client.rpush(f"i:waiting:{run}", number)
            if client.blpop([f"i:go:{run}:{number}"], timeout=120) is None:
                raise RuntimeError(f"item {number}: no go from the test")
        conn().hincrby(marks(run), number, 1)


class UniqueGatedCount(GatedCount):
    """The same, one copy at a time."""

    job_options = {"unique_for": 600}

    def build_iterator(self, cursor, run: str, count: int, gate: int):
        return djwork.iterate.numbers(0, count, cursor)


# --- the Django Tasks form (djwork.resumable) --------------------------------------------------------
@task(takes_context=True)
def gated_count_task(context, run: str, count: int, gates: list[int], fail_at: int = -1) -> dict[str, int]:
    """``count`` integers walked with ``djwork.resumable``; each gate says so and waits for the test's go
    (as GatedCount's), and ``fail_at``, past which the loop fails once, tests the retry."""
    client = conn()
    iteration = djwork.resumable(context, lambda cursor: djwork.iterate.numbers(0, count, cursor))
    client.rpush(events(run), f"segment:{iteration.progress.segments}:{iteration.cursor}")
    for number in iteration:
        if number == fail_at and client.set(f"i:failed:{run}", 1, nx=True):
            raise RuntimeError(f"item {number} fails once")
        if number in gates:
            client.rpush(f"i:waiting:{run}", number)
            if client.blpop([f"i:go:{run}:{number}"], timeout=120) is None:
                raise RuntimeError(f"item {number}: no go from the test")
        client.hincrby(marks(run), number, 1)
    progress = iteration.progress
    client.rpush(events(run), f"complete:{progress.items}")
    return {"items": progress.items, "segments": progress.segments}
