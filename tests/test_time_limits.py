"""Time limits (docs/celery.md, Time limits): soft_time_limit raises inside the job, time_limit fails it.

Against real ``runworkers`` processes: a pure-Python busy loop gets
SoftTimeLimitExceeded and its cleanup runs; a job stuck past its hard limit
is filed to retry with TimeLimitExceeded while the worker keeps its capacity,
its late finish settles nothing twice, and a swarm child with such a job is
replaced. Bad values are refused at the decorator, at the call and by the
system checks (tests/test_checks.py); a soft limit past the hard
one is declared, and refused at every call.
"""

from __future__ import annotations

import signal

import pytest

import djwork
from djwork import jobs as djwork_jobs
from djwork.options import OptionError
from djwork.worker.time_limits import time_limits_of
from tests import time_limit_jobs as jobs
from tests.helpers_worker import blocked_takers, in_progress_items, wait_until, zset_jobs

TIME_LIMIT_ERROR = "djwork.exceptions.TimeLimitExceeded"


def _retry_entries(raw_redis, jid: str) -> list[dict]:
    return [payload for payload, _score, _raw in zset_jobs(raw_redis, "retry") if payload.get("jid") == jid]


def _two_children(swarm) -> set[int] | None:
    children = set(swarm.children())
    return children if len(children) == 2 else None


# --- against a worker ------------------------------------------------------------------------------
def test_a_soft_limit_raises_inside_a_busy_loop_and_the_jobs_cleanup_runs(workers, raw_redis):
    worker = workers.start("-c", "1")
    jobs.spin.delay("decorated")
    jobs.spin_plain.set(soft_time_limit=0.3).delay("set")  # the option through .set(), not the decorator
    # Coroutine jobs, one after the other on the same thread and event loop.
    jobs.wait_async.delay_many([("async-1",), ("async-2",)])
    wait_until(lambda: raw_redis.hlen(jobs.COUNTS) == 4, 30, "the four jobs to end")
    for key in ("decorated", "set", "async-1", "async-2"):
        assert jobs.events(raw_redis, key) == ["soft cleanup"]
        assert raw_redis.hget(jobs.STARTS, key) == b"1"
    # The job caught the exception: it succeeded, nothing was filed.
    assert raw_redis.zcard("retry") == 0 and raw_redis.zcard("dead") == 0
    assert worker.alive()


@pytest.mark.parametrize("taken_by", ["processor", "taker"])
def test_a_hard_limit_files_the_job_to_retry_and_the_worker_keeps_its_capacity(workers, raw_redis,
                                                                               taken_by):
    # A job queued before the worker starts comes with its first fetch and runs on a processor thread; one
    # pushed while the worker idles is taken by a blocked queue taker and runs on the taker's thread.
    if taken_by == "processor":
        jid = jobs.stuck.delay("stuck").jid
        worker = workers.start("-c", "1")
    else:
        worker = workers.start("-c", "1")
        wait_until(lambda: blocked_takers(raw_redis), 20, "a blocked taker")
        jid = jobs.stuck.delay("stuck").jid
    entries = wait_until(lambda: _retry_entries(raw_redis, jid), 30, "the stuck job in retry")
    assert entries[0]["error_class"] == TIME_LIMIT_ERROR and entries[0]["retry_count"] == 0
    worker.wait_log(f"djwork: job {jid} (tests.time_limit_jobs.stuck) exceeded its time limit of 1s", 10)

    # One slot, its thread still stuck in the job: new jobs run all the same, on a fresh thread.
    keys = [f"after-{n}" for n in range(5)]
    jobs.record.delay_many([(key,) for key in keys])
    wait_until(lambda: all(raw_redis.hget(jobs.COUNTS, key) == b"1" for key in keys), 30,
               "the jobs queued behind the stuck one")
    assert "finished late" not in jobs.events(raw_redis, "stuck")

    # Its late finish neither acks, nor files, nor counts it again.
    raw_redis.set(jobs.RELEASE + "stuck", "1")
    late = worker.wait_log(f"djwork: job {jid} (tests.time_limit_jobs.stuck) finished", 30)
    [line] = [line for line in late.splitlines() if f"job {jid} (tests.time_limit_jobs.stuck) finished" in line]
    assert f" djwork-{taken_by}-default" in line, line  # the thread that ran it, as the log names it
    assert jobs.events(raw_redis, "stuck") == ["hard exception seen", "finished late"]
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(30) == 0
    assert len(_retry_entries(raw_redis, jid)) == 1
    assert raw_redis.hget(jobs.STARTS, "stuck") == b"1"
    assert raw_redis.llen("queue:default") == 0 and not any(in_progress_items(raw_redis).values())
    assert raw_redis.get("stat:failed") == b"1"
    assert raw_redis.get("stat:processed") == b"6"
    assert "after the shutdown deadline" not in worker.log()


def test_a_swarm_child_with_a_job_past_its_hard_limit_is_replaced(workers, raw_redis):
    swarm = workers.start("--processes", "2", "-c", "1", overrides={"TIME_LIMIT": 1, "TIMEOUT": 3},
                          label="swarm")
    first = wait_until(lambda: _two_children(swarm), 30, "two children")
    jid = jobs.sleeps.delay("sleeper", 60).jid  # blocked in C (time.sleep): only a new process ends it
    entries = wait_until(lambda: _retry_entries(raw_redis, jid), 30, "the sleeping job in retry")
    assert entries[0]["error_class"] == TIME_LIMIT_ERROR
    swarm.wait_log("stopped to be replaced (a job past its time limit); replacing it", 30)
    second = wait_until(lambda: (children := _two_children(swarm)) and children != first and children, 30,
                        "a replacement child")
    assert len(second & first) == 1  # one child replaced (a new pid), the other kept

    keys = [f"later-{n}" for n in range(4)]
    jobs.record.delay_many([(key,) for key in keys])
    wait_until(lambda: all(raw_redis.hget(jobs.COUNTS, key) == b"1" for key in keys), 30, "jobs after the recycle")
    swarm.send(signal.SIGTERM)
    assert swarm.wait_exit(30) == 0
    # Filed once, never pushed back to run again: the recycle's drain had nothing of it to requeue.
    assert raw_redis.hget(jobs.STARTS, "sleeper") == b"1" and raw_redis.hget(jobs.COUNTS, "sleeper") is None
    assert len(_retry_entries(raw_redis, jid)) == 1
    assert raw_redis.llen("queue:default") == 0 and not any(in_progress_items(raw_redis).values())
    assert "died" not in swarm.log()


# --- the options -------------------------------------------------------------------------------------
def test_the_limits_travel_in_the_payload_and_a_call_overrides_the_decorator():
    payload, _at = jobs.spin.build_payload(["k"])
    assert payload["soft_time_limit"] == 0.5 and "time_limit" not in payload
    payload, _at = jobs.spin.set(soft_time_limit=2, time_limit=3).build_payload(["k"])
    assert (payload["soft_time_limit"], payload["time_limit"]) == (2, 3)
    payload, _at = jobs.record.build_payload(["k"], time_limit=7)
    assert payload["time_limit"] == 7


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), "10", True, [5]])
def test_a_bad_limit_is_refused_at_the_decorator_and_at_the_call(value):
    with pytest.raises(OptionError, match="time_limit must be a positive number of seconds"):
        djwork.job(time_limit=value)(lambda: None)
    with pytest.raises(OptionError, match="soft_time_limit must be a positive number of seconds"):
        jobs.record.apply_async(["k"], soft_time_limit=value)


def test_a_soft_limit_past_the_hard_one_is_declared_but_every_call_raises_celerys_error():
    misordered = djwork.job(soft_time_limit=2, time_limit=1, name="tests.misordered_limits")(lambda: None)
    try:
        for call in (misordered.delay, misordered.s().delay, misordered.set(queue="q").delay):
            with pytest.raises(ValueError, match=r"tests.misordered_limits: soft_time_limit must be less than or "
                                                 r"equal to time_limit \(soft_time_limit=2, time_limit=1\)"):
                call()
    finally:
        djwork_jobs.registry.pop("tests.misordered_limits")
    # Equal limits are Celery's rule too: allowed.
    assert djwork.job(soft_time_limit=5, time_limit=5)(lambda: None).build_payload([])[0]["time_limit"] == 5
    # The call's hard limit against the decorator's soft one (spin has soft_time_limit=0.5).
    with pytest.raises(OptionError, match=r"tests.time_limit_jobs.spin: soft_time_limit must be less than"):
        jobs.spin.apply_async(["k"], time_limit=0.2)


def test_the_exceptions_are_importable_as_celery_code_and_djwork_code_expect():
    from djwork.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded

    assert djwork.SoftTimeLimitExceeded is SoftTimeLimitExceeded and djwork.TimeLimitExceeded is TimeLimitExceeded
    assert issubclass(SoftTimeLimitExceeded, Exception) and issubclass(TimeLimitExceeded, Exception)


def test_the_worker_reads_the_payloads_limits_and_falls_back_to_the_settings():
    assert time_limits_of({"soft_time_limit": 1, "time_limit": 2.5}, None, None) == (1.0, 2.5)
    assert time_limits_of({}, 30, 60) == (30, 60)
    # A foreign or hand-written payload's nonsense reads as unset, never as a zero limit.
    assert time_limits_of({"soft_time_limit": "5", "time_limit": -1}, None, 60) == (None, 60)
