"""Edge cases found while testing the worker runtime with real processes."""

from __future__ import annotations

import json
import signal
import time

from djwork.payload import dumps, new_jid
from djwork.testing.redis_server import free_port
from tests import worker_jobs
from tests.helpers_worker import blocked_takers, counts, in_progress_items, wait_beats, wait_until, zset_jobs

NEVER = 60  # seconds: a FETCH_TIMEOUT no test here waits out


def test_term_while_redis_is_unreachable_at_boot_exits(workers, raw_redis):
    # Nothing listens on this loopback port: the worker keeps retrying its first beat.
    worker = workers.start("-c", "1", overrides={"REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"})
    worker.wait_log("Redis unreachable at boot", 20)
    worker.send(signal.SIGTERM)
    # Without the TERM the boot retries for ever: any exit at all is the TERM ending it.
    assert worker.wait_exit(30) == 0
    assert "received TERM" in worker.log()


def test_idle_worker_acknowledges_a_finished_job_without_waiting_for_the_next_fetch(workers, raw_redis):
    # Acks ride on fetches; with the queues empty the next fetch is a minute away (FETCH_TIMEOUT), so an
    # ack seen within the bound below was sent on its own.
    worker = workers.start("-c", "2", overrides={"FETCH_TIMEOUT": NEVER})
    worker.identity(raw_redis)
    wait_until(lambda: len(blocked_takers(raw_redis)) >= 2, 20, "the idle worker's takers to block")
    worker_jobs.slow.delay("idle", 0.3)
    wait_until(lambda: counts(raw_redis).get("idle") == 1, 20, "the job")
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), NEVER / 2, "the ack")


def test_sys_exit_in_a_job_is_a_failure_not_a_stuck_job(workers, raw_redis):
    ref = worker_jobs.exits.delay("x")
    worker = workers.start("-c", "1")
    ((entry, _score, _raw),) = wait_until(lambda: zset_jobs(raw_redis, "retry"), 10, "the retry entry")
    assert entry["jid"] == ref.jid
    assert entry["error_class"] == "SystemExit"
    assert not any(in_progress_items(raw_redis).values())
    worker_jobs.record.delay("after-exit")
    wait_until(lambda: counts(raw_redis).get("after-exit") == 1, 10, "a job after")
    assert worker.alive()


def test_script_cache_flush_does_not_stop_the_worker(workers, raw_redis):
    worker = workers.start("-c", "2")
    identity = worker.identity(raw_redis)
    raw_redis.script_flush()
    worker_jobs.record.delay("after-flush")
    worker_jobs.stamp.perform_in(1, "sched-after-flush")
    wait_until(lambda: counts(raw_redis).get("after-flush") == 1, 10, "a job after SCRIPT FLUSH")
    wait_until(lambda: worker_jobs.notes(raw_redis, job="stamp"), 10, "a scheduled job after SCRIPT FLUSH")
    beat = float(raw_redis.hget(identity, "beat"))
    wait_until(lambda: float(raw_redis.hget(identity, "beat")) > beat, 20, "beats after SCRIPT FLUSH")
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(10) == 0


def test_queues_without_weights_are_fetched_in_strict_order(workers, raw_redis):
    for queue in ("low", "default", "critical"):
        worker_jobs.stamp.set(queue=queue).delay_many([(f"{queue}-{index}",) for index in range(3)])
    workers.start("-c", "1")  # settings: QUEUES critical, default, low
    wait_until(lambda: len(worker_jobs.notes(raw_redis, job="stamp")) == 9, 15, "all nine jobs")
    order = [note["key"] for note in worker_jobs.notes(raw_redis, job="stamp")]
    assert order == [f"{queue}-{index}" for queue in ("critical", "default", "low") for index in range(3)]


def test_quiet_worker_finishes_and_acknowledges_its_running_job(workers, raw_redis):
    worker_jobs.slow.delay("q", 1.5)
    worker = workers.start("-c", "2")
    identity = worker.identity(raw_redis)
    wait_until(lambda: raw_redis.hget("t:starts", "q") == b"1", 10, "the job to start")
    worker.send(signal.SIGTSTP)
    wait_until(lambda: raw_redis.hget(identity, "quiet") == b"true", 20, "quiet")
    wait_until(lambda: counts(raw_redis).get("q") == 1, 20, "the running job to finish while quiet")
    # Acked while quiet: a kill -9 now must not run it again.
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 20, "the ack while quiet")
    worker_jobs.record.delay("after")
    wait_beats(raw_redis, identity, 2)  # a worker still fetching would have taken it by now
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(10) == 0
    assert "pushed" not in worker.log()
    assert [json.loads(raw)["args"] for raw in raw_redis.lrange("queue:default", 0, -1)] == [["after"]]
    assert counts(raw_redis) == {"q": 1}


def test_unpromotable_schedule_entries_neither_block_nor_spin_the_poller(workers, raw_redis):
    now = time.time()
    # Not UTF-8: the member must be removed by its exact bytes, or it stays due forever.
    raw_redis.zadd("schedule", {b"\xff\xfe not utf-8 {": now - 30})
    # Its queue key has the wrong type: it can't be pushed, and must not hold up the rest.
    raw_redis.set("queue:broken", "not a list")
    raw_redis.zadd("schedule", {dumps({"class": "tests.worker_jobs.stamp", "args": ["stuck"], "queue": "broken",
                                       "jid": new_jid(), "retry": True, "created_at": now}): now - 20})
    worker_jobs.stamp.perform_at(now - 10, "due")  # in the past: pushed at once, not scheduled
    raw_redis.zadd("schedule", {dumps({"class": "tests.worker_jobs.stamp", "args": ["due"], "queue": "default",
                                       "jid": new_jid(), "retry": True, "created_at": now}): now - 10})
    worker = workers.start("-c", "2", "-q", "default")
    identity = worker.identity(raw_redis)

    wait_until(lambda: len(worker_jobs.notes(raw_redis, job="stamp", key="due")) == 2, 20, "the good entry")
    ((buried, _score, _raw),) = wait_until(lambda: zset_jobs(raw_redis, "dead"), 10, "the unreadable entry in dead")
    assert buried["error_class"] == "djwork.InvalidPayload"
    assert buried["raw_payload"].endswith(" not utf-8 {")
    (left,) = raw_redis.zrange("schedule", 0, -1)
    assert json.loads(left)["queue"] == "broken"
    # The stuck entry is retried on the normal poll clock (about twice a beat here), not in a tight loop
    # (thousands a beat): counted over beats of the worker's own clock, not over wall time.
    worker.wait_log("could not promote", 20)
    before = worker.log().count("could not promote")
    wait_beats(raw_redis, identity, 4)
    complaints = worker.log().count("could not promote") - before
    assert 1 <= complaints <= 40, complaints
    assert worker.alive()


def test_a_full_batch_of_stuck_entries_does_not_block_the_ones_behind(workers, raw_redis):
    now = time.time()
    raw_redis.set("queue:broken", "not a list")
    raw_redis.zadd("schedule", {
        dumps({"class": "tests.worker_jobs.stamp", "args": [f"stuck-{index}"], "queue": "broken",
               "jid": new_jid(), "retry": True, "created_at": now}): now - 100 + index * 0.1
        for index in range(150)  # more than one poller batch (100)
    })
    raw_redis.zadd("schedule", {dumps({"class": "tests.worker_jobs.stamp", "args": ["behind"], "queue": "default",
                                       "jid": new_jid(), "retry": True, "created_at": now}): now - 1})
    worker = workers.start("-c", "2", "-q", "default", overrides={"LOG_JOBS": False})
    # The boot has a wait of its own: on a loaded machine it ate the one deadline boot and run once shared.
    wait_until(lambda: "could not promote a job from schedule" in worker.log(), 30, "the poller's first pass")
    try:
        wait_until(lambda: worker_jobs.notes(raw_redis, job="stamp", key="behind"), 10,
                   "the entry behind the stuck ones")
    except AssertionError as timed_out:
        # Where the entry behind was, when it did not run, is what tells why.
        where = {"schedule": raw_redis.zcard("schedule"), "queue:default": raw_redis.llen("queue:default"),
                 "in progress": {key: len(items) for key, items in in_progress_items(raw_redis).items()}}
        raise AssertionError(f"{timed_out}: {where}") from None
    assert raw_redis.zcard("schedule") == 150
    assert worker.alive()
