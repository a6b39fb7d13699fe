"""Celery's task API under real ``runworkers``: the Django example's retries, hooks and signals, send_task.

Retry waits are not waited out: each test reads the retry's scheduled time from the `retry` set, then
moves it to now (ZADD XX). Hooks and signal receivers record each call in Redis (tests/task_api_jobs.py,
tests/task_api_receivers.py). docs/celery.md.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from django.utils import timezone

import djwork
from tests import celery_demo_jobs as demo
from tests import task_api_jobs
from tests.helpers_worker import ROOT, wait_until, zset_jobs
from tests.task_api_jobs import events

# The receivers are imported by the worker through its server middleware (see tests/task_api_receivers.py).
RECEIVERS = {"SERVER_MIDDLEWARE": ["tests.task_api_receivers.passthrough"]}


def _retry_entry(redis, jid: str, retry_count: int):
    def find():
        for job, score, raw in zset_jobs(redis, "retry"):
            if job["jid"] == jid and job["retry_count"] == retry_count:
                return job, score, raw
        return None

    return wait_until(find, 30, f"retry entry {retry_count} of {jid}")


def _make_due(redis, raw: str) -> None:
    assert redis.zadd("retry", {raw: time.time()}, xx=True, ch=True) == 1


def _dead(redis, jid: str):
    def find():
        return next((job for job, _score, _raw in zset_jobs(redis, "dead") if job["jid"] == jid), None)

    return wait_until(find, 30, f"{jid} in dead")


def test_demo_error_task_retries_twice_600s_apart_then_dies(workers, raw_redis):
    ref = demo.error_task.delay()
    workers.start("-c", "2")
    for count in (0, 1):
        job, score, raw = _retry_entry(raw_redis, ref.id, count)
        stamp = job.get("retried_at", job["failed_at"])
        assert score - stamp == pytest.approx(600, abs=0.01)  # retry_kwargs countdown, no backoff, no jitter
        assert (job["error_class"], job["error_message"]) == ("Exception", "Test error")
        _make_due(raw_redis, raw)
    dead = _dead(raw_redis, ref.id)
    assert dead["retry_count"] == 2  # Celery's request.retries on the last run: 2 retries, 3 runs
    assert dead["retry"] == 2
    assert raw_redis.zcard("retry") == 0


def test_demo_error_backoff_test_waits_5_10_20_then_dies(workers, raw_redis):
    ref = demo.error_backoff_test.delay()
    workers.start("-c", "2")
    waits = []
    for count in (0, 1, 2):
        job, score, raw = _retry_entry(raw_redis, ref.id, count)
        waits.append(round(score - job.get("retried_at", job["failed_at"]), 3))
        assert (job["error_class"], job["error_message"]) == ("Exception", "Test error")
        _make_due(raw_redis, raw)
    assert waits == [5, 10, 20]  # retry_backoff=5: 5 * 2**retries, retry_jitter=False
    assert _dead(raw_redis, ref.id)["retry_count"] == 3


def test_demo_orm_task_and_send_task_run_in_a_worker(workers, raw_redis, tmp_path, monkeypatch):
    # The workers' database: a file of their own, migrated here (pytest's test database is in memory).
    database = tmp_path / "workers.sqlite3"
    monkeypatch.setenv("DJWORK_EXAMPLE_DB", str(database))
    env = {"DJANGO_SETTINGS_MODULE": "tests.settings_worker", "DJWORK_EXAMPLE_DB": str(database)}
    subprocess.run([sys.executable, "manage.py", "migrate", "auth", "--noinput"], cwd=ROOT, check=True,
                   env={**os.environ, **env}, capture_output=True, timeout=120)
    with sqlite3.connect(database) as db:
        widget_id = db.execute("INSERT INTO auth_group (name) VALUES ('before')").lastrowid
    demo.rename_widget.delay(widget_id, "after")
    djwork.send_task("tests.task_api_jobs.plain", ["by-name"])
    workers.start("-c", "2", overrides=RECEIVERS)

    def renamed():
        with sqlite3.connect(database) as db:
            return db.execute("SELECT name FROM auth_group WHERE id = ?", (widget_id,)).fetchone()[0] == "after"

    wait_until(renamed, 30, "rename_widget to write through the ORM")
    wait_until(lambda: events(raw_redis, kind="plain_body", label="by-name"), 30, "the job sent by name")


def test_hooks_and_signals_in_a_worker_in_celerys_order(workers, raw_redis):
    ok = task_api_jobs.hooked.delay("ok", label="y")
    failed = task_api_jobs.hooked.delay("value")
    worker = workers.start("-c", "1", overrides=RECEIVERS)
    identity = worker.identity(raw_redis)
    wait_until(lambda: len(events(raw_redis, kind="task_postrun")) == 2, 30, "both jobs to end")

    # Sent once every component runs: the jobs may have ended before it.
    ready = wait_until(lambda: events(raw_redis, kind="worker_ready"), 30, "worker_ready")
    assert [row["identity"] for row in ready] == [identity]

    def of(jid):
        return [row for row in events(raw_redis) if jid in (row.get("task_id"), row.get("request_id"))]

    assert [row["kind"] for row in of(ok.id)] == [
        "task_received", "task_prerun", "before_start", "body", "on_success", "task_success", "after_return",
        "task_postrun"]
    body = events(raw_redis, kind="body", request_id=ok.id)[0]
    assert (body["is_instance"], body["hostname"], body["routing_key"], body["task"]) == (
        True, identity, "default", "tests.task_api_jobs.hooked")
    assert (body["is_eager"], body["called_directly"]) == (False, False)
    success = events(raw_redis, kind="on_success", task_id=ok.id)[0]
    assert (success["retval"], success["args"], success["kwargs"], success["request_id"]) == (
        "ok y", ["ok"], {"label": "y"}, ok.id)
    assert events(raw_redis, kind="task_success")[0]["result"] == "ok y"  # a raising receiver beside it changed nothing
    received = events(raw_redis, kind="task_received", task_id=ok.id)[0]
    assert (received["sender"], received["args"], received["hostname"]) == ("tests.task_api_jobs.hooked", ["ok"],
                                                                            identity)
    prerun = events(raw_redis, kind="task_prerun", task_id=ok.id)[0]
    assert (prerun["same_task"], prerun["args"], prerun["kwargs"]) == (True, ["ok"], {"label": "y"})
    postrun = events(raw_redis, kind="task_postrun", task_id=ok.id)[0]
    assert (postrun["state"], postrun["retval"]) == ("SUCCESS", "'ok y'")

    # ValueError is not in the class's autoretry_for: a failure at once, to dead.
    assert [row["kind"] for row in of(failed.id)] == [
        "task_received", "task_prerun", "before_start", "body", "on_failure", "task_failure", "after_return",
        "task_postrun"]
    failure = events(raw_redis, kind="task_failure", task_id=failed.id)[0]
    assert (failure["exception"], failure["has_traceback"]) == ("ValueError('x')", True)
    on_failure = events(raw_redis, kind="on_failure", task_id=failed.id)[0]
    assert on_failure["einfo_type"] == "ValueError" and on_failure["einfo_has_traceback"]
    assert events(raw_redis, kind="after_return", task_id=failed.id)[0]["status"] == "FAILURE"
    assert _dead(raw_redis, failed.id)["retry_count"] == 0

    worker.send(signal.SIGTERM)
    wait_until(lambda: events(raw_redis, kind="worker_shutdown"), 30, "worker_shutdown")
    assert events(raw_redis, kind="worker_shutdown")[0]["identity"] == identity


def test_retry_hooks_in_a_worker_then_failure(workers, raw_redis):
    ref = task_api_jobs.hooked.delay("lookup", label="k")  # KeyError: in the class's autoretry_for
    workers.start("-c", "1", overrides=RECEIVERS)
    job, score, raw = _retry_entry(raw_redis, ref.id, 0)
    assert score - job["failed_at"] == pytest.approx(1, abs=0.01)  # the class's default_retry_delay
    wait_until(lambda: events(raw_redis, kind="task_postrun", task_id=ref.id), 30, "the first run to end")
    retried = events(raw_redis, kind="on_retry", task_id=ref.id)[0]
    assert (retried["exc"], retried["retries"], retried["einfo_type"]) == ("KeyError('k')", 0, "KeyError")
    assert events(raw_redis, kind="task_retry", task_id=ref.id)[0]["reason"] == "KeyError('k')"
    assert events(raw_redis, kind="task_postrun", task_id=ref.id)[0]["state"] == "RETRY"
    # task_postrun comes after where after_return would be: Celery skips after_return for a retry.
    assert not events(raw_redis, kind="after_return", task_id=ref.id)
    _make_due(raw_redis, raw)
    dead = _dead(raw_redis, ref.id)
    assert dead["retry_count"] == 1  # max_retries = 1 on the class
    assert events(raw_redis, kind="on_failure", task_id=ref.id)[0]["retries"] == 1
    wait_until(lambda: events(raw_redis, kind="after_return", task_id=ref.id), 30, "after_return of the last run")
    assert [row["status"] for row in events(raw_redis, kind="after_return", task_id=ref.id)] == ["FAILURE"]


def test_a_raising_hook_changes_nothing_and_expired_jobs_send_task_revoked(workers, raw_redis):
    task_api_jobs.raising_hook.delay("fine")
    # Expired already when written: the worker drops it unrun.
    expired = task_api_jobs.plain.apply_async(["late"], expires=timezone.now() - dt.timedelta(seconds=1))
    worker = workers.start("-c", "1", overrides=RECEIVERS)
    wait_until(lambda: events(raw_redis, kind="task_revoked"), 30, "task_revoked for the expired job")
    revoked = events(raw_redis, kind="task_revoked")[0]
    # Received first, as Celery's worker sends it on taking the message, then dropped as expired.
    assert [row["kind"] for row in events(raw_redis, task_id=expired.id)] == ["task_received", "task_revoked"]
    assert (revoked["task_id"], revoked["expired"], revoked["sender"]) == (
        expired.id, True, "tests.task_api_jobs.plain")
    wait_until(lambda: raw_redis.get("stat:processed") == b"1", 30, "the job with the raising hook to be acked")
    assert raw_redis.get("stat:failed") in (None, b"0")
    assert raw_redis.zcard("retry") == 0 and raw_redis.zcard("dead") == 0
    assert events(raw_redis, kind="raising_hook_body", label="fine")
    wait_until(lambda: "RuntimeError: a hook that raises" in worker.log(), 10, "the hook's error in the log")
    assert "ignored (the job's outcome stands)" in worker.log()
    assert not events(raw_redis, kind="plain_body")


def test_a_class_based_task_runs_and_autoretries_in_a_worker(workers, raw_redis):
    ref = task_api_jobs.refresh.delay("acct", mode="lookup")
    workers.start("-c", "1")
    runs = wait_until(lambda: (found := events(raw_redis, kind="refresh")) and len(found) == 2 and found, 30,
                      "the class-based task's run and its retry")
    assert [(row["request_id"], row["retries"], row["is_instance"]) for row in runs] == [
        (ref.id, 0, True), (ref.id, 1, True)]
