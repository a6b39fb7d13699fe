"""Job priorities at enqueue (docs/priority.md): the priority -> lane mapping, the payload and the list a job
is pushed to, for Celery's API and Django Tasks'; the worker's side is tests/test_priority_worker.py."""

from __future__ import annotations

import json

import pytest

import djwork
from djwork import client
from djwork.api import Queue
from djwork.jobs import priority
from djwork.options import OptionError
from djwork.redis import keys, lanes
from tests import priority_jobs


@pytest.mark.parametrize(("celery", "lane"), [(0, 0), (1, -1), (5, -5), (9, -9)])
def test_celery_priorities_keep_celery_on_redis_direction(celery, lane):
    # 0 is the most urgent and the queue's own list; each higher number a lane further below.
    assert priority.celery_lane(celery) == lane


@pytest.mark.parametrize(("django", "lane"), [
    (0, 0), (1, 1), (11, 1), (12, 2), (50, 5), (100, 9), (-1, -1), (-50, -5), (-100, -9)])
def test_django_priorities_spread_evenly_over_the_lanes(django, lane):
    assert priority.django_lane(django) == lane


def test_every_django_priority_maps_in_order_onto_every_lane():
    mapped = [priority.django_lane(value) for value in range(-100, 101)]
    assert mapped == sorted(mapped) and set(mapped) == set(range(-9, 10))
    with pytest.raises(OptionError, match="outside Django Tasks' range"):
        priority.django_lane(101)


@pytest.mark.parametrize("payload", [{}, {"lane": 0}, {"lane": 10}, {"lane": -10}, {"lane": True}, {"lane": "3"},
                                     {"lane": 2.0}])
def test_a_payload_without_a_readable_lane_goes_to_the_queue_itself(payload):
    assert lanes.lane_of(payload) == 0
    assert lanes.list_key("default", lanes.lane_of(payload)) == "queue:default"
    assert lanes.lane_of_raw(json.dumps(payload)) == 0


def test_a_lane_push_is_registered_after_it():
    assert lanes.push_commands("default", -3, ["job"]) == [
        ("LPUSH", "djwork:lane:default|-3", "job"), ("SADD", "djwork:lanes:default", -3)]
    assert lanes.push_commands("default", 0, ["job"]) == [("LPUSH", "queue:default", "job")]


def lane_jobs(raw_redis, lane: int) -> list[dict]:
    return [json.loads(raw) for raw in raw_redis.lrange(lanes.list_key("default", lane), 0, -1)]


def test_each_celery_call_form_puts_the_job_in_its_lane(raw_redis):
    ordered = priority_jobs.ordered
    ordered.apply_async(("apply_async",), priority=3)
    ordered.set(priority=3).delay("set")
    ordered.s("signature").set(priority=3).apply_async()
    ordered.signature(("options",), priority=3).delay()
    djwork.send_task("tests.priority_jobs.ordered", ("send_task",), priority=3)
    ordered.delay_many([("bulk",)], priority=3)
    queued = lane_jobs(raw_redis, -3)
    assert [job["args"][0] for job in reversed(queued)] == [
        "apply_async", "set", "signature", "options", "send_task", "bulk"]
    assert all((job["priority"], job["lane"]) == (3, -3) for job in queued)
    assert raw_redis.llen(keys.queue("default")) == 0
    assert raw_redis.smembers(keys.lanes("default")) == {b"-3"}
    assert raw_redis.smembers(keys.QUEUES) == {b"default"}


def test_priority_zero_or_none_leaves_the_payload_as_sidekiq_has_it(raw_redis):
    priority_jobs.ordered.delay("plain")
    priority_jobs.ordered.apply_async(("zero",), priority=0)
    plain, zero = (json.loads(raw) for raw in reversed(raw_redis.lrange(keys.queue("default"), 0, -1)))
    assert "priority" not in plain and "lane" not in plain
    assert zero["priority"] == 0 and "lane" not in zero
    assert not raw_redis.exists(keys.lanes("default"))


def test_a_job_s_own_priority_is_its_calls_default(raw_redis):
    urgent_by_default = djwork.job(name="tests.priority.low", priority=8)(lambda: None)
    urgent_by_default.delay()
    urgent_by_default.apply_async(priority=0)  # the call's own wins: back to the queue's own list
    assert [job["priority"] for job in lane_jobs(raw_redis, -8)] == [8]
    (zero,) = raw_redis.lrange(keys.queue("default"), 0, -1)
    assert "lane" not in json.loads(zero)


def test_a_scheduled_or_unique_job_keeps_its_lane(raw_redis):
    priority_jobs.ordered.apply_async(("later",), priority=4, countdown=60)
    ((scheduled, _score),) = raw_redis.zrange(keys.SCHEDULE, 0, -1, withscores=True)
    assert json.loads(scheduled)["lane"] == -4
    assert priority_jobs.ordered.set(unique_for=60, priority=4).delay("unique").enqueued
    assert [job["args"] for job in lane_jobs(raw_redis, -4)] == [["unique"]]
    assert raw_redis.smembers(keys.lanes("default")) == {b"-4"}


def test_a_batch_pushes_its_jobs_to_their_lanes(raw_redis):
    batch = djwork.Batch(description="prioritised")
    with batch.jobs():
        priority_jobs.ordered.apply_async(("in a batch",), priority=6)
        priority_jobs.ordered.delay("plain in a batch")
    assert [job["args"] for job in lane_jobs(raw_redis, -6)] == [["in a batch"]]
    assert raw_redis.llen(keys.queue("default")) == 1
    assert raw_redis.smembers(keys.lanes("default")) == {b"-6"}


def test_a_queue_s_size_and_latency_count_its_lanes(raw_redis):
    priority_jobs.ordered.delay("plain")
    priority_jobs.ordered.apply_async(("low",), priority=9)
    priority_jobs.django_ordered.using(priority=80).enqueue("high")
    (summary,) = Queue.all()
    assert (summary.size, summary.prioritised) == (3, 2)
    assert Queue("default").size() == 3
    assert Queue("default").latency() >= 0
    assert Queue("default").clear() == 3
    assert raw_redis.llen(keys.lane("default", "-9")) == 0 and raw_redis.llen(keys.lane("default", "8")) == 0


def test_a_raw_push_with_a_lane_goes_to_it(raw_redis):
    client.push({"class": "tests.priority_jobs.ordered", "args": ["raw"], "queue": "low", "lane": 2,
                 "jid": "a" * 24, "retry": True, "created_at": 1.0})
    assert raw_redis.llen(keys.lane("low", "2")) == 1 and raw_redis.smembers(keys.lanes("low")) == {b"2"}


def test_the_registered_lanes_are_read_safely_highest_first():
    assert lanes.registered({b"-3", b"7", b"0", b"x", b"12", b"", b"-9"}) == [7, -3, -9]
    assert lanes.registered(ValueError("WRONGTYPE")) == []


def test_a_revoke_finds_a_waiting_job_in_its_lane(raw_redis):
    ref = priority_jobs.ordered.apply_async(("revoked",), priority=2)
    assert djwork.revoke(ref.id)
    assert raw_redis.llen(keys.lane("default", "-2")) == 0


def test_a_fetch_reads_no_lane_of_a_queue_that_has_none(raw_redis):
    # The lanes SET rides in fetch.lua's one EXISTS over the rarely present keys: no command of its own.
    from djwork.redis import scripts

    script_keys = [keys.PAUSED, keys.ORPHAN_COUNTS, keys.FINISHED_LATE, keys.REVOKED, keys.RESULT_WAITERS,
                   keys.queue("default"), "t:inprogress", keys.isolated("default"), keys.lanes("default")]

    def commands_of_a_fetch() -> dict[str, int]:
        raw_redis.config_resetstat()
        scripts.evaluate(raw_redis, "fetch", script_keys, [1, "reliable", 0, 0, "default"])
        return {name[len("cmdstat_"):]: stats["calls"] for name, stats in raw_redis.info("commandstats").items()
                if not name.startswith(("cmdstat_config", "cmdstat_eval", "cmdstat_info"))}

    priority_jobs.ordered.delay("plain")
    assert commands_of_a_fetch() == {"exists": 1, "lrange": 1, "lpush": 1, "ltrim": 1}
    priority_jobs.ordered.apply_async(("low",), priority=1)
    used = commands_of_a_fetch()
    assert used["smembers"] == 1 and raw_redis.llen("t:inprogress") == 2
    # The fetch that finds the lane empty unregisters it; the one after is back to one EXISTS.
    assert commands_of_a_fetch()["srem"] == 1 and not raw_redis.exists(keys.lanes("default"))
    assert commands_of_a_fetch() == {"exists": 1, "lrange": 1}
