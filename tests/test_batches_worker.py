"""Batches against real workers: each callback exactly once, through retries, deaths and a kill -9.

Callbacks count themselves in Redis (tests/batch_jobs.py), so "exactly once"
is counted, not assumed; every wait is for an event a job or callback wrote.
"""

from __future__ import annotations

import json
import signal

import djwork
import djwork.api
from djwork.redis import keys
from tests import batch_jobs
from tests.helpers_worker import counts, in_progress_items, wait_until

CALLBACKS = dict(on_complete=batch_jobs.on_event, on_success=batch_jobs.on_event, on_death=batch_jobs.on_event,
                 on_settled=batch_jobs.on_event)


def fired(raw_redis, bid: str) -> dict[str, int]:
    return {event: count for event, count in counts(raw_redis, batch_jobs.CALLBACKS + ":" + bid).items()}


def settled_all(raw_redis) -> bool:
    """Nothing left to run anywhere: queues, schedule, retry and in-progress lists are empty."""
    busy = [raw_redis.llen(key) for key in raw_redis.scan_iter("queue:*")]
    return (not any(busy) and not raw_redis.zcard(keys.SCHEDULE) and not raw_redis.zcard(keys.RETRY)
            and not any(in_progress_items(raw_redis).values()))


def test_retries_deaths_empty_and_added_jobs_each_fire_their_callbacks_once(workers, raw_redis):
    big = djwork.Batch(description="thousand", callback_args={"tag": "big"}, **CALLBACKS)
    with big.jobs():
        # The ten that fail go first; after their one failure each waits for `complete` before it succeeds.
        batch_jobs.member.delay_many([((f"f{index}",), {"fail_once": True, "after_complete": True})
                                      for index in range(10)])
        batch_jobs.member.delay_many([(index,) for index in range(990)])
    dying = djwork.Batch(description="dying", **CALLBACKS)
    with dying.jobs():
        batch_jobs.dies.delay("d")
        batch_jobs.member.delay("d-ok")
    empty = djwork.Batch(description="empty", **CALLBACKS)
    with empty.jobs():
        pass
    growing = djwork.Batch(description="growing", **CALLBACKS)
    with growing.jobs():
        batch_jobs.opens_child.delay("g")
    nesting = djwork.Batch(description="nesting", **CALLBACKS)
    with nesting.jobs():
        batch_jobs.opens_nested.delay("n")
    keeping = djwork.Batch(description="keeping", on_success=batch_jobs.on_event, keep_results=True)
    with keeping.jobs():
        batch_jobs.member.delay_many([(index,) for index in (5005, 5006, 5007)])
        batch_jobs.member.delay("k", fail_once=True)
    stopped = djwork.Batch(description="stopped", **CALLBACKS)
    with stopped.jobs():
        batch_jobs.member.delay("never")
    stopped.invalidate()

    workers.start("-c", "10", overrides={"LOG_JOBS": False})
    wait_until(lambda: djwork.Batch.status(big.bid).success, 60, "the big batch's success")
    wait_until(lambda: all(djwork.Batch.status(batch.bid).settled for batch in (big, dying, empty, growing, nesting,
                                                                                   keeping)),
               30,
               "every batch settled")
    wait_until(lambda: settled_all(raw_redis), 30, "every job and callback run")

    events = [json.loads(raw) for raw in raw_redis.hvals(batch_jobs.STATUSES)]
    assert all(event["callback_args"] == {"tag": "big"} for event in events if event["bid"] == big.bid)
    by_batch: dict[str, list[str]] = {}
    for raw in raw_redis.lrange(batch_jobs.EVENTS, 0, -1):
        bid, event = raw.decode().split(":")
        by_batch.setdefault(bid, []).append(event)
    # Exactly once each (callbacks run in parallel: their order of finishing is not the order pushed).
    assert sorted(by_batch[big.bid]) == ["complete", "settled", "success"]
    assert by_batch[big.bid][0] == "complete"  # its ten retried jobs waited for it to run before succeeding
    assert sorted(by_batch[dying.bid]) == ["complete", "death", "settled"]
    assert sorted(by_batch[empty.bid]) == ["complete", "settled", "success"]
    assert sorted(by_batch[growing.bid]) == ["complete", "settled", "success"]
    assert stopped.bid not in by_batch and "never" not in counts(raw_redis, batch_jobs.RUNS)
    skipped = wait_until(lambda: djwork.api.History.recent(status="invalidated").runs, 10,
                         "the skipped job in the history (flushed every 250 ms)")
    assert [run.klass for run in skipped] == ["tests.batch_jobs.member"]

    status = djwork.Batch.status(big.bid)
    assert (status.total, status.pending, status.failures, status.dead, status.succeeded) == (1000, 0, 0, 0, 1000)
    assert status.complete_at < status.success_at
    complete = json.loads(raw_redis.hget(batch_jobs.STATUSES, f"{big.bid}:complete"))
    assert complete["pending"] == complete["failures"] == 10  # complete: every job ran, ten awaiting a retry
    runs = counts(raw_redis, batch_jobs.RUNS)
    assert all(runs[str(index)] == 1 for index in range(990)) and all(runs[f"f{index}"] == 1 for index in range(10))
    assert djwork.Batch.status(growing.bid).total == 2 and runs["g-added"] == 1
    # The nested batch: its parent's success waited for the child's (whose one job sleeps 0.3 s).
    child = djwork.Batch.status(raw_redis.hget("t:batch:children", "n").decode())
    assert child.parent == nesting.bid and child.success and runs["n-child"] == 1
    assert sorted(by_batch[nesting.bid]) == ["complete", "settled", "success"]
    assert sorted(by_batch[child.bid]) == ["settled", "success"]
    assert djwork.Batch.status(nesting.bid).success_at >= child.success_at
    # Results kept: in the success callback's own arguments, in the order the jobs were added.
    kept = json.loads(raw_redis.hget(batch_jobs.STATUSES, f"{keeping.bid}:success"))
    assert kept["results"] == [10010, 10012, 10014, "k"]
    dying_status = djwork.Batch.status(dying.bid)
    assert (dying_status.dead, dying_status.pending, dying_status.success) == (1, 0, False)


def test_kill_minus_nine_near_the_end_pushes_each_callback_once(workers, raw_redis):
    jobs = 200
    batch = djwork.Batch(description="killed", **CALLBACKS)
    with batch.jobs():
        batch_jobs.member.delay_many([((index,), {"hold": 0.05}) for index in range(jobs - 1)])
        # The last job kills its worker with SIGKILL after doing its work, before its ack can be sent.
        batch_jobs.member.delay("last", hold=0.05, kill_after=True)
    victim = workers.start("-c", "10", overrides={"LOG_JOBS": False}, label="victim")
    assert victim.wait_exit(60) == -signal.SIGKILL
    assert counts(raw_redis, batch_jobs.RUNS).get("last") == 1  # its work was done once already
    assert not fired(raw_redis, batch.bid)
    workers.start("-c", "10", overrides={"LOG_JOBS": False}, label="rescuer")
    wait_until(lambda: djwork.Batch.status(batch.bid).settled, 60, "the batch settled after recovery")
    wait_until(lambda: settled_all(raw_redis), 30, "every job and callback run")

    runs = counts(raw_redis, batch_jobs.RUNS)
    assert runs["last"] == 2  # finished in the victim, unacked, run again by recovery: counted once below
    assert sum(counts(raw_redis, batch_jobs.STARTS).values()) > jobs
    assert fired(raw_redis, batch.bid) == {"complete": 1, "success": 1, "settled": 1}
    status = djwork.Batch.status(batch.bid)
    assert (status.total, status.pending, status.failures, status.dead, status.succeeded) == (jobs, 0, 0, 0, jobs)
