"""Coroutine jobs on the worker's event loop, in real ``runworkers`` processes (docs/performance.md, I/O-bound jobs).

Each test waits on Redis state the jobs or the worker leave, never on time.
"""

from __future__ import annotations

import datetime as dt
import signal

import djwork
from djwork.api import Metrics
from tests import async_jobs, batch_jobs, worker_jobs
from tests.helpers_worker import counts, history_runs, in_progress_items, wait_until, zset_jobs
from tests.worker_jobs import STARTS

THREADS = 2
LOOP_STARTED = "event loop started for coroutine jobs"


def test_coroutine_jobs_run_many_at_once_on_few_threads(workers, raw_redis):
    # 60 at once are needed before any of them finishes: on 2 threads alone, never.
    async_jobs.gather.delay_many([(index, 60) for index in range(200)])
    workers.start("-c", str(THREADS), overrides={"LOG_JOBS": False})
    wait_until(lambda: len(counts(raw_redis)) == 200, 60, "all 200 coroutine jobs done")
    assert set(counts(raw_redis).values()) == {1}
    assert int(raw_redis.get(async_jobs.MOST)) > THREADS
    assert int(raw_redis.get(async_jobs.MOST)) <= 100  # ASYNC_CONCURRENCY's default: places are a bound
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 20, "every ack settled")
    assert raw_redis.llen("queue:default") == 0


def test_a_failing_coroutine_job_goes_to_retry_with_its_error(workers, raw_redis):
    ref = async_jobs.fails.delay("f1")
    workers.start("-c", str(THREADS))
    wait_until(lambda: raw_redis.zcard("retry") == 1, 30, "the failed coroutine job in retry")
    ((payload, _score, _raw),) = zset_jobs(raw_redis, "retry")
    assert payload["jid"] == ref.jid
    assert payload["error_class"] == "ValueError"
    assert payload["error_message"] == "coroutine job f1 failed"
    assert payload["retry_count"] == 0
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 20, "its in-progress entry removed")
    # The same history entry a failing thread job leaves (flushed every 250 ms).
    runs = wait_until(lambda: history_runs(raw_redis), 20, "its history entry")
    assert [(run.jid, run.status, run.error_class) for run in runs] == [(ref.jid, "retry", "ValueError")]


def test_term_cancels_coroutine_jobs_at_the_deadline_and_a_later_worker_runs_them_once(workers, raw_redis):
    async_jobs.hangs_first_time.delay_many([(index,) for index in range(5)])
    first = workers.start("-c", str(THREADS), overrides={"TIMEOUT": 1}, label="first")
    wait_until(lambda: len(raw_redis.hgetall("t:starts")) == 5, 30, "all five coroutine jobs started")
    first.send(signal.SIGTERM)
    assert first.wait_exit(30) == 0
    assert first.log().count("cancelled at the shutdown deadline") == 5
    assert raw_redis.llen("queue:default") == 5
    assert not any(in_progress_items(raw_redis).values())
    assert raw_redis.zcard("retry") == 0 and raw_redis.zcard("dead") == 0
    assert counts(raw_redis) == {}

    workers.start("-c", str(THREADS), label="second")
    wait_until(lambda: len(counts(raw_redis)) == 5, 30, "the requeued jobs completed")
    assert set(counts(raw_redis).values()) == {1}
    assert {int(value) for value in raw_redis.hvals("t:starts")} == {2}


def test_kill_minus_nine_mid_coroutine_job_runs_it_again_once_after_recovery(workers, raw_redis):
    overrides = {"ORPHAN_THRESHOLD": 2, "HEARTBEAT_INTERVAL": 0.5}
    async_jobs.hangs_first_time.delay("k1")
    victim = workers.start("-c", str(THREADS), overrides=overrides, label="victim")
    wait_until(lambda: raw_redis.hget("t:starts", "k1") == b"1", 30, "the coroutine job started")
    victim.send(signal.SIGKILL)
    assert victim.wait_exit(10) == -signal.SIGKILL
    assert sum(len(items) for items in in_progress_items(raw_redis).values()) == 1

    rescuer = workers.start("-c", str(THREADS), overrides=overrides, label="rescuer")
    wait_until(lambda: counts(raw_redis).get("k1") == 1, 60, "the orphaned coroutine job run again")
    rescuer.wait_log("recovered", 20)
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 20, "its ack settled")
    assert raw_redis.hget("t:starts", "k1") == b"2"
    assert counts(raw_redis) == {"k1": 1}


def test_the_event_loop_thread_starts_with_the_first_coroutine_job_only(workers, raw_redis):
    worker_jobs.record.delay_many([(f"s{index}",) for index in range(5)])
    only_sync = workers.start("-c", str(THREADS), label="only-sync")
    wait_until(lambda: len(counts(raw_redis)) == 5, 30, "the thread jobs done")
    only_sync.send(signal.SIGTERM)
    assert only_sync.wait_exit(30) == 0
    # Its whole life is in the log now: a worker that ran no coroutine job never started the loop.
    assert LOOP_STARTED not in only_sync.log()

    worker_jobs.record.delay("s5")
    async_jobs.gather.delay_many([(f"a{index}", 1) for index in range(3)])
    mixed = workers.start("-c", str(THREADS), label="mixed")
    wait_until(lambda: len(counts(raw_redis)) == 9, 30, "the thread and coroutine jobs done")
    mixed.send(signal.SIGTERM)
    assert mixed.wait_exit(30) == 0
    # Once, however many jobs asked for it, and on the loop's own (named) thread.
    (line,) = [line for line in mixed.log().splitlines() if LOOP_STARTED in line]
    assert " djwork-coroutines " in line


def test_a_batch_of_coroutine_jobs_fires_its_success_callback_once_after_them(workers, raw_redis):
    batch = djwork.Batch(description="async members", on_success=batch_jobs.on_event,
                         on_complete=batch_jobs.on_event)
    with batch.jobs():
        async_jobs.batch_member.delay_many([(index,) for index in range(20)])
        # Two fail once: their retry is filed on a finisher thread (coroutine_jobs.py) before they succeed.
        async_jobs.batch_member.delay_many([((f"f{index}",), {"fail_once": True}) for index in range(2)])
    workers.start("-c", str(THREADS))
    wait_until(lambda: djwork.Batch.status(batch.bid).settled, 60, "the batch settled")
    wait_until(lambda: counts(raw_redis, f"{batch_jobs.CALLBACKS}:{batch.bid}").get("success") == 1, 30,
               "its success callback run")
    runs = counts(raw_redis, batch_jobs.RUNS)
    assert runs == {**{str(index): 1 for index in range(20)}, "f0": 1, "f1": 1}
    assert counts(raw_redis, f"{batch_jobs.CALLBACKS}:{batch.bid}") == {"complete": 1, "success": 1}
    events = [raw.decode() for raw in raw_redis.lrange(batch_jobs.EVENTS, 0, -1)]
    assert sorted(events) == [f"{batch.bid}:complete", f"{batch.bid}:success"]
    status = djwork.Batch.status(batch.bid)
    assert status.success and status.pending == 0 and status.failures == 0


def test_a_unique_coroutine_job_holds_its_lock_while_on_the_loop_and_releases_it_at_ack(workers, raw_redis):
    assert async_jobs.unique_held.delay("u").enqueued
    workers.start("-c", str(THREADS))
    wait_until(lambda: raw_redis.hget(STARTS, "u") == b"1", 30, "the coroutine job started")
    # Running on the loop, away from its thread slot: a copy is still a duplicate.
    assert not async_jobs.unique_held.delay("u").enqueued
    assert list(raw_redis.scan_iter("unique:*"))
    raw_redis.set(async_jobs.release_key("u"), 1)
    wait_until(lambda: counts(raw_redis).get("u") == 1, 30, "the coroutine job done")
    wait_until(lambda: not list(raw_redis.scan_iter("unique:*")), 20, "its lock released with the ack")
    assert async_jobs.unique_held.delay("u").enqueued  # the next copy is accepted and runs
    wait_until(lambda: counts(raw_redis).get("u") == 2, 30, "the second copy done")
    wait_until(lambda: not list(raw_redis.scan_iter("unique:*")), 20, "the second lock released")


def test_coroutine_jobs_execution_metrics_cover_the_awaited_body(workers, raw_redis):
    async_jobs.timed.delay_many([(f"t{index}",) for index in range(10)])
    async_jobs.fails.delay("m1")
    worker = workers.start("-c", str(THREADS))
    wait_until(lambda: len(counts(raw_redis)) == 10 and raw_redis.zcard("retry") == 1, 30, "every job ran once")
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(30) == 0  # the final flush runs at shutdown
    classes = Metrics(dt.datetime.now(dt.UTC)).by_class("1h").classes
    timed = classes["tests.async_jobs.timed"]
    assert (timed.processed, timed.failed) == (10, 0)
    assert timed.totals["ms"] >= 10 * 50  # each awaited 50 ms on the loop: recorded at its end, not at hand-off
    failing = classes["tests.async_jobs.fails"]
    assert (failing.processed, failing.failed) == (1, 1)
