"""Draining a backlog: processors fetch the next batch themselves (Dispatcher.refill, djwork/worker/dispatcher.py).

Through a backlog the dispatcher stands by and a processor that finds no job
waiting runs the fetch (with the buffered acks) on its own thread. These
tests cut that fetch's reply on the wire, so the jobs it moved are on the
in-progress list while the worker never saw them: the reconcile must adopt
each exactly once, and the acks that rode on the lost fetch must not be lost
or applied twice.
"""

from __future__ import annotations

import signal

from djwork.redis import scripts
from tests import worker_jobs
from tests.faultproxy import FaultProxy
from tests.helpers_worker import counts, in_progress_items, wait_until

JOBS = 3000
LONG_JOB = 60  # seconds: longer than any bound in these tests


def test_a_refill_whose_reply_is_lost_mid_backlog_is_adopted_and_every_job_runs_once(
        workers, raw_redis, redis_url):
    worker_jobs.record.delay_many([(f"job-{index}",) for index in range(JOBS)])
    with FaultProxy.in_front_of(redis_url) as proxy:
        fetch = scripts.sha("fetch")
        worker = workers.start("-c", "10", "-q", "default", overrides={"REDIS_URL": proxy.url})
        for cut in range(5):
            # Well into the backlog, so the fetch is a processor's refill, not the dispatcher's first.
            fired = proxy.drop_next("EVALSHA", argument=fetch, skip=20)
            assert fired.wait(30), f"cut {cut}: no fetch reached the proxy"
        wait_until(lambda: sum(counts(raw_redis).values()) >= JOBS, 60, "every job")
        wait_until(lambda: not any(in_progress_items(raw_redis).values()), 20, "every ack")
        # A duplicate would come from a later reconcile adopting a job again: one queued after the
        # backlog has run (through the same fetch path) before the counts are read.
        worker_jobs.record.delay("sentinel")
        wait_until(lambda: counts(raw_redis).get("sentinel") == 1, 20, "a job queued after the backlog")
        ran = counts(raw_redis)
        assert ran.pop("sentinel") == 1
        assert len(ran) == JOBS
        assert {name: times for name, times in ran.items() if times != 1} == {}
        assert raw_redis.llen("queue:default") == 0
        log = worker.log()
        failures = [line for line in log.splitlines() if "fetch failed; reconciling" in line]
        assert len(failures) == 5
        # The log line names the thread: processors' refills lost their replies (the dispatcher
        # fetches too at times, after each reconcile and when 3 ms pass with no refill).
        assert any(" djwork-processor-default " in line for line in failures), failures
        assert "adopting" in log
        worker.send(signal.SIGTERM)
        assert worker.wait_exit(10) == 0


def test_a_backlog_is_fetched_in_batches_and_the_worker_goes_idle_after_it(workers, raw_redis):
    worker_jobs.record.delay_many([(f"job-{index}",) for index in range(JOBS)])
    raw_redis.config_resetstat()
    worker = workers.start("-c", "10", "-q", "default")
    wait_until(lambda: sum(counts(raw_redis).values()) >= JOBS, 60, "every job")
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 10, "every ack")
    fetches = int(raw_redis.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))
    # One fetch per job would be ~3000 EVALSHA; batches of free slots make it a few hundred.
    assert fetches < JOBS / 3, f"{fetches} EVALSHA calls for {JOBS} jobs"
    # Once the queue ran dry the dispatcher took over again: idle takers wait for the next job.
    worker_jobs.record.delay("after-the-backlog")
    wait_until(lambda: counts(raw_redis).get("after-the-backlog") == 1, 20, "a job pushed after the backlog")
    assert all(times == 1 for times in counts(raw_redis).values())
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(10) == 0


def test_through_a_backlog_long_jobs_never_hold_the_short_ones_behind_them_hostage(workers, raw_redis):
    # Mid-backlog, the two long jobs land in a batch a processor fetched for
    # itself and take both running threads, while the dispatcher sleeps: the
    # short ones behind them must still be escalated to the other two slots
    # (the dispatcher looks in every few ms through a backlog). The long jobs
    # outlast the test's bound, so every short job finishing while they still
    # run cannot be a matter of speed.
    worker_jobs.record.delay_many([(f"short-{index}",) for index in range(100)])
    worker_jobs.slow.delay_many([("long-1", LONG_JOB), ("long-2", LONG_JOB)])
    worker_jobs.record.delay_many([(f"short-{index}",) for index in range(100, 300)])
    worker = workers.start("-c", "4", "-q", "default")
    wait_until(lambda: raw_redis.hlen(worker_jobs.STARTS) == 2, 20, "both long jobs to start")
    wait_until(lambda: sum(1 for name in counts(raw_redis) if name.startswith("short-")) == 300, LONG_JOB / 2,
               "every short job")
    ran = counts(raw_redis)
    assert "long-1" not in ran and "long-2" not in ran, "the short jobs waited for the long ones"
    # The long jobs are still running: the drain deadline (TIMEOUT 2 s) hands them back to their queue.
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(LONG_JOB / 2) == 0
    assert "pushed 2 job(s) back" in worker.log()
    assert raw_redis.llen("queue:default") == 2
