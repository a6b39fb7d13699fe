"""Unique and expiring Django Tasks: a backend alias whose OPTIONS say so, chosen with ``task.using(backend=...)``."""

from __future__ import annotations

import json
import time

import pytest
from django.conf import settings
from django.test import override_settings

from djwork.options import OptionError
from djwork.redis import keys
from djwork.tasks_compat import task_backends, task_enqueued
from example import tasks as example_tasks

UNIQUE = {"BACKEND": "djwork.tasks_backend.DjworkBackend",
          "OPTIONS": {"UNIQUE_FOR": 600, "EXPIRES": 3600}}


def with_backends(**aliases):
    return override_settings(TASKS={**settings.TASKS, **aliases})


def test_a_unique_backend_returns_the_holders_result_for_a_duplicate(raw_redis):
    sent = []

    def note(sender, task_result, **kwargs):
        sent.append(task_result.id)

    task_enqueued.connect(note)
    try:
        with with_backends(unique=UNIQUE):
            before = time.time()
            first = example_tasks.multiply.using(backend="unique").enqueue(2, 3)
            second = example_tasks.multiply.using(backend="unique").enqueue(2, 3)
            other = example_tasks.multiply.using(backend="unique").enqueue(2, 4)
            plain = example_tasks.multiply.enqueue(2, 3)  # the default backend: not unique
    finally:
        task_enqueued.disconnect(note)
    assert second.id == first.id and other.id != first.id and plain.id != first.id
    assert sent == [first.id, other.id, plain.id]  # no signal for the duplicate
    jobs = [json.loads(raw) for raw in raw_redis.lrange(keys.queue("default"), 0, -1)]
    assert sorted(job["jid"] for job in jobs) == sorted([first.id, other.id, plain.id])
    (job,) = [job for job in jobs if job["jid"] == first.id]
    assert job["unique_for"] == 600 and job["djwork_locks"][0].startswith("unique:")
    assert before + 3600 <= job["expires_at"] <= time.time() + 3600
    assert raw_redis.get(job["djwork_locks"][0]) == first.id.encode()
    # One result record per written job: the duplicate's own record was dropped.
    assert sorted(key.decode() for key in raw_redis.scan_iter("djwork:result:*")) == sorted(
        keys.result(jid) for jid in (first.id, other.id, plain.id))


@pytest.mark.parametrize("options, wrong", [
    ({"UNIQUE_FOR": -1}, "unique_for must be a positive number"),
    ({"UNIQUE_UNTIL": "start"}, "need unique_for"),
    ({"UNIQUE_FOR": 60, "UNIQUE_UNTIL": "later"}, "unique_until must be"),
    ({"EXPIRES": 0}, "EXPIRES must be a positive number"),
    ({"EXPIRES": "1h"}, "EXPIRES must be a number of seconds"),
    ({"UNIQUE": 60}, "unknown option"),
])
def test_bad_backend_options_are_refused_naming_the_alias(options, wrong):
    bad = {"BACKEND": "djwork.tasks_backend.DjworkBackend", "OPTIONS": options}
    with with_backends(bad=bad), pytest.raises(OptionError, match=wrong) as raised:
        task_backends["bad"]
    assert "TASKS['bad']" in str(raised.value)
