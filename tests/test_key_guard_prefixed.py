"""The key guard repairs keys under a prefix too: a WRONGTYPE met on one names it and reports it.

Issue #31, item 3: a ``unique:<digest>`` lock rewritten as a HASH made that
job's ``delay()`` raise forever; ``djwork:periodic:state:<entry>`` as a LIST
logged a bare WRONGTYPE every 5 s; ``djwork:limiter:<name>`` as a STRING sent
every job using it to dead. Item 4: ``SET djwork:metrics:totals x`` froze
``djwork_jobs_total`` and logged "stats window lost" each beat.
djwork/redis/key_reports.py, djwork/redis/key_repair.py (repair_reported), djwork/worker/key_guard.py.
"""

from __future__ import annotations

import logging

import pytest
import redis as redis_py

import djwork
from djwork import redis as redis_layer
from djwork.redis import key_repair as key_guard
from djwork.redis import key_reports, keys, scripts
from djwork.redis.key_types import expected_type
from djwork.worker.limits import run_within
from tests import limiter_jobs, unique_jobs, worker_jobs
from tests.helpers_worker import counts, wait_until
from tests.support.periodic_clock import EVERY_MINUTE, enqueued, fast_clock, overrides

REPORTED = "djwork:key-guard:reported"


def unique_lock(raw_redis) -> str:
    (key,) = [key.decode() for key in raw_redis.scan_iter("unique:*", count=1000)]
    return key


def reported(raw_redis) -> list[str]:
    return [key.decode() for key in raw_redis.zrange(REPORTED, 0, -1)]


@pytest.mark.parametrize("key, kind", [
    ("djwork:metrics:totals", "hash"), ("djwork:metrics:histograms", "hash"), ("batches", "zset"),
    ("j|261206|5:07", "hash"), ("h|tests.jobs.add-6-5:7", "string"), ("djwork:qm|261206|5:07", "hash"),
    ("b-abc", "hash"), ("b-abc-jids", "set"), ("b-abc-order", "list"), ("b-abc-results", "hash"),
    ("20261206-marks", "hash"), ("deploylock-v1", "string"), ("djwork:limiter-wake:x|t", "list"),
    ("djwork:key-guard:reported", "zset"),
])
def test_every_key_djwork_writes_is_placed_by_the_table(key, kind):
    assert expected_type(key) == kind


def test_a_unique_lock_as_a_hash_is_named_reported_and_then_repaired(raw_redis, caplog):
    unique_jobs.sync_account.delay(1)
    lock = unique_lock(raw_redis)
    raw_redis.delete(lock, "queue:default")
    raw_redis.hset(lock, "who", "someone")  # a HASH, no TTL: the lock would never expire

    with pytest.raises(djwork.WrongTypeKey) as raised:
        unique_jobs.sync_account.delay(1)
    assert raised.value.keys == (lock,) and f"{lock} holds a hash, not the string" in str(raised.value)
    assert raw_redis.type(lock) == b"hash"  # the client names and reports it, never moves it
    assert reported(raw_redis) == [lock]

    caplog.set_level(logging.ERROR, logger="djwork.key_guard")
    ((key, copy),) = key_guard.repair_reported()
    assert key == lock and raw_redis.hget(copy, "who") == b"someone"
    assert any(lock in record.getMessage() and "held a hash" in record.getMessage() for record in caplog.records)
    assert reported(raw_redis) == [] and key_guard.repair_reported() == []
    assert unique_jobs.sync_account.delay(1).enqueued


def test_a_report_of_a_key_since_repaired_or_unplaced_moves_nothing(raw_redis):
    raw_redis.zadd(REPORTED, {"unique:fine": 1, "someone:else": 2})
    raw_redis.set("unique:fine", "jid")
    raw_redis.hset("someone:else", "a", "b")
    assert key_guard.repair_reported() == []
    assert raw_redis.get("unique:fine") == b"jid" and raw_redis.hget("someone:else", "a") == b"b"
    assert not raw_redis.exists(REPORTED)


def test_a_reports_key_of_the_wrong_type_is_moved_by_the_check_itself(raw_redis):
    raw_redis.set(REPORTED, "x")
    ((key, copy),) = key_guard.repair_reported()
    assert key == REPORTED and raw_redis.get(copy) == b"x" and not raw_redis.exists(REPORTED)


def test_reports_are_capped_to_the_newest(raw_redis, monkeypatch):
    monkeypatch.setattr(key_reports, "REPORTS_KEPT", 3)
    for number in range(5):
        error = djwork.WrongTypeKey("x", [f"unique:{number}"], {f"unique:{number}": "hash"},
                                    {f"unique:{number}": "string"})
        redis_layer.run(lambda conn, error=error: key_reports.report(error, key_reports.on_client(conn)))
    assert len(reported(raw_redis)) == 3


def test_a_script_meeting_a_wrong_limiter_key_names_and_reports_it(raw_redis):
    raw_redis.set("djwork:limiter:test-ten", "x")
    with pytest.raises(djwork.WrongTypeKey, match="djwork:limiter:test-ten holds a string, not the hash"):
        limiter_jobs.ten_a_second.acquire()
    assert "djwork:limiter:test-ten" in reported(raw_redis)


@pytest.mark.parametrize("wrong", ["string", "hash"])
def test_a_limited_job_moves_a_wrong_limiter_state_aside_by_the_limiters_kind_and_runs(raw_redis, caplog, wrong):
    state = keys.limiter_state("test-ten")  # a window limiter: its state is a ZSET log
    if wrong == "string":
        raw_redis.set(state, "x")
    else:
        raw_redis.hset(state, "used", "1")
    caplog.set_level(logging.ERROR, logger="djwork.key_guard")
    assert run_within([limiter_jobs.ten_a_second], "jid-1", lambda: "ran") == "ran"
    assert raw_redis.type(state) == b"zset"
    assert any(f"key {state} held a {wrong} where djwork expects a zset" in record.getMessage()
               for record in caplog.records)


def test_a_pipeline_meeting_a_wrong_periodic_state_names_and_reports_it(raw_redis):
    state = keys.periodic_state("nightly")
    raw_redis.rpush(state, "x")
    pipe = redis_layer.client().pipeline(transaction=False)
    pipe.hmget(state, "last", "paused")
    (reply,) = scripts.execute(pipe, raise_on_error=False)
    assert isinstance(reply, djwork.WrongTypeKey) and reply.keys == (state,)
    assert f"{state} holds a list, not the hash" in str(reply)
    assert reported(raw_redis) == [state]


def test_djworks_client_names_a_wrongtype_on_any_command_or_pipeline_and_reports_it(raw_redis):
    state = keys.periodic_state("nightly")
    raw_redis.rpush(state, "x")
    with pytest.raises(djwork.WrongTypeKey, match=f"WRONGTYPE in HGETALL: {state} holds a list, not the hash"):
        redis_layer.run(lambda conn: conn.hgetall(state))
    assert reported(raw_redis) == [state]
    raw_redis.delete(REPORTED)

    def pipelined(conn):
        pipe = conn.pipeline(transaction=False)
        pipe.incr("t:counter")
        pipe.hset(state, "last", "1")
        return pipe.execute()

    with pytest.raises(djwork.WrongTypeKey) as raised:
        redis_layer.run(pipelined)
    assert raised.value.keys == (state,) and "WRONGTYPE in HSET" in str(raised.value)
    assert raw_redis.get("t:counter") == b"1" and reported(raw_redis) == [state]

    def other_error(conn):
        pipe = conn.pipeline(transaction=False)
        pipe.incr(state + ":n")
        pipe.set(state + ":n", "a")
        pipe.incr(state + ":n")
        return pipe.execute()

    with pytest.raises(redis_py.ResponseError, match=r"Command # 3 .* not an integer") as raised:
        redis_layer.run(other_error)  # anything but WRONGTYPE: redis-py's own error, as before
    assert not isinstance(raised.value, djwork.WrongTypeKey)


# --- real workers -------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_unique_lock_rewritten_as_a_hash_is_moved_aside_by_a_worker_and_delay_works_again(
        workers, raw_redis):
    worker = workers.start("-c", "2")
    unique_jobs.sync_account.delay(7)
    wait_until(lambda: counts(raw_redis).get("sync-7") == 1, 20, "the first run")
    wait_until(lambda: not list(raw_redis.scan_iter("unique:*")), 20, "the lock released by the ack")
    unique_jobs.sync_account.set(queue="nobody-listens").delay(7)  # a lock that stays: its job never runs
    lock = unique_lock(raw_redis)
    raw_redis.delete(lock)
    raw_redis.hset(lock, "rewritten", "1")

    with pytest.raises(djwork.WrongTypeKey, match=lock):
        unique_jobs.sync_account.set(queue="nobody-listens").delay(7)
    log = worker.wait_log(f"key {lock} held a hash where djwork expects a string", 20)
    assert f"djwork:quarantine:{lock}:" in log

    assert unique_jobs.sync_account.set(queue="nobody-listens").delay(7).enqueued
    assert raw_redis.type(lock) == b"string"


@pytest.mark.slow
def test_a_wrong_metrics_totals_key_is_named_and_repaired_and_counting_resumes(workers, raw_redis):
    raw_redis.set("djwork:metrics:totals", "x")
    worker = workers.start("-c", "2")
    worker_jobs.record.delay("m1")
    log = worker.wait_log("key djwork:metrics:totals held a string where djwork expects a hash", 30)
    assert "djwork:quarantine:djwork:metrics:totals:" in log
    worker_jobs.record.delay("m2")
    wait_until(lambda: raw_redis.hget("djwork:metrics:totals", "tests.worker_jobs.record|p"), 30,
               "the totals counting again")
    assert "stats window lost" not in worker.log()


@pytest.mark.slow
def test_a_periodic_state_as_a_list_is_named_moved_aside_and_the_entry_fires_again(workers, raw_redis):
    state = keys.periodic_state("every-minute")
    raw_redis.rpush(state, "not a state hash")
    worker = workers.start("-c", "1", overrides=overrides(fast_clock(raw_redis), EVERY_MINUTE))
    log = worker.wait_log(f"key {state} held a list where djwork expects a hash", 30)
    # Every WRONGTYPE the worker logged names the key (it used to be Redis's bare reply, every 5 s).
    assert all(state in line for line in log.splitlines() if "WRONGTYPE" in line), log[-3000:]
    wait_until(lambda: enqueued(raw_redis), 30, "a slot of the entry enqueued after the repair")
    assert raw_redis.type(state) == b"hash"


@pytest.mark.slow
def test_a_limiter_key_as_a_string_is_moved_aside_and_its_jobs_run(workers, raw_redis):
    raw_redis.set("djwork:limiter:test-three", "x")
    worker = workers.start("-c", "2")
    limiter_jobs.concurrent_job.delay_many([(f"l{number}", 0) for number in range(3)])
    # The job that met the string fails once and waits in retry for Sidekiq's backoff (15 s to 25 s, plus the
    # poller's pass): make it due now rather than wait that out, which a loaded machine can push past any cap.
    wait_until(lambda: len(counts(raw_redis)) + raw_redis.zcard("retry") == 3, 30,
               "every limited job run or waiting in retry")
    waiting = raw_redis.zrange("retry", 0, -1)
    if waiting:  # the poller may have taken it already
        raw_redis.zadd("retry", dict.fromkeys(waiting, 0), xx=True)
    wait_until(lambda: len(counts(raw_redis)) == 3, 30, "every limited job run")
    log = worker.wait_log("key djwork:limiter:test-three held a string where djwork expects a hash", 10)
    assert raw_redis.zcard("retry") == 0 and raw_redis.zcard("dead") == 0, log[-3000:]
