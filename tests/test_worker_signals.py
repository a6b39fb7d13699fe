"""Quiet, stop and thread dumps, through OS signals and through ``<identity>-signals`` (docs/wire.md, Signals)."""

from __future__ import annotations

import signal

from djwork import api
from tests import worker_jobs
from tests.faultproxy import FaultProxy
from tests.helpers_worker import counts, in_progress_items, send_remote_signal, wait_beats, wait_until

DUMP = "WARNING djwork.worker MainThread djwork thread dump:"  # the log line, not the source line in a stack


def _assert_quiet_then_stop(worker, raw_redis, quiet, stop) -> None:
    identity = worker.identity(raw_redis)
    worker_jobs.record.delay("before")
    wait_until(lambda: counts(raw_redis).get("before") == 1, 10, "a job before quiet")
    assert raw_redis.hget(identity, "quiet") == b"false"

    quiet()
    wait_until(lambda: raw_redis.hget(identity, "quiet") == b"true", 20, "quiet=true")
    worker_jobs.record.delay("after-quiet")
    # Beats keep coming while quiet, and a worker still fetching would have taken the job by the second.
    wait_beats(raw_redis, identity, 2)
    assert "after-quiet" not in counts(raw_redis)
    assert raw_redis.llen("queue:default") == 1
    assert worker.alive()
    assert raw_redis.sismember("processes", identity)

    stop()
    assert worker.wait_exit(10) == 0
    assert not raw_redis.sismember("processes", identity)
    assert not raw_redis.exists(f"{identity}:work", f"{identity}:workers")
    assert raw_redis.zscore("djwork:beats", identity) is None
    assert not in_progress_items(raw_redis)
    assert not any(identity in member.decode() for member in raw_redis.smembers("djwork:inprogress"))
    # The job pushed while quiet is still waiting, untouched.
    assert raw_redis.llen("queue:default") == 1
    assert "after-quiet" not in counts(raw_redis)
    # The identity hash is left to expire, as Sidekiq does.
    assert 0 < raw_redis.ttl(identity) <= 60


def test_quiet_and_stop_through_the_signal_list(workers, raw_redis):
    worker = workers.start("-c", "2")
    identity = worker.identity(raw_redis)
    _assert_quiet_then_stop(worker, raw_redis,
                            lambda: send_remote_signal(raw_redis, identity, "TSTP"),
                            lambda: send_remote_signal(raw_redis, identity, "TERM"))
    log = worker.log()
    assert f"received TSTP through {identity}-signals" in log
    assert f"received TERM through {identity}-signals" in log
    assert not raw_redis.exists(f"{identity}-signals")


def test_quiet_and_stop_through_os_signals(workers, raw_redis):
    worker = workers.start("-c", "2")
    _assert_quiet_then_stop(worker, raw_redis,
                            lambda: worker.send(signal.SIGTSTP),
                            lambda: worker.send(signal.SIGTERM))
    assert "received TSTP" in worker.log()


LONG_JOB = 60  # seconds: longer than any bound below, so an exit within one never waited for the job


def _start_busy_worker(pool, raw_redis, timeout: float):
    worker_jobs.slow.delay("long", LONG_JOB)
    (raw,) = raw_redis.lrange("queue:default", 0, -1)
    worker = pool.start("-c", "2", overrides={"TIMEOUT": timeout})
    identity = worker.identity(raw_redis)
    wait_until(lambda: raw_redis.hget("t:starts", "long") == b"1", 20, "the long job to start")
    wait_until(lambda: raw_redis.hget(identity, "busy") == b"1", 20, "busy=1")
    return worker, identity, raw


def _assert_requeued(raw_redis, identity: str, raw: bytes) -> None:
    # Back on its queue at the pop end, byte for byte as it was fetched.
    assert raw_redis.lrange("queue:default", 0, -1) == [raw]
    assert not in_progress_items(raw_redis)
    assert not any(identity in member.decode() for member in raw_redis.smembers("djwork:inprogress"))
    assert not raw_redis.sismember("processes", identity)
    assert not raw_redis.exists(f"{identity}:work", f"{identity}:workers")
    assert "long" not in counts(raw_redis)


def test_shutdown_requeues_jobs_still_running_at_the_deadline(workers, raw_redis):
    worker, identity, raw = _start_busy_worker(workers, raw_redis, timeout=1)
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(LONG_JOB / 2) == 0
    _assert_requeued(raw_redis, identity, raw)
    assert "pushed 1 job(s) back" in worker.log()


def test_second_term_during_the_drain_exits_at_once(workers, raw_redis):
    # The drain deadline (TIMEOUT) and the job both outlast the bound: only the second TERM can end it in time.
    worker, identity, raw = _start_busy_worker(workers, raw_redis, timeout=LONG_JOB)
    worker.send(signal.SIGTERM)
    worker.wait_log("shutting down", 20)
    # The first TERM waits for the running job: the heartbeat still reports it busy, beats later.
    wait_beats(raw_redis, identity, 2)
    assert worker.alive(), "the first TERM must wait for the running job"
    assert raw_redis.hget(identity, "busy") == b"1"
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(LONG_JOB / 2) == 0
    _assert_requeued(raw_redis, identity, raw)


def test_ttin_dumps_threads(workers, raw_redis):
    worker = workers.start("-c", "2")
    identity = worker.identity(raw_redis)
    worker.send(signal.SIGTTIN)
    worker.wait_log(DUMP, 20)
    log = worker.log()
    assert "Thread MainThread" in log and "Thread djwork-heartbeat" in log and "Thread djwork-dispatcher" in log
    assert log.count(DUMP) == 1

    send_remote_signal(raw_redis, identity, "TTIN")
    wait_until(lambda: worker.log().count(DUMP) == 2, 20, "a second dump")
    assert f"received TTIN through {identity}-signals" in worker.log()
    # An unknown value in the list is ignored, and the process keeps running.
    send_remote_signal(raw_redis, identity, "USR9")
    worker.wait_log("'USR9'", 20)
    assert worker.alive()
    worker_jobs.record.delay("still-working")
    wait_until(lambda: counts(raw_redis).get("still-working") == 1, 10, "a job after the dumps")
    assert raw_redis.hget(identity, "quiet") == b"false"
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(10) == 0


def test_a_job_finishing_after_the_deadline_removes_its_pushed_back_copy(workers, raw_redis):
    # The job outlives TIMEOUT, so the deadline requeues it; it then finishes before the process exits.
    # Its copy on the queue must go, or the next worker runs it a second time.
    worker_jobs.finish_when_requeued.delay("late")
    worker = workers.start("-c", "2", overrides={"TIMEOUT": 1}, label="first")
    wait_until(lambda: raw_redis.hget("t:starts", "late") == b"1", 20, "the job to start")
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(30) == 0
    log = worker.log()
    assert "pushed 1 job(s) back" in log
    assert "finished after the shutdown deadline; removed its pushed-back copy from the queue" in log
    assert counts(raw_redis).get("late") == 1
    assert raw_redis.llen("queue:default") == 0 and not in_progress_items(raw_redis)

    # A second worker has nothing of it to run: one thread, so a copy at the pop end would run before
    # the job queued after it.
    worker_jobs.record.delay("sentinel")
    second = workers.start("-c", "1", label="second")
    wait_until(lambda: counts(raw_redis).get("sentinel") == 1, 20, "the sentinel job")
    assert counts(raw_redis).get("late") == 1
    assert raw_redis.hget("t:starts", "late") == b"1"
    second.send(signal.SIGTERM)
    assert second.wait_exit(20) == 0


def test_a_quiet_request_reads_requested_or_quiet_while_the_beat_that_took_it_waits_for_the_reply(
        workers, raw_redis, redis_url):
    with FaultProxy.in_front_of(redis_url) as proxy:
        worker = workers.start("-c", "2", overrides={"REDIS_URL": proxy.url})
        identity = worker.identity(raw_redis)
        signals = f"{identity}-signals"
        # The beat's pop runs on the server and its reply never comes back: the widest the window between
        # taking a signal and acting on it can be.
        stalled = proxy.stall_next("RPOP", argument=signals)
        send_remote_signal(raw_redis, identity, "TSTP")
        assert_quiet_shown_while_the_pop_stalls(raw_redis, identity, stalled, within=20)
        worker.kill()


def test_a_signal_sent_after_the_beats_look_waits_for_the_next_beat_instead_of_being_taken_unsaid(
        workers, raw_redis, redis_url):
    with FaultProxy.in_front_of(redis_url) as proxy:
        worker = workers.start("-c", "2", overrides={"REDIS_URL": proxy.url})
        identity = worker.identity(raw_redis)
        signals = f"{identity}-signals"
        # The look has run on the server (it saw an empty list) and its reply is held back while the TSTP
        # lands: the signal comes between the look and the pop. A pop of everything took it with nothing
        # published, for as long as the pop's own reply took (stalled here).
        looked, release = proxy.hold_next("LRANGE", argument=signals)
        assert looked.wait(20), "the beat to look at its signal list"
        send_remote_signal(raw_redis, identity, "TSTP")
        popped = proxy.stall_next("RPOP", argument=signals)
        release.set()
        assert_quiet_shown_while_the_pop_stalls(raw_redis, identity, popped, within=30)
        worker.kill()


def assert_quiet_shown_while_the_pop_stalls(raw_redis, identity: str, popped, within: float) -> None:
    """The beat's pop of the TSTP has run and its reply is stalled: published before the pop, a reader sees
    the request or its effect, never a plain "running"."""
    assert popped.wait(within), "a beat to pop the signal"
    signals = f"{identity}-signals"
    wait_until(lambda: raw_redis.llen(signals) == 0, 10, "the signal out of its list")
    (process,) = [each for each in api.ProcessSet().all() if each.identity == identity]
    assert process.stopping or process.requested == "quiet"
