"""The job API (@djwork.job and its enqueue methods) against a real private Redis.

Every payload is read back from Redis and compared field by field with
Sidekiq 7's job JSON, queues and `schedule` ZSET (docs/wire.md: Jobs, Queues,
Scheduled/retry/dead sets).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import time
from decimal import Decimal
from typing import Any

import pytest
import redis as redis_py
from django.conf import settings
from django.db import transaction
from django.test import override_settings

import djwork
from djwork import redis as redis_layer
from djwork.jobs import ABSOLUTE_EPOCH_THRESHOLD, Request, registry, resolve
from djwork.redis import keys
from tests import jobs

HEX24 = re.compile(r"\A[0-9a-f]{24}\Z")
# docs/wire.md, Jobs: what the client writes to a queue, and nothing else.
# Sidekiq's fields and no other: results are off by default (RESULTS), so no "djwork_result" either.
QUEUED_KEYS = {"class", "args", "queue", "jid", "retry", "created_at", "enqueued_at"}
# docs/wire.md, Checks: J8: a schedule member carries neither "at" nor "enqueued_at" (7.x strips it).
SCHEDULED_KEYS = QUEUED_KEYS - {"enqueued_at"}


def djwork_settings(**overrides: Any):
    return override_settings(DJWORK={**settings.DJWORK, **overrides})


def queued(raw_redis: redis_py.Redis, queue: str = "default") -> list[dict[str, Any]]:
    """The jobs of queue:<queue>, oldest (next to be popped) first."""
    return [json.loads(raw) for raw in reversed(raw_redis.lrange(keys.queue(queue), 0, -1))]


def only_job(raw_redis: redis_py.Redis, queue: str = "default") -> tuple[dict[str, Any], str]:
    raws = raw_redis.lrange(keys.queue(queue), 0, -1)
    assert len(raws) == 1, f"expected exactly one job in queue:{queue}, found {len(raws)}"
    return json.loads(raws[0]), raws[0].decode()


def only_scheduled(raw_redis: redis_py.Redis) -> tuple[dict[str, Any], float, str]:
    entries = raw_redis.zrange(keys.SCHEDULE, 0, -1, withscores=True)
    assert len(entries) == 1, f"expected exactly one scheduled job, found {len(entries)}"
    raw, score = entries[0]
    return json.loads(raw), score, raw.decode()


def assert_nothing_written(raw_redis: redis_py.Redis) -> None:
    assert raw_redis.dbsize() == 0, raw_redis.keys("*")


def assert_wire_timestamps(raw: str, *names: str) -> None:
    """Float epoch seconds with a fractional part: an integral JSON number reads as ms in Sidekiq 8."""
    for name in names:
        assert re.search(rf'"{name}":\d{{10}}\.\d+[,}}]', raw), f"{name} is not a float epoch in {raw}"


@pytest.fixture
def warm_redis(raw_redis):
    """The raw client, with djwork's own connection already dialled (the odometer then counts only the push)."""
    redis_layer.run(lambda conn: conn.ping(), idempotent=True)
    return raw_redis


# --- the decorator ---------------------------------------------------------------------
def test_bare_decorator_registers_a_job_that_keeps_the_function_metadata():
    assert isinstance(jobs.add, djwork.Job)
    assert jobs.add.name == "tests.jobs.add"
    assert jobs.add.__name__ == "add"
    assert jobs.add.__module__ == "tests.jobs"
    assert jobs.add.__wrapped__.__name__ == "add"
    assert registry["tests.jobs.add"] is jobs.add
    assert resolve("tests.jobs.add") is jobs.add
    assert resolve("tests.jobs.no_such_job") is None
    assert isinstance(jobs.empty_parens, djwork.Job)
    assert jobs.empty_parens.name == "tests.jobs.empty_parens"
    assert repr(jobs.add) == "<djwork.Job tests.jobs.add>"


def test_decorator_defaults():
    job = jobs.add
    assert job.queue == "default"
    assert job.payload_retry is True
    assert job.max_retries is None
    assert job.bind is False
    assert job.default_retry_delay == 180
    assert job.autoretry_for == ()
    assert job.retry_backoff is False
    assert job.retry_backoff_max == 600
    assert job.retry_jitter is True
    assert job.expires is None
    assert job.options == {}


def test_decorator_sidekiq_options_are_stored():
    assert jobs.with_options.queue == "mail"
    assert jobs.with_options.payload_retry == 5
    assert jobs.with_options.max_retries == 5
    assert jobs.with_options.options == {"backtrace": True, "dead": False, "tags": ["billing", "eu"]}
    assert jobs.named.name == "Billing::Invoice"
    assert registry["Billing::Invoice"] is jobs.named
    assert jobs.named.payload_retry is False
    assert jobs.named.max_retries == 0


def test_decorator_celery_options_are_stored():
    bound = jobs.bound
    assert bound.bind is True
    assert bound.max_retries == 2
    assert bound.payload_retry == 2  # max_retries without retry= becomes the Sidekiq retry count
    assert bound.default_retry_delay == 7
    auto = jobs.auto_retrying
    assert auto.autoretry_for == (ValueError, KeyError)
    assert auto.retry_backoff is True
    assert auto.retry_backoff_max == 120
    assert auto.retry_jitter is False
    assert auto.expires == 90
    assert jobs.celery_max_retries.payload_retry == 3
    assert jobs.celery_max_retries.max_retries == 3


def test_shared_task_is_the_job_decorator_with_celerys_failure_rules():
    assert isinstance(jobs.shared_bare, djwork.Job)
    assert (jobs.shared_bare.failures, jobs.add.failures) == ("celery", None)
    assert jobs.shared_bare(2) == 20
    assert jobs.shared_with_options.queue == "low"
    assert jobs.shared_with_options.payload_retry == 2


def test_decorator_refuses_bad_tags_and_bind_without_self_fails_when_run():
    def plain(x):
        return x

    def no_params():
        return None

    with pytest.raises(TypeError, match="tags"):
        djwork.job(tags="billing")(plain)
    with pytest.raises(TypeError, match="tags"):
        djwork.job(tags=["ok", 3])(plain)
    # Celery's Django example binds a function without parameters: it must import (as under Celery),
    # and each run fails with a TypeError naming the job, which autoretry_for=(Exception,) retries.
    bound_without_self = djwork.job(bind=True, name="tests.bound_without_self")(no_params)
    with pytest.raises(TypeError, match=r"tests\.bound_without_self: bind=True .*\(add `self`\)"):
        bound_without_self()


# --- delay: the payload on the wire --------------------------------------------------------
def test_delay_writes_exactly_the_sidekiq_fields(raw_redis):
    before = time.time()
    ref = jobs.add.delay(1, 2)
    after = time.time()

    assert isinstance(ref, djwork.JobRef)
    assert HEX24.match(ref.jid)
    assert ref.id == ref.jid
    assert str(ref) == ref.jid
    job, raw = only_job(raw_redis)
    assert set(job) == QUEUED_KEYS
    assert job["class"] == "tests.jobs.add"
    assert job["args"] == [1, 2]
    assert job["queue"] == "default"
    assert job["jid"] == ref.jid
    assert job["retry"] is True
    assert type(job["created_at"]) is float
    assert type(job["enqueued_at"]) is float
    assert before <= job["created_at"] <= job["enqueued_at"] <= after
    assert_wire_timestamps(raw, "created_at", "enqueued_at")
    assert raw_redis.type("queues") == b"set"
    assert raw_redis.smembers("queues") == {b"default"}
    assert raw_redis.exists(keys.SCHEDULE) == 0


def test_integral_timestamps_still_carry_a_fractional_part(warm_redis, monkeypatch):
    raw_redis = warm_redis
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.0)
    jobs.add.delay(1)
    monkeypatch.undo()
    job, raw = only_job(raw_redis)
    assert '"created_at":1700000000.0' in raw
    assert '"enqueued_at":1700000000.0' in raw
    assert type(job["created_at"]) is float


def test_every_job_gets_its_own_jid(raw_redis):
    refs = [jobs.add.delay(i) for i in range(50)]
    jids = [ref.jid for ref in refs]
    assert len(set(jids)) == 50
    assert all(HEX24.match(jid) for jid in jids)
    assert [job["jid"] for job in queued(raw_redis)] == jids


def test_kwargs_travel_in_the_kwargs_field_and_come_back(raw_redis):
    jobs.add.delay(1, b=5)
    job, _raw = only_job(raw_redis)
    assert set(job) == QUEUED_KEYS | {"kwargs"}
    assert job["args"] == [1]
    assert job["kwargs"] == {"b": 5}
    target = resolve(job["class"])
    assert target is jobs.add
    assert target.run(Request(id=job["jid"], args=job["args"], kwargs=job["kwargs"])) == 6


def test_no_kwargs_field_without_kwargs(raw_redis):
    jobs.no_args.delay()
    job, _raw = only_job(raw_redis)
    assert set(job) == QUEUED_KEYS
    assert job["args"] == []


def test_decorator_options_are_written_into_the_payload(raw_redis):
    ref = jobs.with_options.delay(7)
    job, _raw = only_job(raw_redis, "mail")
    assert set(job) == QUEUED_KEYS | {"backtrace", "dead", "tags"}
    assert job["jid"] == ref.jid
    assert job["queue"] == "mail"
    assert job["retry"] == 5
    assert job["backtrace"] is True
    assert job["dead"] is False
    assert job["tags"] == ["billing", "eu"]
    assert raw_redis.smembers("queues") == {b"mail"}
    assert raw_redis.llen(keys.queue("default")) == 0

    jobs.with_more_options.delay(8)
    job = queued(raw_redis, "mail")[-1]
    assert set(job) == QUEUED_KEYS | {"backtrace", "retry_queue", "retry_for"}
    assert job["backtrace"] == 7
    assert job["retry_queue"] == "slow"
    assert job["retry_for"] == 3600


def test_name_option_is_the_payload_class(raw_redis):
    jobs.named.delay(11)
    job, _raw = only_job(raw_redis)
    assert job["class"] == "Billing::Invoice"
    assert job["retry"] is False
    assert resolve("Billing::Invoice") is jobs.named


def test_retry_zero_stays_an_integer(raw_redis):
    """docs/wire.md, Checks: J5: 0 (straight to Dead) and false (no Dead) are different things."""
    jobs.zero_retry.delay()
    job, raw = only_job(raw_redis)
    assert '"retry":0' in raw
    assert job["retry"] == 0 and job["retry"] is not False


def test_max_retries_becomes_the_sidekiq_retry_count(raw_redis):
    jobs.celery_max_retries.delay(1)
    job, _raw = only_job(raw_redis)
    assert job["retry"] == 3


def test_decorator_expires_becomes_expires_at(raw_redis):
    before = time.time()
    jobs.auto_retrying.delay(1)
    after = time.time()
    job, _raw = only_job(raw_redis)
    assert set(job) == QUEUED_KEYS | {"expires_at"}
    assert type(job["expires_at"]) is float
    assert before + 90 <= job["expires_at"] <= after + 90


# --- apply_async ---------------------------------------------------------------------------
def test_apply_async_args_kwargs_queue_and_retry(raw_redis):
    ref = jobs.add.apply_async(args=[1], kwargs={"b": 3}, queue="critical", retry=False)
    job, _raw = only_job(raw_redis, "critical")
    assert job["jid"] == ref.jid
    assert job["args"] == [1]
    assert job["kwargs"] == {"b": 3}
    assert job["queue"] == "critical"
    assert job["retry"] is False
    assert raw_redis.smembers("queues") == {b"critical"}
    assert raw_redis.llen(keys.queue("default")) == 0


def test_apply_async_positional_and_integer_retry(raw_redis):
    jobs.add.apply_async((4, 5), None, retry=9)
    job, _raw = only_job(raw_redis)
    assert job["args"] == [4, 5]
    assert "kwargs" not in job
    assert job["retry"] == 9


def test_apply_async_accepts_a_caller_supplied_jid(raw_redis):
    ref = jobs.add.apply_async(args=[1], jid="0123456789abcdef01234567")
    assert ref.jid == "0123456789abcdef01234567"
    assert only_job(raw_redis)[0]["jid"] == "0123456789abcdef01234567"


def test_apply_async_expires_in_seconds_and_as_datetime(raw_redis):
    before = time.time()
    jobs.add.apply_async(args=[1], expires=30)
    after = time.time()
    job, _raw = only_job(raw_redis)
    assert set(job) == QUEUED_KEYS | {"expires_at"}
    assert type(job["expires_at"]) is float
    assert before + 30 <= job["expires_at"] <= after + 30

    raw_redis.flushdb()
    deadline = dt.datetime(2099, 1, 2, 3, 4, 5, 250000, tzinfo=dt.UTC)
    jobs.add.apply_async(args=[1], expires=deadline)
    job, raw = only_job(raw_redis)
    assert job["expires_at"] == deadline.timestamp()
    assert_wire_timestamps(raw, "expires_at")


@override_settings(TIME_ZONE="America/New_York")
def test_apply_async_naive_expires_is_in_the_default_timezone(raw_redis):
    jobs.add.apply_async(args=[1], expires=dt.datetime(2099, 1, 1, 12, 0))
    job, _raw = only_job(raw_redis)
    assert job["expires_at"] == dt.datetime(2099, 1, 1, 17, 0, tzinfo=dt.UTC).timestamp()


def test_countdown_writes_to_the_schedule_zset(raw_redis):
    before = time.time()
    ref = jobs.add.apply_async(args=[1], countdown=60)
    after = time.time()
    assert HEX24.match(ref.jid)
    assert raw_redis.type(keys.SCHEDULE) == b"zset"
    job, score, raw = only_scheduled(raw_redis)
    assert before + 60 <= score <= after + 60
    assert set(job) == SCHEDULED_KEYS  # no "at" (J8), no "enqueued_at" (7.x strips it)
    assert job["jid"] == ref.jid
    assert job["args"] == [1]
    assert job["queue"] == "default"
    assert_wire_timestamps(raw, "created_at")
    # Nothing is queued and, as Sidekiq's client, nothing is added to "queues" yet.
    assert raw_redis.exists(keys.queue("default")) == 0
    assert raw_redis.exists("queues") == 0


def test_eta_aware_datetime_is_the_score(raw_redis):
    eta = dt.datetime.now(dt.timezone(dt.timedelta(hours=5))).replace(microsecond=500000) + dt.timedelta(hours=2)
    ref = jobs.add.apply_async(args=[2], eta=eta, queue="low")
    job, score, _raw = only_scheduled(raw_redis)
    assert score == eta.timestamp()
    assert set(job) == SCHEDULED_KEYS
    assert job["jid"] == ref.jid
    assert job["queue"] == "low"


@override_settings(TIME_ZONE="America/New_York")
def test_eta_naive_datetime_is_in_the_default_timezone(raw_redis):
    jobs.add.apply_async(args=[2], eta=dt.datetime(2099, 1, 1, 12, 0))
    _job, score, _raw = only_scheduled(raw_redis)
    assert score == dt.datetime(2099, 1, 1, 17, 0, tzinfo=dt.UTC).timestamp()


def test_eta_epoch_seconds_is_the_score(raw_redis):
    at = time.time() + 3600.25
    jobs.add.apply_async(args=[2], eta=at)
    _job, score, _raw = only_scheduled(raw_redis)
    assert score == at


def test_eta_wins_over_countdown(raw_redis):
    at = time.time() + 7200
    jobs.add.apply_async(args=[2], eta=at, countdown=5)
    assert only_scheduled(raw_redis)[1] == at


def test_eta_in_the_past_is_pushed_now(raw_redis):
    ref = jobs.add.apply_async(args=[3], eta=time.time() - 10)
    assert raw_redis.exists(keys.SCHEDULE) == 0
    job, _raw = only_job(raw_redis)
    assert set(job) == QUEUED_KEYS
    assert job["jid"] == ref.jid


# --- Sidekiq-style methods ----------------------------------------------------------------
def test_perform_async_is_delay(raw_redis):
    ref = jobs.add.perform_async(1, b=2)
    job, _raw = only_job(raw_redis)
    assert set(job) == QUEUED_KEYS | {"kwargs"}
    assert (job["jid"], job["args"], job["kwargs"]) == (ref.jid, [1], {"b": 2})


@pytest.mark.parametrize("interval", [90, 90.0, dt.timedelta(seconds=90)])
def test_perform_in_an_interval(raw_redis, interval):
    before = time.time()
    ref = jobs.add.perform_in(interval, 5)
    after = time.time()
    job, score, _raw = only_scheduled(raw_redis)
    assert before + 90 <= score <= after + 90
    assert set(job) == SCHEDULED_KEYS
    assert (job["jid"], job["args"]) == (ref.jid, [5])


def test_perform_in_a_huge_interval_is_an_absolute_epoch(raw_redis):
    at = float(int(time.time()) + 600)
    assert at >= ABSOLUTE_EPOCH_THRESHOLD
    jobs.add.perform_in(at, 5)
    assert only_scheduled(raw_redis)[1] == at


def test_perform_in_zero_is_pushed_now(raw_redis):
    jobs.add.perform_in(0, 5)
    assert raw_redis.exists(keys.SCHEDULE) == 0
    assert set(only_job(raw_redis)[0]) == QUEUED_KEYS


def test_perform_at_datetime_and_epoch(raw_redis):
    when = dt.datetime(2099, 6, 1, 8, 30, tzinfo=dt.UTC)
    ref = jobs.add.perform_at(when, 6, b=1)
    job, score, _raw = only_scheduled(raw_redis)
    assert score == when.timestamp()
    assert set(job) == SCHEDULED_KEYS | {"kwargs"}
    assert (job["jid"], job["args"], job["kwargs"]) == (ref.jid, [6], {"b": 1})

    raw_redis.flushdb()
    jobs.add.perform_at(4_000_000_000.5, 6)
    assert only_scheduled(raw_redis)[1] == 4_000_000_000.5


# --- set(...) ------------------------------------------------------------------------------------
def test_set_queue_and_retry(raw_redis):
    ref = jobs.add.set(queue="low", retry=False).delay(1)
    job, _raw = only_job(raw_redis, "low")
    assert job["jid"] == ref.jid
    assert job["queue"] == "low"
    assert job["retry"] is False
    assert raw_redis.smembers("queues") == {b"low"}
    # set() returned a copy: the job itself is unchanged.
    jobs.add.delay(2)
    job, _raw = only_job(raw_redis, "default")
    assert job["retry"] is True


def test_chained_set_merges_and_later_wins(raw_redis):
    options = jobs.add.set(queue="low", retry=2).set(retry=4, tags=["x"])
    options.delay(1)
    job, _raw = only_job(raw_redis, "low")
    assert set(job) == QUEUED_KEYS | {"tags"}
    assert (job["queue"], job["retry"], job["tags"]) == ("low", 4, ["x"])
    options.apply_async(args=[2], queue="critical")
    assert only_job(raw_redis, "critical")[0]["retry"] == 4


def test_set_with_scheduling_methods(raw_redis):
    before = time.time()
    jobs.add.set(queue="low").perform_in(30, 1)
    job, score, _raw = only_scheduled(raw_redis)
    assert job["queue"] == "low"
    assert score >= before + 30
    raw_redis.flushdb()
    jobs.add.set(countdown=45).delay(1)
    assert only_scheduled(raw_redis)[1] >= before + 45
    raw_redis.flushdb()
    when = dt.datetime(2099, 1, 1, tzinfo=dt.UTC)
    jobs.add.set(retry=1).perform_at(when, 1)
    job, score, _raw = only_scheduled(raw_redis)
    assert (score, job["retry"]) == (when.timestamp(), 1)


def test_unknown_options_are_refused_and_nothing_is_written(raw_redis):
    with pytest.raises(TypeError, match="unknown"):
        jobs.add.apply_async(args=[1], exchange="tests")
    with pytest.raises(TypeError, match="unknown"):
        jobs.add.set(routing_key="x")
    with pytest.raises(TypeError, match="unknown"):
        jobs.add.set(queue="low").apply_async(args=[1], bogus=True)
    with pytest.raises(TypeError, match="unknown"):
        jobs.add.delay_many([(1,)], bogus=True)
    assert_nothing_written(raw_redis)


def test_bad_tags_and_retry_at_enqueue_are_refused(raw_redis):
    with pytest.raises(TypeError, match="tags"):
        jobs.add.apply_async(args=[1], tags="billing")
    with pytest.raises(TypeError, match="retry"):
        jobs.add.apply_async(args=[1], retry="yes")
    assert_nothing_written(raw_redis)


# --- delay_many ----------------------------------------------------------------------------------
def test_delay_many_ten_thousand_jobs_in_one_round_trip(warm_redis, monkeypatch):
    raw_redis = warm_redis
    sends = []
    original_send = redis_layer.CountingConnection.send_packed_command

    def counting_send(self, command, *args, **kwargs):
        sends.append(1)
        return original_send(self, command, *args, **kwargs)

    monkeypatch.setattr(redis_layer.CountingConnection, "send_packed_command", counting_send)
    raw_redis.config_resetstat()
    replies_before = redis_layer.round_trips()

    refs = jobs.add.delay_many([(index,) for index in range(10_000)])

    replies = redis_layer.round_trips() - replies_before
    monkeypatch.undo()
    assert len(sends) == 1, "delay_many must write in one network round trip"
    assert replies == 2  # one pipeline: the LPUSH reply and the SADD reply
    stats = raw_redis.info("commandstats")
    assert stats["cmdstat_lpush"]["calls"] == 1
    assert stats["cmdstat_sadd"]["calls"] == 1

    assert len(refs) == 10_000
    assert all(isinstance(ref, djwork.JobRef) and HEX24.match(ref.jid) for ref in refs)
    assert len({ref.jid for ref in refs}) == 10_000
    assert raw_redis.llen(keys.queue("default")) == 10_000
    assert raw_redis.smembers("queues") == {b"default"}
    # FIFO: the first job sits at the tail, so RPOP (the worker's end) returns it first.
    first = json.loads(raw_redis.rpop(keys.queue("default")))
    assert (first["jid"], first["args"]) == (refs[0].jid, [0])
    second = json.loads(raw_redis.rpop(keys.queue("default")))
    assert (second["jid"], second["args"]) == (refs[1].jid, [1])
    newest = json.loads(raw_redis.lindex(keys.queue("default"), 0))
    assert (newest["jid"], newest["args"]) == (refs[-1].jid, [9_999])
    assert set(newest) == QUEUED_KEYS
    all_jids = [json.loads(raw)["jid"] for raw in raw_redis.lrange(keys.queue("default"), 0, -1)]
    assert list(reversed(all_jids)) == [ref.jid for ref in refs[2:]]


def test_delay_many_item_shapes(raw_redis):
    refs = jobs.add.delay_many([
        (1,),                   # tuple of positional arguments
        [2, 3],                 # list of positional arguments
        {"a": 4},               # dict of keyword arguments
        ((5,), {"b": 6}),       # (args, kwargs) pair
        ([7], {}),              # (args, kwargs) pair with no kwargs
    ])
    shapes = [(job["args"], job.get("kwargs")) for job in queued(raw_redis)]
    assert shapes == [([1], None), ([2, 3], None), ([], {"a": 4}), ([5], {"b": 6}), ([7], None)]
    assert [job["jid"] for job in queued(raw_redis)] == [ref.jid for ref in refs]
    for job in queued(raw_redis):
        assert set(job) - {"kwargs"} == QUEUED_KEYS


def test_delay_many_with_options_and_set(raw_redis):
    jobs.add.delay_many([(1,), (2,)], queue="low", retry=3)
    assert [(job["args"], job["queue"], job["retry"]) for job in queued(raw_redis, "low")] == [
        ([1], "low", 3), ([2], "low", 3)]
    raw_redis.flushdb()
    jobs.add.set(queue="critical").delay_many([(1,)])
    assert only_job(raw_redis, "critical")[0]["queue"] == "critical"
    raw_redis.flushdb()
    before = time.time()
    refs = jobs.add.delay_many([(1,), (2,)], countdown=120)
    entries = raw_redis.zrange(keys.SCHEDULE, 0, -1, withscores=True)
    assert sorted(json.loads(raw)["jid"] for raw, _score in entries) == sorted(ref.jid for ref in refs)
    for raw, score in entries:
        assert score >= before + 120
        assert set(json.loads(raw)) == SCHEDULED_KEYS
    assert raw_redis.exists(keys.queue("default")) == 0


def test_delay_many_validates_every_item_before_writing(raw_redis):
    with pytest.raises(djwork.ArgumentError, match="Decimal"):
        jobs.add.delay_many([(1,), (2,), (Decimal("3"),)])
    with pytest.raises(TypeError, match=r"tests\.jobs\.add"):
        jobs.add.delay_many([(1,), (1, 2, 3)])
    with pytest.raises(djwork.ArgumentError, match="int"):
        jobs.add.delay_many([(1,), 2])
    assert_nothing_written(raw_redis)


def test_delay_many_of_nothing(raw_redis):
    assert jobs.add.delay_many([]) == []
    assert_nothing_written(raw_redis)


# --- delay_on_commit ---------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_delay_on_commit_waits_for_the_commit(raw_redis):
    with transaction.atomic():
        ref = jobs.add.delay_on_commit(1, b=2)
        assert HEX24.match(ref.jid)
        assert raw_redis.dbsize() == 0
    job, _raw = only_job(raw_redis)
    assert job["jid"] == ref.jid
    assert (job["args"], job["kwargs"]) == ([1], {"b": 2})
    assert set(job) == QUEUED_KEYS | {"kwargs"}


@pytest.mark.django_db(transaction=True)
def test_delay_on_commit_pushes_nothing_on_rollback(raw_redis):
    with pytest.raises(RuntimeError), transaction.atomic():
        jobs.add.delay_on_commit(1)
        jobs.add.set(queue="low").delay_on_commit(2)
        raise RuntimeError("roll back")
    assert_nothing_written(raw_redis)


@pytest.mark.django_db(transaction=True)
def test_delay_on_commit_with_set_and_nested_savepoints(raw_redis):
    with transaction.atomic():
        ref = jobs.add.set(queue="low").delay_on_commit(3)
        try:
            with transaction.atomic():
                jobs.add.delay_on_commit(4)
                raise ValueError("inner rollback")
        except ValueError:
            pass
        assert raw_redis.dbsize() == 0
    job, _raw = only_job(raw_redis, "low")
    assert job["jid"] == ref.jid
    assert raw_redis.exists(keys.queue("default")) == 0  # the rolled-back savepoint's job never went


@pytest.mark.django_db(transaction=True)
def test_delay_on_commit_outside_a_transaction_pushes_at_once(raw_redis):
    ref = jobs.add.delay_on_commit(5)
    assert only_job(raw_redis)[0]["jid"] == ref.jid


@pytest.mark.django_db(transaction=True)
def test_delay_on_commit_checks_arguments_at_call_time(raw_redis):
    with transaction.atomic():
        with pytest.raises(djwork.ArgumentError):
            jobs.schedule_meeting.delay_on_commit("r", when=dt.date(2024, 1, 1))
        with pytest.raises(TypeError):
            jobs.add.delay_on_commit()
    assert_nothing_written(raw_redis)


# --- running inline -----------------------------------------------------------------------------------
def test_calling_a_job_runs_it_inline_without_redis(raw_redis):
    assert jobs.add(1, 2) == 3
    assert jobs.add(1) == 3
    assert jobs.add(a=4, b=4) == 8
    assert jobs.no_args() == "ran"
    assert_nothing_written(raw_redis)


def test_bound_job_inline_gets_self_with_request_and_retry(raw_redis):
    result = jobs.bound(3, y=4)
    assert result["sum"] == 7
    this = result["self"]
    assert this is jobs.bound  # Celery's rule: a bound task's self is the task itself
    assert isinstance(this, djwork.Task)
    assert this.name == "tests.jobs.bound"
    assert this.max_retries == 2
    request = result["request"]
    assert request.args == [3]
    assert request.kwargs == {"y": 4}
    assert request.id is None
    assert request.retries == 0
    assert request.called_directly is True
    assert this.request is not request  # popped once the call returned: the default request again
    assert this.request.called_directly is True

    with pytest.raises(djwork.Retry) as caught:
        this.retry(countdown=5)
    assert caught.value.countdown == 5
    assert caught.value.max_retries == 2

    with pytest.raises(djwork.Retry) as caught:
        this.retry()
    assert caught.value.countdown == 7  # default_retry_delay

    error = ValueError("flaky")
    with pytest.raises(djwork.Retry) as caught:
        this.retry(exc=error, eta=time.time() + 30)
    assert caught.value.exc is error
    assert 28 <= caught.value.countdown <= 30

    this.push_request(retries=2)  # out of retries: the original error, or MaxRetriesExceededError
    try:
        with pytest.raises(ValueError, match="flaky"):
            this.retry(exc=error)
        with pytest.raises(djwork.MaxRetriesExceededError):
            this.retry()
        with pytest.raises(djwork.Retry):
            this.retry(max_retries=5)
    finally:
        this.pop_request()
    assert_nothing_written(raw_redis)


def test_bound_job_enqueues_without_self(raw_redis):
    jobs.bound.delay(3, y=1)
    job, _raw = only_job(raw_redis)
    assert (job["class"], job["args"], job["kwargs"], job["retry"]) == ("tests.jobs.bound", [3], {"y": 1}, 2)
    with pytest.raises(TypeError, match=r"tests\.jobs\.bound"):
        jobs.bound.delay()
    with pytest.raises(TypeError, match=r"tests\.jobs\.bound"):
        jobs.bound.delay(1, 2, 3)
    out = jobs.bound.run(Request(id=job["jid"], retries=1, args=job["args"], kwargs=job["kwargs"]))
    assert out["sum"] == 4
    assert out["request"].id == job["jid"]
    assert out["request"].retries == 1


# --- strict arguments ------------------------------------------------------------------------------
class Opaque:
    pass


NOT_JSON = [
    pytest.param(dt.datetime(2024, 1, 1, 9, 0), "datetime", id="datetime"),
    pytest.param(dt.date(2024, 1, 1), "date", id="date"),
    pytest.param({1, 2}, "set", id="set"),
    pytest.param(frozenset([1]), "frozenset", id="frozenset"),
    pytest.param(Decimal("1.50"), "Decimal", id="decimal"),
    pytest.param(Opaque(), "Opaque", id="object"),
    pytest.param(b"raw", "bytes", id="bytes"),
    pytest.param({1: "one"}, "int", id="int-key-dict"),
    pytest.param(float("nan"), "float", id="nan"),
    pytest.param(float("inf"), "float", id="inf"),
    pytest.param(2**70, "int", id="huge-int"),
    pytest.param([1, [2, dt.time(9, 0)]], "time", id="nested-in-list"),
    pytest.param({"a": {"b": Decimal(1)}}, "Decimal", id="nested-in-dict"),
    pytest.param(({"ok": [Opaque()]},), "Opaque", id="nested-in-tuple"),
]


@pytest.mark.parametrize(("value", "type_name"), NOT_JSON)
def test_non_json_arguments_are_refused_naming_the_argument(raw_redis, value, type_name):
    for call in (
        lambda: jobs.schedule_meeting.delay("room-1", when=value),
        lambda: jobs.schedule_meeting.delay("room-1", value),
        lambda: jobs.schedule_meeting.apply_async(args=["room-1"], kwargs={"when": value}),
        lambda: jobs.schedule_meeting.perform_in(60, "room-1", when=value),
        lambda: jobs.schedule_meeting.delay_many([("room-1", value)]),
    ):
        with pytest.raises(djwork.ArgumentError) as caught:
            call()
        message = str(caught.value)
        assert "'when'" in message, message
        assert type_name in message, message
        assert "tests.jobs.schedule_meeting" in message, message
        assert isinstance(caught.value, TypeError)
    assert_nothing_written(raw_redis)


def test_refusals_give_the_path_inside_nested_values(raw_redis):
    with pytest.raises(djwork.ArgumentError, match=r"'when'\[1\]\[1\] is a datetime\.time"):
        jobs.schedule_meeting.delay("r", when=[1, [2, dt.time(9, 0)]])
    with pytest.raises(djwork.ArgumentError, match=r"'when'\['a'\]\['b'\] is a decimal\.Decimal"):
        jobs.schedule_meeting.delay("r", when={"a": {"b": Decimal(1)}})
    with pytest.raises(djwork.ArgumentError, match=r"'notes'"):
        jobs.schedule_meeting.delay("r", notes={"at": dt.datetime(2024, 1, 1)})
    with pytest.raises(djwork.ArgumentError, match=r"'room'"):
        jobs.schedule_meeting.delay(Opaque())
    with pytest.raises(djwork.ArgumentError, match=r"args\[1\]"):  # *args has no parameter names
        jobs.anything.delay(1, {2})
    with pytest.raises(djwork.ArgumentError, match=r"'extra'"):  # **kwargs: the keyword is the name
        jobs.anything.delay(extra=Decimal(2))
    assert_nothing_written(raw_redis)


def test_json_native_values_pass_and_round_trip(raw_redis):
    value = {"a": [1, 2.5, None, True, False, "s", {"nested": []}], "b": -(2**63), "c": 2**64 - 1}
    jobs.schedule_meeting.delay("r", when=value, notes=("x", "y"))
    job, _raw = only_job(raw_redis)
    assert job["kwargs"] == {"when": value, "notes": ["x", "y"]}


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: jobs.add.delay(), id="missing"),
        pytest.param(lambda: jobs.add.delay(1, 2, 3), id="too-many"),
        pytest.param(lambda: jobs.add.delay(1, c=3), id="unexpected-keyword"),
        pytest.param(lambda: jobs.add.delay(1, a=1), id="multiple-values"),
        pytest.param(lambda: jobs.no_args.delay(1), id="takes-none"),
        pytest.param(lambda: jobs.schedule_meeting.delay("r", None, None), id="keyword-only"),
        pytest.param(lambda: jobs.add.apply_async(args=[1, 2, 3]), id="apply_async"),
        pytest.param(lambda: jobs.add.perform_in(10), id="perform_in"),
        pytest.param(lambda: jobs.add.set(queue="low").delay(b=1), id="set"),
    ],
)
def test_wrong_arity_is_a_type_error_at_enqueue(raw_redis, call):
    with pytest.raises(TypeError) as caught:
        call()
    assert not isinstance(caught.value, djwork.ArgumentError)
    assert str(caught.value).startswith("tests.jobs.")
    assert_nothing_written(raw_redis)


def test_arity_errors_match_pythons_wording(raw_redis):
    with pytest.raises(TypeError, match="missing a required argument: 'a'"):
        jobs.add.delay()
    with pytest.raises(TypeError, match="too many positional arguments"):
        jobs.add.delay(1, 2, 3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'c'"):
        jobs.add.delay(1, c=3)
    with pytest.raises(TypeError, match="multiple values for argument 'a'"):
        jobs.add.delay(1, a=1)
    assert jobs.anything.delay(1, 2, x=3).jid  # *args/**kwargs accept anything JSON-native


def test_strict_args_off_relaxes_only_the_json_check(raw_redis):
    with djwork_settings(STRICT_ARGS=False):
        jobs.schedule_meeting.delay("r", when=Decimal("1.50"))
        jobs.schedule_meeting.delay("r", when=dt.datetime(2024, 1, 1, 9, 0, tzinfo=dt.UTC))
        with pytest.raises(TypeError, match="missing a required argument"):
            jobs.add.delay()
        # Mixed values still make valid JSON: NaN is null, int keys strings, the rest str().
        jobs.schedule_meeting.delay("r", when=[{1: "one"}, float("nan"), {3}])
    first, second, third = queued(raw_redis)
    assert first["kwargs"] == {"when": "1.50"}
    assert second["kwargs"]["when"].startswith("2024-01-01T09:00:00")
    assert third["kwargs"] == {"when": [{"1": "one"}, None, "{3}"]}
    with pytest.raises(djwork.ArgumentError):  # back on once the override ends
        jobs.schedule_meeting.delay("r", when=Decimal("1.50"))


# --- client middleware -----------------------------------------------------------------------------
def test_client_middleware_edits_the_payload(raw_redis):
    jobs.calls.clear()
    with djwork_settings(CLIENT_MIDDLEWARE=["tests.jobs.stamp_tenant"]):
        ref = jobs.add.delay(1)
        job, _raw = only_job(raw_redis)
        assert job["tenant"] == "acme"
        assert set(job) == QUEUED_KEYS | {"tenant"}
        assert jobs.calls == [("stamp_tenant", ref.jid)]
        # A middleware that changes the queue moves the job (and its SADD) there.
        jobs.add.delay("reroute-me")
        assert only_job(raw_redis, "low")[0]["queue"] == "low"
        assert raw_redis.smembers("queues") == {b"default", b"low"}
        # ... and runs for scheduled jobs too.
        jobs.add.perform_in(60, 2)
        assert only_scheduled(raw_redis)[0]["tenant"] == "acme"
    jobs.add.delay(3)  # the override is gone: no middleware
    assert "tenant" not in queued(raw_redis)[-1]


def test_client_middleware_returning_none_stops_the_push(raw_redis):
    with djwork_settings(CLIENT_MIDDLEWARE=["tests.jobs.stop_everything"]):
        ref = jobs.add.delay(1)
        assert ref == djwork.JobRef(None)
        assert ref.jid is None and ref.id is None and str(ref) == ""
        assert jobs.add.perform_in(60, 1).jid is None
        assert [ref.jid for ref in jobs.add.delay_many([(1,), (2,)])] == [None, None]
    assert_nothing_written(raw_redis)


def test_client_middleware_runs_for_every_delay_many_item(raw_redis):
    with djwork_settings(CLIENT_MIDDLEWARE=["tests.jobs.stamp_tenant", "tests.jobs.stop_odd"]):
        refs = jobs.add.delay_many([(1,), (2,), (3,), (4,)])
    assert refs[0].jid is None and refs[2].jid is None
    assert HEX24.match(refs[1].jid) and HEX24.match(refs[3].jid)
    assert [(job["jid"], job["args"], job["tenant"]) for job in queued(raw_redis)] == [
        (refs[1].jid, [2], "acme"), (refs[3].jid, [4], "acme")]


def test_client_middleware_class_and_callable_entries(raw_redis):
    jobs.CountingMiddleware.seen = 0
    with djwork_settings(CLIENT_MIDDLEWARE=[jobs.CountingMiddleware, jobs.stamp_tenant]):
        jobs.add.delay(1)
        jobs.add.delay(2)
    assert [(job["counted"], job["tenant"]) for job in queued(raw_redis)] == [(1, "acme"), (2, "acme")]


@pytest.mark.django_db(transaction=True)
def test_client_middleware_stopping_a_delay_on_commit(raw_redis):
    with djwork_settings(CLIENT_MIDDLEWARE=["tests.jobs.stop_odd"]), transaction.atomic():
        jobs.add.delay_on_commit(1)
        kept = jobs.add.delay_on_commit(2)
    assert only_job(raw_redis)[0]["jid"] == kept.jid


# --- failure handling -----------------------------------------------------------------------------------
def test_a_failing_queues_sadd_still_queues_the_job(raw_redis, caplog):
    raw_redis.set("queues", "not a set")
    caplog.set_level(logging.ERROR, logger="djwork.client")
    ref = jobs.add.delay(1)
    job, _raw = only_job(raw_redis)
    assert job["jid"] == ref.jid
    assert raw_redis.get("queues") == b"not a set"
    assert any("SADD queues" in record.getMessage() and "WRONGTYPE" in record.getMessage()
               for record in caplog.records)

    caplog.clear()
    refs = jobs.add.delay_many([(2,), (3,)])
    assert [job["jid"] for job in queued(raw_redis)] == [ref.jid, refs[0].jid, refs[1].jid]
    assert any("SADD queues" in record.getMessage() for record in caplog.records)


def test_a_failing_lpush_raises(raw_redis):
    raw_redis.set(keys.queue("default"), "not a list")
    with pytest.raises(redis_py.exceptions.ResponseError, match="WRONGTYPE"):
        jobs.add.delay(1)
    with pytest.raises(redis_py.exceptions.ResponseError, match="WRONGTYPE"):
        jobs.add.delay_many([(1,)])


def test_unicode_arguments_round_trip(raw_redis):
    jobs.add.delay("héllo ✓ 日本", b="ß")
    job, _raw = only_job(raw_redis)
    assert (job["args"], job["kwargs"]) == (["héllo ✓ 日本"], {"b": "ß"})


# --- the push under network faults (the write path is not redis-py's Pipeline) ----------
FAST_REDIS = {"SOCKET_TIMEOUT": 0.5, "CONNECT_TIMEOUT": 0.5, "REDIS_BACKOFF_BASE": 0.01,
              "REDIS_BACKOFF_CAP": 0.05, "REDIS_MAX_ATTEMPTS": 50}


@pytest.fixture
def proxy(redis_url):
    from tests.faultproxy import FaultProxy

    with FaultProxy.in_front_of(redis_url) as running:
        yield running


def test_a_lost_push_reply_is_not_replayed_and_the_pool_recovers(raw_redis, proxy):
    with djwork_settings(REDIS_URL=proxy.url, **FAST_REDIS):
        jobs.add.delay(0)  # pool a live connection
        fired = proxy.drop_next("LPUSH")
        with pytest.raises(redis_py.exceptions.ConnectionError) as raised:
            jobs.add.delay(1)
        assert fired.is_set()
        assert not isinstance(raised.value, redis_layer.ConnectPhaseError)
        # The command ran and left the client once: neither djwork nor redis-py re-sent it.
        assert proxy.count("LPUSH") == 2
        assert [job["args"] for job in queued(raw_redis)] == [[0], [1]]
        # The broken connection was not handed back to the pool: the next push just works.
        ref = jobs.add.delay(2)
        assert queued(raw_redis)[-1]["jid"] == ref.jid
        refs = jobs.add.delay_many([(3,), (4,)])
    assert [job["jid"] for job in queued(raw_redis)][-2:] == [ref.jid for ref in refs]


def test_a_stalled_push_times_out_once_and_the_next_push_works(raw_redis, proxy):
    with djwork_settings(REDIS_URL=proxy.url, **FAST_REDIS):
        jobs.add.delay(0)
        fired = proxy.stall_next("LPUSH")
        with pytest.raises(redis_py.exceptions.TimeoutError) as raised:
            jobs.add.delay(1)
        assert fired.is_set()
        assert raised.value.written is None  # sent, no reply: whether it was written is unknown (it was)
        assert proxy.count("LPUSH") == 2
        jobs.add.delay(2)
    assert [job["args"] for job in queued(raw_redis)] == [[0], [1], [2]]


def test_a_refused_dial_is_retried_and_the_job_pushed_once(raw_redis, proxy):
    import threading

    with djwork_settings(REDIS_URL=proxy.url, **FAST_REDIS):
        proxy.refuse()
        opener = threading.Timer(0.2, proxy.allow)
        opener.start()
        try:
            ref = jobs.add.delay(1)
        finally:
            opener.cancel()
    assert proxy.count("LPUSH") == 1
    assert only_job(raw_redis)[0]["jid"] == ref.jid
