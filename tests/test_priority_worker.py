"""Job priorities on a real worker (docs/priority.md): lanes taken in order, kept through a crash, a pause and
a retry. Every job notes its run on ``t:order`` (tests/priority_jobs.py), so the order is read from Redis."""

from __future__ import annotations

import json
import signal

import pytest

from djwork.redis import keys
from tests import priority_jobs
from tests.helpers_worker import in_progress_items, wait_beats, wait_until

FAST_RECOVERY = {"ORPHAN_THRESHOLD": 2, "HEARTBEAT_INTERVAL": 0.5}


@pytest.mark.parametrize("fetch", ["reliable", "basic"])
def test_jobs_pushed_while_no_worker_runs_run_in_priority_order(workers, raw_redis, fetch):
    ordered = priority_jobs.ordered
    ordered.delay("none-1")
    ordered.apply_async(("c9",), priority=9)
    ordered.set(priority=5).delay("c5")
    ordered.s("c3").set(priority=3).apply_async()
    ordered.apply_async(("c0",), priority=0)
    priority_jobs.django_ordered.using(priority=50).enqueue("d50")
    priority_jobs.django_ordered.using(priority=-50).enqueue("dm50")
    ordered.delay("none-2")
    # Nothing but the plain jobs (and the explicit priority 0, Celery's default) in Sidekiq's list.
    assert raw_redis.llen(keys.queue("default")) == 3
    assert {member.decode() for member in raw_redis.smembers(keys.lanes("default"))} == {"5", "-3", "-5", "-9"}

    workers.start("-c", "1", overrides={"LOG_JOBS": False, "FETCH": fetch})
    wait_until(lambda: len(priority_jobs.run_order(raw_redis)) == 8, 30, "all eight jobs to run")
    assert priority_jobs.run_order(raw_redis) == [
        "d50 django",  # Django's 50: lane 5, above the queue's own list
        "none-1 None", "c0 0", "none-2 None",  # the queue's own list, first in first out
        "c3 3", "c5 5", "dm50 django",  # lanes below it: Celery's 3 (lane -3), then lane -5 in push order
        "c9 9",
    ]
    # Emptied lanes are unregistered: the worker reads no lane list any more.
    wait_until(lambda: not raw_redis.exists(keys.lanes("default")), 10, "the lanes SET to be dropped")


def test_a_lane_job_pushed_to_an_idle_worker_runs(workers, raw_redis):
    worker = workers.start("-c", "2")
    worker.identity(raw_redis)
    priority_jobs.ordered.apply_async(("late",), priority=7)
    wait_until(lambda: priority_jobs.run_order(raw_redis) == ["late 7"], 30, "the lane job to run")


def test_a_paused_queue_holds_its_lane_jobs_too(workers, raw_redis):
    raw_redis.sadd(keys.PAUSED, "default")
    worker = workers.start("-c", "2")
    identity = worker.identity(raw_redis)
    priority_jobs.ordered.apply_async(("upper",), priority=1)
    priority_jobs.django_ordered.using(priority=100).enqueue("top")
    wait_beats(raw_redis, identity, 2)
    assert priority_jobs.run_order(raw_redis) == []
    assert raw_redis.llen(keys.lane("default", "-1")) == 1 and raw_redis.llen(keys.lane("default", "9")) == 1

    raw_redis.srem(keys.PAUSED, "default")
    wait_until(lambda: sorted(priority_jobs.run_order(raw_redis)) == ["top django", "upper 1"], 30,
               "both lane jobs once resumed")


def test_kill_minus_nine_of_a_lane_job_loses_nothing_and_it_comes_back_to_its_lane(workers, raw_redis):
    ref = priority_jobs.held.apply_async(("victim",), priority=4)
    victim = workers.start("-c", "1", overrides=FAST_RECOVERY, label="victim")
    identity = victim.identity(raw_redis)
    wait_until(lambda: raw_redis.lrange(priority_jobs.STARTED, 0, -1) == [b"victim"], 30, "the lane job to start")
    # Taken from its lane onto the victim's in-progress list for the queue, as a plain job is.
    assert raw_redis.llen(keys.lane("default", "-4")) == 0
    held = {key: items for key, items in in_progress_items(raw_redis).items() if items}
    assert list(held) == [keys.in_progress(identity, "default")]
    victim.send(signal.SIGKILL)
    assert victim.wait_exit(10) == -signal.SIGKILL

    # The rescuer recovers it with its queue paused: it is seen back in its lane, registered, not yet run.
    raw_redis.sadd(keys.PAUSED, "default")
    workers.start("-c", "1", overrides=FAST_RECOVERY, label="rescuer")
    wait_until(lambda: raw_redis.llen(keys.lane("default", "-4")) == 1, 30, "the job back in its lane")
    (back,) = raw_redis.lrange(keys.lane("default", "-4"), 0, -1)
    assert json.loads(back)["jid"] == ref.jid
    assert b"-4" in raw_redis.smembers(keys.lanes("default"))
    assert raw_redis.llen(keys.queue("default")) == 0 and not any(in_progress_items(raw_redis).values())

    raw_redis.set(priority_jobs.RELEASE, "1")
    raw_redis.srem(keys.PAUSED, "default")
    wait_until(lambda: priority_jobs.run_order(raw_redis) == ["victim 4"], 30, "the recovered job to run once")
    assert raw_redis.zcard(keys.DEAD) == 0


def test_a_retried_lane_job_keeps_its_priority(workers, raw_redis):
    # Paused while it waits out its retry: the promoted retry is seen in its lane before it runs again.
    priority_jobs.retried_once.apply_async(("again",), priority=2)
    worker = workers.start("-c", "1", overrides={"POLL_INTERVAL_AVERAGE": 0.5})
    wait_until(lambda: priority_jobs.run_order(raw_redis) == ["again 2 try0"], 30, "the first run")
    raw_redis.sadd(keys.PAUSED, "default")
    wait_until(lambda: raw_redis.llen(keys.lane("default", "-2")) == 1, 30, "the retry promoted to its lane")
    retry = json.loads(raw_redis.lindex(keys.lane("default", "-2"), 0))
    assert (retry["priority"], retry["lane"], retry["retry_count"]) == (2, -2, 0)
    assert raw_redis.llen(keys.queue("default")) == 0
    worker.identity(raw_redis)

    raw_redis.srem(keys.PAUSED, "default")
    wait_until(lambda: priority_jobs.run_order(raw_redis) == ["again 2 try0", "again 2 try1"], 30, "the retry")
