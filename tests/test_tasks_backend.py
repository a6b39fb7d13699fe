"""Django's Tasks API (django.tasks / the django_tasks backport) on djwork.tasks_backend.DjworkBackend.

The example settings (tests/settings.py imports them) configure
``TASKS = {"default": {"BACKEND": "djwork.tasks_backend.DjworkBackend", "QUEUES": ["default", "low"]}}``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

import djwork
from djwork.redis import keys
from djwork.tasks_backend import TASK_FIELD, DjworkBackend
from djwork.tasks_compat import (
    DjangoTask,
    InvalidTask,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
    task_enqueued,
)
from example import tasks as example_tasks
from tests import jobs

HEX24 = re.compile(r"\A[0-9a-f]{24}\Z")
QUEUED_KEYS = {"class", "args", "queue", "jid", "retry", "created_at", "enqueued_at", TASK_FIELD}


def djwork_settings(**overrides: Any):
    return override_settings(DJWORK={**settings.DJWORK, **overrides})


def only_job(raw_redis, queue: str = "default") -> tuple[dict[str, Any], str]:
    raws = raw_redis.lrange(keys.queue(queue), 0, -1)
    assert len(raws) == 1, f"expected one job in queue:{queue}, found {len(raws)}"
    return json.loads(raws[0]), raws[0].decode()


def record(raw_redis, result_id: str) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in raw_redis.hgetall(keys.result(result_id)).items()}


def test_the_default_backend_is_djwork():
    backend = task_backends["default"]
    assert isinstance(backend, DjworkBackend)
    assert backend.alias == "default"
    assert backend.supports_defer is True
    assert backend.supports_async_task is True
    assert backend.supports_get_result is True
    assert isinstance(example_tasks.multiply, DjangoTask)


def test_a_priority_picks_a_lane_of_the_queue_as_django_defines_it(raw_redis):
    # Higher is more urgent, 0 the default (docs/priority.md): 10 is lane 1, above the queue's own list.
    assert task_backends["default"].supports_priority is True
    result = example_tasks.multiply.using(priority=10).enqueue(1, 2)
    assert raw_redis.llen(keys.queue("default")) == 0
    (raw,) = raw_redis.lrange(keys.lane("default", "1"), 0, -1)
    assert json.loads(raw)["jid"] == result.id and json.loads(raw)["lane"] == 1
    assert record(raw_redis, result.id)["priority"] == "10"
    assert task_backends["default"].get_result(result.id).task.priority == 10
    # The default stays in Sidekiq's list with the payload it always had; Django's own range check still runs.
    example_tasks.multiply.using(priority=0).enqueue(3, 4)
    assert set(only_job(raw_redis)[0]) == QUEUED_KEYS
    with pytest.raises(InvalidTask, match="priority"):
        example_tasks.multiply.using(priority=101).enqueue(1, 2)


def test_enqueue_returns_a_ready_result_whose_id_is_the_jid(raw_redis):
    before = timezone.now()
    result = example_tasks.multiply.enqueue(6, 7)
    after = timezone.now()

    assert isinstance(result, TaskResult)
    assert result.status == TaskResultStatus.READY
    assert HEX24.match(result.id)
    assert result.args == [6, 7]
    assert result.kwargs == {}
    assert result.backend == "default"
    assert before <= result.enqueued_at <= after
    assert result.started_at is None and result.finished_at is None
    assert result.errors == [] and result.worker_ids == []
    assert result.is_finished is False

    job, raw = only_job(raw_redis)
    assert set(job) == QUEUED_KEYS
    assert job["jid"] == result.id
    assert job["class"] == "example.tasks.multiply"
    assert job["args"] == [6, 7]
    assert job["queue"] == "default"
    assert job["retry"] is True
    assert job[TASK_FIELD] == "default"
    assert type(job["created_at"]) is float and type(job["enqueued_at"]) is float
    assert re.search(r'"enqueued_at":\d{10}\.\d+', raw)
    assert abs(job["enqueued_at"] - result.enqueued_at.timestamp()) < 5
    assert raw_redis.smembers("queues") == {b"default"}


def test_the_result_record_is_a_hash_with_the_result_ttl(raw_redis):
    result = example_tasks.multiply.enqueue(2, b=3)
    key = keys.result(result.id)
    assert raw_redis.type(key) == b"hash"
    fields = record(raw_redis, result.id)
    assert fields["task_path"] == "example.tasks.multiply"
    assert fields["queue_name"] == "default"
    assert fields["status"] == "READY"
    assert fields["backend"] == "default"
    assert json.loads(fields["args"]) == [2]
    assert json.loads(fields["kwargs"]) == {"b": 3}
    assert fields["run_after"] == ""
    ttl = raw_redis.ttl(key)
    assert 24 * 3600 - 5 <= ttl <= 24 * 3600

    with djwork_settings(RESULT_TTL=120):
        other = example_tasks.multiply.enqueue(1, 1)
    assert 115 <= raw_redis.ttl(keys.result(other.id)) <= 120


def test_get_result_round_trips_the_record(raw_redis):
    result = example_tasks.multiply.enqueue(6, b=7)
    job, _raw = only_job(raw_redis)
    assert (job["args"], job["kwargs"]) == ([6], {"b": 7})

    for fetched in (
        task_backends["default"].get_result(result.id),
        example_tasks.multiply.get_result(result.id),
    ):
        assert fetched.id == result.id
        assert fetched.status == TaskResultStatus.READY
        assert fetched.args == [6]
        assert fetched.kwargs == {"b": 7}
        assert fetched.enqueued_at == result.enqueued_at
        assert fetched.started_at is None and fetched.finished_at is None
        assert fetched.backend == "default"
        assert fetched.task.func is example_tasks.multiply.func
        assert fetched.errors == [] and fetched.worker_ids == []

    result.refresh()
    assert result.status == TaskResultStatus.READY


def test_get_result_of_an_unknown_id_raises(raw_redis):
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result("0123456789abcdef01234567")
    with pytest.raises(TaskResultDoesNotExist):
        example_tasks.multiply.get_result("no-such-result")


def test_run_after_goes_to_the_schedule_zset(raw_redis):
    run_after = (timezone.now() + dt.timedelta(hours=1)).replace(microsecond=123456)
    result = example_tasks.multiply.using(run_after=run_after).enqueue(2, 3)

    assert raw_redis.exists(keys.queue("default")) == 0
    entries = raw_redis.zrange(keys.SCHEDULE, 0, -1, withscores=True)
    assert len(entries) == 1
    raw, score = entries[0]
    assert score == run_after.timestamp()
    job = json.loads(raw)
    assert set(job) == QUEUED_KEYS - {"enqueued_at"}  # docs/wire.md, Checks: J8: no "at", no "enqueued_at"
    assert job["jid"] == result.id
    assert job[TASK_FIELD] == "default"

    fetched = task_backends["default"].get_result(result.id)
    assert fetched.status == TaskResultStatus.READY
    assert fetched.task.run_after == run_after


def test_run_after_beyond_the_result_ttl_keeps_the_record_until_it_runs(raw_redis):
    run_after = timezone.now() + dt.timedelta(days=3)
    with djwork_settings(RESULT_TTL=600):
        result = example_tasks.multiply.using(run_after=run_after).enqueue(1, 2)
    ttl = raw_redis.ttl(keys.result(result.id))
    assert 3 * 86400 + 600 - 10 <= ttl <= 3 * 86400 + 600 + 1


def test_queue_name_picks_the_queue(raw_redis):
    result = jobs.low_priority_echo.enqueue("hi")
    job, _raw = only_job(raw_redis, "low")
    assert (job["jid"], job["queue"], job["class"]) == (result.id, "low", "tests.jobs.low_priority_echo")
    assert record(raw_redis, result.id)["queue_name"] == "low"
    assert task_backends["default"].get_result(result.id).task.queue_name == "low"


def test_an_async_task_is_accepted(raw_redis):
    result = jobs.async_double.enqueue(21)
    job, _raw = only_job(raw_redis)
    assert (job["jid"], job["class"], job["args"]) == (result.id, "tests.jobs.async_double", [21])
    assert jobs.async_double.call(21) == 42


def test_a_context_task_is_enqueued_without_the_context(raw_redis):
    result = jobs.with_context.enqueue(5)
    job, _raw = only_job(raw_redis)
    assert (job["jid"], job["args"]) == (result.id, [5])
    assert record(raw_redis, result.id)["takes_context"] == "1"


@pytest.mark.parametrize(
    ("args", "kwargs", "name", "type_name"),
    [
        pytest.param((Decimal("1.5"), 2), {}, "'a'", "Decimal", id="positional-decimal"),
        pytest.param((1,), {"b": dt.datetime(2024, 1, 1)}, "'b'", "datetime", id="keyword-datetime"),
        pytest.param(({1, 2}, 2), {}, "'a'", "set", id="set"),
        pytest.param((1, float("nan")), {}, "'b'", "float", id="nan"),
        pytest.param(([object()], 2), {}, "'a'[0]", "object", id="nested"),
    ],
)
def test_non_json_arguments_are_refused_and_nothing_is_written(raw_redis, args, kwargs, name, type_name):
    fired = []

    def receiver(sender, task_result, **_kwargs):
        fired.append(task_result)

    task_enqueued.connect(receiver)
    try:
        with pytest.raises(djwork.ArgumentError) as caught:
            example_tasks.multiply.enqueue(*args, **kwargs)
    finally:
        task_enqueued.disconnect(receiver)
    message = str(caught.value)
    assert "example.tasks.multiply" in message
    assert name in message and type_name in message, message
    assert raw_redis.dbsize() == 0
    assert fired == []


def test_task_enqueued_signal_fires_with_the_result(raw_redis):
    fired = []

    def receiver(sender, task_result, **_kwargs):
        fired.append((sender, task_result))

    task_enqueued.connect(receiver)
    try:
        result = example_tasks.multiply.enqueue(3, 4)
    finally:
        task_enqueued.disconnect(receiver)
    assert len(fired) == 1
    sender, task_result = fired[0]
    assert sender is DjworkBackend
    assert task_result.id == result.id
    assert task_result.status == TaskResultStatus.READY
    assert task_result.args == [3, 4]


def test_client_middleware_sees_task_payloads(raw_redis):
    with djwork_settings(CLIENT_MIDDLEWARE=["tests.jobs.stamp_tenant"]):
        result = example_tasks.multiply.enqueue(1, 2)
    job, _raw = only_job(raw_redis)
    assert (job["jid"], job["tenant"], job[TASK_FIELD]) == (result.id, "acme", "default")


def test_enqueue_timestamps_use_wall_clock_seconds(raw_redis):
    before = time.time()
    result = example_tasks.multiply.enqueue(1, 2)
    job, _raw = only_job(raw_redis)
    assert before - 1 <= job["created_at"] <= time.time() + 1
    assert before - 1 <= result.enqueued_at.timestamp() <= time.time() + 1
