"""Batches without workers: the Lua accounting driven through the scripts that end jobs, against real Redis.

Each job's end is played through the script a worker runs for it (fetch.lua's
ack, fail.lua's filing, move_entry.lua's burial, remove_entry.lua's delete),
so these tests pin the membership rules: each event claimed once, every
outcome counted once however often it is replayed.
"""

from __future__ import annotations

import json
import time

import pytest

import djwork
from djwork import dead, job_locks
from djwork.batches import BatchError
from djwork.batches import runtime as batch_runtime
from djwork.redis import keys, scripts
from tests import batch_jobs
from tests.support.batches import ack, fail


def events_pushed(raw_redis, queue: str = "default") -> list[str]:
    """Events whose callbacks sit on ``queue``, oldest push first."""
    return [json.loads(raw)["args"][0]["event"] for raw in reversed(raw_redis.lrange(keys.queue(queue), 0, -1))
            if b"callback_bid" in raw]


def members(raw_redis, queue: str = "default") -> list[dict]:
    return [json.loads(raw) for raw in reversed(raw_redis.lrange(keys.queue(queue), 0, -1))
            if b"callback_bid" not in raw]


def make(raw_redis, count: int, **options) -> tuple[djwork.Batch, list[dict]]:
    batch = djwork.Batch(on_complete=batch_jobs.on_event, on_success=batch_jobs.on_event,
                         on_death=batch_jobs.on_event, on_settled=batch_jobs.on_event, callback_queue="cb",
                         **options)
    with batch.jobs():
        for index in range(count):
            batch_jobs.member.delay(index)
    return batch, members(raw_redis)


def test_a_batch_is_written_whole_with_its_jids_and_each_job_carries_its_bid(raw_redis):
    batch, jobs = make(raw_redis, 5, description="five")
    assert [job["bid"] for job in jobs] == [batch.bid] * 5
    assert sorted(raw_redis.smembers(keys.batch_jids(batch.bid))) == sorted(job["jid"].encode() for job in jobs)
    status = djwork.Batch.status(batch.bid)
    assert (status.total, status.pending, status.failures, status.dead, status.description) == (5, 5, 0, 0, "five")
    assert status.callbacks == dict.fromkeys(("complete", "success", "death", "settled"),
                                             "tests.batch_jobs.on_event")
    assert 0 < raw_redis.ttl(keys.batch(batch.bid)) <= 30 * 24 * 3600


def test_a_block_that_raises_writes_nothing(raw_redis):
    batch = djwork.Batch(on_success=batch_jobs.on_event)
    with pytest.raises(RuntimeError), batch.jobs():
        batch_jobs.member.delay(1)
        batch_jobs.member.delay_many([(2,), (3,)])
        raise RuntimeError("half way")
    assert raw_redis.keys("*") == []
    assert djwork.Batch.status(batch.bid) is None


def test_success_fires_once_after_the_retried_job_succeeds_and_complete_earlier(raw_redis):
    batch, jobs = make(raw_redis, 3)
    ack(raw_redis, jobs[0])
    fail(raw_redis, jobs[1], "retry")
    fail(raw_redis, jobs[1], "retry")  # a second failure of the same job counts nothing new
    assert events_pushed(raw_redis, "cb") == []
    ack(raw_redis, jobs[2])
    assert events_pushed(raw_redis, "cb") == ["complete"]  # every job ran once
    assert djwork.Batch.status(batch.bid).failures == 1
    ack(raw_redis, jobs[1])
    ack(raw_redis, jobs[1])  # run twice (orphan recovery): nothing more
    ack(raw_redis, jobs[0])
    assert events_pushed(raw_redis, "cb") == ["complete", "success", "settled"]
    status = djwork.Batch.status(batch.bid)
    assert (status.pending, status.failures, status.dead, status.succeeded) == (0, 0, 0, 3)
    assert status.complete_at <= status.success_at
    assert 0 < raw_redis.ttl(keys.batch(batch.bid)) <= 86400  # lingers a day after success


def test_a_dead_job_fires_death_and_settled_once_and_success_never(raw_redis):
    batch, jobs = make(raw_redis, 3)
    fail(raw_redis, jobs[0], "dead")
    fail(raw_redis, jobs[0], "dead")
    assert events_pushed(raw_redis, "cb") == ["death"]
    fail(raw_redis, jobs[1], "drop")  # retry: false, failed: it will not run again either
    ack(raw_redis, jobs[2])
    assert events_pushed(raw_redis, "cb") == ["death", "complete", "settled"]
    status = djwork.Batch.status(batch.bid, jids_up_to=10)
    assert (status.pending, status.dead, status.success) == (0, 2, False)
    assert status.dead_jids == sorted([jobs[0]["jid"], jobs[1]["jid"]])


def test_a_dead_job_retried_by_hand_that_succeeds_lets_success_fire(raw_redis):
    _batch, jobs = make(raw_redis, 1)
    fail(raw_redis, jobs[0], "dead")
    ack(raw_redis, jobs[0])
    assert events_pushed(raw_redis, "cb") == ["death", "complete", "settled", "success"]


def test_burying_and_deleting_from_the_api_count_as_dead(raw_redis):
    batch, jobs = make(raw_redis, 2)
    raw = json.dumps(jobs[0])
    raw_redis.zadd(keys.RETRY, {raw: 1})
    dead.move_to_dead(keys.RETRY, "zset", raw, raw, jobs[0]["jid"],
                      locks=job_locks.encode(job_locks.locks_of(jobs[0]))).evaluate(raw_redis)
    queued = raw_redis.lrange(keys.queue("default"), 0, -1)
    second = next(item for item in queued if jobs[1]["jid"].encode() in item)
    scripts.evaluate(raw_redis, "remove_entry", [keys.queue("default")],
                     ["list", second, jobs[1]["jid"], job_locks.encode(job_locks.locks_of(jobs[1]))])
    status = djwork.Batch.status(batch.bid)
    assert (status.pending, status.dead, status.settled) == (0, 2, True)


def test_an_empty_batch_fires_at_once(raw_redis):
    batch, _ = make(raw_redis, 0)
    assert events_pushed(raw_redis, "cb") == ["complete", "success", "settled"]
    callback = json.loads(raw_redis.lindex(keys.queue("cb"), -1))
    assert callback["args"][0]["bid"] == batch.bid and callback["args"][0]["total"] == 0
    assert "bid" not in callback  # a callback is not a member of the batch it reports on
    assert b"cb" in raw_redis.smembers(keys.QUEUES)


def test_callback_args_and_results_in_order_reach_the_success_callback(raw_redis):
    batch = djwork.Batch(on_success=batch_jobs.on_event, callback_args={"import_id": 7}, keep_results=True)
    with batch.jobs():
        for index in range(3):
            batch_jobs.member.delay(index)
    jobs = members(raw_redis)
    for job, value in zip(reversed(jobs), ([1], "two", None), strict=True):  # out of order, on purpose
        raw_redis.hset(keys.batch_results(batch.bid), job["jid"], json.dumps(value))
        ack(raw_redis, job)
    callback = json.loads(raw_redis.lindex(keys.queue("default"), 0))
    assert callback["kwargs"] == {"import_id": 7}
    assert callback["args"][0]["results"] == [None, "two", [1]]


def ack_returning(raw_redis, job: dict, value) -> None:
    """fetch.lua's ack of a successful run whose return value rides on its batch line (batches/runtime.py)."""
    raw = json.dumps(job)
    ties = batch_runtime.keep_result(job_locks.encode(job_locks.locks_of(job)), job, value)
    scripts.evaluate(raw_redis, "fetch", [keys.PAUSED, keys.ORPHAN_COUNTS, keys.FINISHED_LATE, keys.REVOKED,
                                          keys.RESULT_WAITERS, "queue:none", "t:inprogress", "t:isolated",
                                          "t:lanes"],
                     [0, "reliable", 1, 0, "none", -1, raw, job["jid"], ties, "", ""])


def test_results_ride_on_the_acks_and_reach_the_success_callback_in_order(raw_redis):
    batch = djwork.Batch(on_success=batch_jobs.on_event, keep_results=True)
    with batch.jobs():
        for index in range(3):
            batch_jobs.member.delay(index)
    jobs = members(raw_redis)
    fail(raw_redis, jobs[0], "retry")  # a retry filing keeps no result, even on a line that carries one
    for job, value in zip(reversed(jobs), ([1, "\t\n"], "two", {"x": None}), strict=True):
        ack_returning(raw_redis, job, value)
    callback = json.loads(raw_redis.lindex(keys.queue("default"), 0))
    assert callback["args"][0]["results"] == [{"x": None}, "two", [1, "\t\n"]]


def test_a_batch_that_keeps_no_results_stores_none_from_its_acks(raw_redis):
    batch = djwork.Batch(on_success=batch_jobs.on_event)
    with batch.jobs():
        batch_jobs.member.delay(0)
    [job] = members(raw_redis)
    ties = job_locks.encode(job_locks.locks_of(job))
    assert batch_runtime.keep_result(ties, job, "ignored") == ties  # not even carried
    # A line that carries one anyway (the flag unreadable as the job ended): the script reads the flag.
    raw = json.dumps(job)
    scripts.evaluate(raw_redis, "fetch", [keys.PAUSED, keys.ORPHAN_COUNTS, keys.FINISHED_LATE, keys.REVOKED,
                                          keys.RESULT_WAITERS, "queue:none", "t:inprogress", "t:isolated",
                                          "t:lanes"],
                     [0, "reliable", 1, 0, "none", -1, raw, job["jid"],
                      job_locks.with_result(ties, keys.batch(batch.bid), '"ignored"'), "", ""])
    assert not raw_redis.exists(keys.batch_results(batch.bid))
    assert events_pushed(raw_redis) == ["success"]


def test_adding_to_an_existing_batch_and_to_a_missing_one(raw_redis):
    batch, jobs = make(raw_redis, 1)
    with djwork.Batch(bid=batch.bid).jobs():
        batch_jobs.member.delay(9)
    assert djwork.Batch.status(batch.bid).total == 2
    ack(raw_redis, jobs[0])
    assert "success" not in events_pushed(raw_redis, "cb")
    with pytest.raises(BatchError), djwork.Batch(bid="nosuchbatch").jobs():
        batch_jobs.member.delay(1)


def test_an_invalidated_batch_pushes_no_callback(raw_redis):
    batch, jobs = make(raw_redis, 1)
    batch.invalidate()
    ack(raw_redis, jobs[0])
    status = djwork.Batch.status(batch.bid)
    assert status.invalidated and status.success and events_pushed(raw_redis, "cb") == []


def test_the_api_lists_batches_newest_first_filters_by_description_and_forgets_expired_ones(raw_redis):
    from djwork import api

    made = []
    for index in range(5):
        batch, _ = make(raw_redis, 1, description=f"import {index}" if index % 2 == 0 else f"export {index}")
        raw_redis.zadd(keys.BATCHES, {batch.bid: time.time() - 100 + index})  # distinct scores: a stable order
        made.append(batch)
    raw_redis.delete(keys.batch(made[4].bid))  # expired
    page = api.Batches().page(1, 2)
    assert [status.bid for status in page.items] == [made[3].bid, made[2].bid]
    assert page.total == 4 and raw_redis.zscore(keys.BATCHES, made[4].bid) is None
    assert [status.description for status in api.Batches(description="IMPORT").page().items] == ["import 2",
                                                                                                  "import 0"]
    detail = api.Batch(made[0].bid).status()
    assert detail.pending_jids == sorted(job.decode() for job in raw_redis.smembers(keys.batch_jids(made[0].bid)))
    assert api.Batch("gone").status() is None


def test_a_child_batch_holds_its_parents_events_until_it_settles(raw_redis):
    from djwork.batches import runtime

    parent, jobs = make(raw_redis, 2)
    running = runtime.enter(jobs[0])  # as the worker does around jobs[0]'s body
    try:
        child = djwork.Batch(description="child", on_success=batch_jobs.on_event)
        with child.jobs():
            batch_jobs.member.delay("c1")
            batch_jobs.dies.delay("c2")
        empty_child = djwork.Batch(description="empty child")
        with empty_child.jobs():
            pass
    finally:
        runtime.leave(running)
    assert djwork.Batch.status(child.bid).parent == parent.bid
    assert djwork.Batch.status(parent.bid).kids == 2
    child_jobs = [job for job in members(raw_redis) if job.get("bid") == child.bid]
    ack(raw_redis, jobs[0])
    ack(raw_redis, jobs[1])
    assert events_pushed(raw_redis, "cb") == []  # the child is still pending in its parent
    ack(raw_redis, child_jobs[0])
    fail(raw_redis, child_jobs[1], "retry")
    assert events_pushed(raw_redis, "cb") == ["complete"]  # the child ran every job once: so did the parent
    fail(raw_redis, child_jobs[1], "dead")
    assert events_pushed(raw_redis, "cb") == ["complete", "death", "settled"]  # the child died in its parent
    status = djwork.Batch.status(parent.bid, jids_up_to=5)
    assert status.dead_jids == [keys.batch(child.bid)] and not status.success
    fail(raw_redis, child_jobs[1], "dead")
    ack(raw_redis, child_jobs[1])  # retried from dead by hand, it succeeds: the child succeeds, so does the parent
    assert events_pushed(raw_redis, "cb") == ["complete", "death", "settled", "success"]
    assert djwork.Batch.status(child.bid).success


def test_scheduled_pushes_join_the_batch_and_an_expired_drop_counts_as_done(raw_redis):
    batch = djwork.Batch(on_success=batch_jobs.on_event, callback_queue="cb")
    with batch.jobs():
        batch_jobs.member.apply_async((1,), countdown=3600)
    (raw,) = raw_redis.zrange(keys.SCHEDULE, 0, -1)
    job = json.loads(raw)
    assert job["bid"] == batch.bid and djwork.Batch.status(batch.bid).pending == 1
    ack(raw_redis, job)  # the worker acks a job whose expires_at passed, unrun
    assert events_pushed(raw_redis, "cb") == ["success"]


def test_unique_jobs_cannot_join_a_batch(raw_redis):
    from tests import unique_jobs

    with pytest.raises(ValueError, match="unique"), djwork.Batch().jobs():
        unique_jobs.sync_account.delay(1)
    assert raw_redis.keys("*") == []
