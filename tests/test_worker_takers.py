"""Queue takers: how an idle worker waits for jobs (djwork/worker/takers.py: Takers and QueueTaker).

An idle worker blocks on its queues with BLMOVE straight into its in-progress
lists, one blocked connection per free slot (at least one per queue). These
tests look at that from outside: what Redis says its clients are doing, a
stop that unblocks them, a pause that starts while they block, a reply lost
on the way back, a single slot shared by two queues, and the job a taker
takes running on the taker's own thread (a stop past the deadline does not
wait for it as for a taker blocked in Redis).

FETCH_TIMEOUT is set far longer than any wait here where the point is that
something happens without waiting out a block: without the mechanism under
test, the event could not arrive before the test's (failure-only) bound.
"""

from __future__ import annotations

import json
import signal
import time

from tests import worker_jobs
from tests.faultproxy import FaultProxy
from tests.helpers_worker import blocked_takers, counts, in_progress_items, wait_beats, wait_until

NEVER = 60  # seconds: a FETCH_TIMEOUT no test here waits out


def test_idle_takers_block_one_per_slot_and_a_stop_interrupts_them(workers, raw_redis, redis_url):
    with FaultProxy.in_front_of(redis_url) as proxy:
        worker = workers.start("-c", "4", "-q", "default", "-q", "low",
                               overrides={"REDIS_URL": proxy.url, "FETCH_TIMEOUT": NEVER})
        worker.identity(raw_redis)
        takers = wait_until(lambda: len(blocked_takers(raw_redis)) == 4 and blocked_takers(raw_redis), 20,
                            "four blocked takers")
        # Blocking moves, never peeks: each would move its job into the in-progress list.
        assert all(client["flags"] == "b" for client in takers)
        worker_jobs.record.delay("taken-while-idle")
        wait_until(lambda: counts(raw_redis).get("taken-while-idle") == 1, 20, "the job")
        wait_until(lambda: len(blocked_takers(raw_redis)) == 4, 20, "the takers to block again")
        assert proxy.count("CLIENT", "UNBLOCK") == 0

        worker.send(signal.SIGTERM)
        # The blocks last a minute: an exit inside this bound means they were interrupted, and the proxy
        # shows how (one CLIENT UNBLOCK per blocked taker).
        assert worker.wait_exit(NEVER / 2) == 0
        assert proxy.count("CLIENT", "UNBLOCK") >= 4
    assert blocked_takers(raw_redis) == []
    assert not any(in_progress_items(raw_redis).values())
    assert counts(raw_redis) == {"taken-while-idle": 1}


def test_a_pause_that_starts_while_takers_block_is_honoured(workers, raw_redis):
    worker = workers.start("-c", "2", "-q", "default", overrides={"FETCH_TIMEOUT": NEVER})
    identity = worker.identity(raw_redis)
    wait_until(lambda: len(blocked_takers(raw_redis)) == 2, 20, "two blocked takers")
    raw_redis.sadd("paused", "default")
    job = worker_jobs.record.delay("paused-while-blocked")
    # Taken by a blocked taker, seen paused in the same round trip, and given back where it was; then
    # neither taker blocks on the paused queue any more (each would take it and give it back, forever).
    wait_until(lambda: not blocked_takers(raw_redis) and raw_redis.llen("queue:default") == 1, 20,
               "the job given back and the takers off the paused queue")
    wait_beats(raw_redis, identity, 2)  # the dispatcher's fetches and the takers' re-checks had their chance
    assert "paused-while-blocked" not in counts(raw_redis)
    assert [json.loads(raw)["jid"] for raw in raw_redis.lrange("queue:default", 0, -1)] == [job.jid]
    assert not any(in_progress_items(raw_redis).values())

    raw_redis.srem("paused", "default")
    wait_until(lambda: counts(raw_redis).get("paused-while-blocked") == 1, 20, "the job once unpaused")
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(10) == 0


def test_a_take_whose_reply_is_lost_is_adopted_and_runs_once(workers, raw_redis, redis_url):
    with FaultProxy.in_front_of(redis_url) as proxy:
        # One slot, one queue: one taker, and the dispatcher leaves the queue to it while it blocks.
        worker = workers.start("-c", "1", "-q", "default", overrides={"REDIS_URL": proxy.url, "FETCH_TIMEOUT": 1})
        identity = worker.identity(raw_redis)
        wait_until(lambda: len(blocked_takers(raw_redis)) == 1, 10, "the taker to block")
        fired = proxy.drop_next("BLMOVE")
        sent = proxy.count("BLMOVE")
        wait_until(lambda: proxy.count("BLMOVE") > sent, 20, "the taker's next BLMOVE")
        worker_jobs.record.delay("lost-reply")
        # The proxy relays the move (the job is now on the in-progress list), then cuts the connection.
        assert fired.wait(20)
        wait_until(lambda: counts(raw_redis).get("lost-reply") == 1, 10, "the adopted job to run")
        assert "adopting 1 job(s)" in worker.log()
        wait_until(lambda: not any(in_progress_items(raw_redis).values()), 20, "the ack")
        # A second run would come from a later reconcile or orphan recovery: a job queued behind it has run,
        # and the reaper's clock has ticked, before the count is read.
        worker_jobs.record.delay("sentinel")
        wait_until(lambda: counts(raw_redis).get("sentinel") == 1, 20, "a job queued after it")
        wait_beats(raw_redis, identity, 2)
        assert counts(raw_redis) == {"lost-reply": 1, "sentinel": 1}
        assert raw_redis.llen("queue:default") == 0
        worker.send(signal.SIGTERM)
        assert worker.wait_exit(10) == 0


def test_one_slot_watches_two_queues_and_gives_back_what_it_cannot_run(workers, raw_redis):
    worker = workers.start("-c", "1", "-q", "high", "-q", "low", overrides={"FETCH_TIMEOUT": NEVER})
    worker.identity(raw_redis)
    # Each queue's first taker watches while the slot is free, though there is only one slot: a job on
    # either queue runs without waiting out the other's minute-long block.
    wait_until(lambda: len(blocked_takers(raw_redis)) == 2, 20, "a taker on each queue")
    worker_jobs.record.set(queue="low").delay("low-alone")
    wait_until(lambda: counts(raw_redis).get("low-alone") == 1, 20, "the job on the second queue")
    worker_jobs.record.set(queue="high").delay("high-alone")
    wait_until(lambda: counts(raw_redis).get("high-alone") == 1, 20, "the job on the first queue")

    # Jobs landing on both queues at once: both takers take one, the slot runs one, the other goes back.
    expected = {"low-alone": 1, "high-alone": 1}
    for round_ in range(10):
        wait_until(lambda: len(blocked_takers(raw_redis)) == 2, 20, "both takers blocked again")
        pipe = raw_redis.pipeline(transaction=True)
        for queue in ("high", "low"):
            expected[f"{queue}-{round_}"] = 1
            pipe.lpush(f"queue:{queue}", json.dumps({
                "class": "tests.worker_jobs.record", "args": [f"{queue}-{round_}"], "queue": queue,
                "jid": f"{queue}{round_:020d}", "retry": True, "created_at": time.time(),
                "enqueued_at": time.time()}))
        pipe.execute()
        wait_until(lambda: counts(raw_redis) == expected, 20, f"round {round_}'s two jobs")
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 20, "every ack")
    assert raw_redis.llen("queue:high") == 0 and raw_redis.llen("queue:low") == 0
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(10) == 0
    assert counts(raw_redis) == expected


def test_takers_recover_when_every_connection_is_cut(workers, raw_redis, redis_url):
    with FaultProxy.in_front_of(redis_url) as proxy:
        worker = workers.start("-c", "3", "-q", "default", overrides={"REDIS_URL": proxy.url, "FETCH_TIMEOUT": 5})
        worker.identity(raw_redis)
        wait_until(lambda: len(blocked_takers(raw_redis)) == 3, 10, "three blocked takers")
        for round_ in range(3):
            proxy.cut_all()  # a network partition: every blocked BLMOVE loses its connection
            wait_until(lambda: len(blocked_takers(raw_redis)) == 3, 15, "the takers to block again")
            worker_jobs.record.delay(f"after-cut-{round_}")
            wait_until(lambda round_=round_: counts(raw_redis).get(f"after-cut-{round_}") == 1, 10, "the job")
        wait_until(lambda: not any(in_progress_items(raw_redis).values()), 20, "every ack")
        assert counts(raw_redis) == {f"after-cut-{n}": 1 for n in range(3)}
        assert worker.alive()
        worker.send(signal.SIGTERM)
        assert worker.wait_exit(10) == 0


def test_a_taker_runs_the_job_it_takes_and_the_other_takers_keep_watching(workers, raw_redis):
    worker = workers.start("-c", "2", "-q", "default", overrides={"FETCH_TIMEOUT": NEVER})
    worker.identity(raw_redis)
    wait_until(lambda: len(blocked_takers(raw_redis)) == 2, 20, "two blocked takers")
    worker_jobs.slow.delay("held", NEVER)
    wait_until(lambda: raw_redis.hget(worker_jobs.STARTS, "held") == b"1", 20, "the long job to start")
    # Its taker runs it; the other still blocks on the queue and takes the next job at once.
    wait_until(lambda: len(blocked_takers(raw_redis)) == 1, 20, "one taker still blocked")
    worker_jobs.where.delay("picked-up")
    wait_until(lambda: counts(raw_redis).get("picked-up") == 1, 20, "the second job")
    [fact] = worker_jobs.notes(raw_redis, key="picked-up")
    assert fact["thread"].startswith("djwork-taker-default-"), fact


def test_a_stop_past_the_deadline_does_not_wait_for_a_taker_running_a_job(workers, raw_redis):
    # FETCH_TIMEOUT is a minute: a stop that waited for the taker as for one blocked in Redis would take
    # that long (its join bound); the job is requeued at the 1 s deadline, as a processor's would be.
    worker = workers.start("-c", "1", "-q", "default", overrides={"FETCH_TIMEOUT": NEVER, "TIMEOUT": 1})
    worker.identity(raw_redis)
    wait_until(lambda: len(blocked_takers(raw_redis)) == 1, 20, "a blocked taker")
    job = worker_jobs.slow.delay("stuck", NEVER)
    wait_until(lambda: raw_redis.hget(worker_jobs.STARTS, "stuck") == b"1", 20, "the job to start")
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(NEVER / 3) == 0
    assert [json.loads(raw)["jid"] for raw in raw_redis.lrange("queue:default", 0, -1)] == [job.jid]
    assert not any(in_progress_items(raw_redis).values())
    assert "did not stop in time" not in worker.log()
