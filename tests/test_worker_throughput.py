"""Real workers run every job exactly once, and run each kind of job: sync, async, bound, Django Task."""

from __future__ import annotations

import datetime as dt
import json
import signal

from djwork.tasks_compat import TaskResultStatus
from tests import worker_jobs
from tests.helpers_worker import counts, history_runs, in_progress_items, wait_until

TOTAL = 10_000


def test_ten_thousand_jobs_run_exactly_once_across_two_workers(workers, raw_redis):
    # Two processes compete for the same queue: exactly-once must hold across them.
    started = [workers.start("-c", "10", overrides={"LOG_JOBS": False}) for _ in range(2)]
    for worker in started:
        worker.identity(raw_redis)
    worker_jobs.record.delay_many([(index,) for index in range(TOTAL)])

    wait_until(lambda: int(raw_redis.get("t:runs") or 0) >= TOTAL, 90, "10,000 runs")
    wait_until(lambda: int(raw_redis.get("stat:processed") or 0) >= TOTAL, 10, "stat:processed flushed")
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 10, "in-progress lists settled")

    seen = counts(raw_redis)
    assert len(seen) == TOTAL
    assert set(seen) == {str(index) for index in range(TOTAL)}
    duplicated = {key: count for key, count in seen.items() if count != 1}
    assert duplicated == {}
    assert int(raw_redis.get("t:runs")) == TOTAL
    assert raw_redis.llen("queue:default") == 0
    assert int(raw_redis.get("stat:processed")) == TOTAL
    assert raw_redis.get("stat:failed") in (None, b"0")
    today = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    assert int(raw_redis.get(f"stat:processed:{today}")) == TOTAL
    assert raw_redis.zcard("retry") == 0 and raw_redis.zcard("dead") == 0
    # Both processes did a share of the work.
    pids = {worker.pid for worker in started}
    assert all(worker.alive() for worker in started), pids

    # Every run recorded: the cap (10,000 runs) keeps at least that many of the newest.
    history = wait_until(lambda: len(history_runs(raw_redis)) >= TOTAL and history_runs(raw_redis), 20,
                         "every run in the history")
    assert {run.status for run in history} == {"ok"}
    assert {run.klass for run in history} == {"tests.worker_jobs.record"}
    identities = {run.identity for run in history}
    assert len(identities) == 2, "both workers should have run jobs"

    for worker in started:
        worker.send(signal.SIGTERM)
    for worker in started:
        assert worker.wait_exit(15) == 0
    assert raw_redis.scard("processes") == 0


def test_async_and_bound_jobs_run_with_their_request(workers, raw_redis):
    ref = worker_jobs.whoami.delay("w1", extra={"a": 1})
    worker_jobs.async_record.delay("a1")
    workers.start("-c", "2")

    wait_until(lambda: worker_jobs.notes(raw_redis, job="async_record"), 20, "the async job")
    (who,) = wait_until(lambda: worker_jobs.notes(raw_redis, job="whoami"), 20, "the bound job")
    assert who["id"] == ref.jid == who["payload_jid"]
    assert who["retries"] == 0
    assert who["queue"] == "default"
    assert who["args"] == ["w1"]
    assert who["kwargs"] == {"extra": {"a": 1}}
    (async_note,) = worker_jobs.notes(raw_redis, job="async_record")
    assert async_note["key"] == "a1"
    wait_until(lambda: int(raw_redis.get("stat:processed") or 0) == 2, 20, "both counted")
    assert raw_redis.zcard("dead") == 0 and raw_redis.zcard("retry") == 0


def test_django_task_runs_through_the_djwork_backend(workers, raw_redis):
    from example.tasks import multiply

    # RESULTS is off here (the default): the Tasks backend keeps its results whatever it says (its API
    # promises get_result), with no djwork_result field in the payload.
    result = multiply.enqueue(6, 7)
    assert result.status == TaskResultStatus.READY
    assert "djwork_result" not in json.loads(raw_redis.lindex("queue:default", 0))
    workers.start("-c", "2")

    def finished():
        fetched = multiply.get_result(result.id)
        return fetched if fetched.status in (TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED) else None

    done = wait_until(finished, 20, "the task to finish")
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == 42
    assert done.started_at is not None and done.finished_at is not None
    assert len(done.worker_ids) == 1
    assert done.worker_ids[0] in {m.decode() for m in raw_redis.smembers("processes")}
