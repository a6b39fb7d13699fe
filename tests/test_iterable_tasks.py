"""The Django Tasks form of an iterable job (``djwork.resumable`` in a ``@task`` body), under real workers
and real signals (docs/iterable.md, The Django Tasks form).

Each gated item says so and waits for the test's go, so the test signals the worker while that item is
mid-flight, never by timing; every item done bumps a per-item marker in Redis.
"""

from __future__ import annotations

import signal

import pytest
from django.test import override_settings

import djwork
from djwork import api
from djwork.iterable import state
from djwork.redis import keys
from djwork.tasks_compat import TaskResultStatus, task_backends
from tests import iterable_jobs as jobs
from tests.helpers_worker import Workers, history_runs, wait_until

T = 60  # seconds any one event may take on a loaded machine; each wait ends when it happens
COUNT = 3_000
GATES = [700, 1_455, 2_212]  # off the 1,000-item checkpoints: a stop must save its own


def _marks(raw_redis, run: str) -> dict[int, int]:
    return {int(item): int(count) for item, count in raw_redis.hgetall(jobs.marks(run)).items()}


def _events(raw_redis, run: str) -> list[str]:
    return [event.decode() for event in raw_redis.lrange(jobs.events(run), 0, -1)]


def test_a_task_stopped_by_term_three_times_resumes_and_does_every_item_exactly_once(raw_redis,
                                                                                     workers: Workers):
    run = "task-term"
    result = jobs.gated_count_task.enqueue(run, COUNT, GATES)
    backend = task_backends["default"]
    for gate in GATES:
        worker = workers.start("-c", "2", "-q", "default", overrides={"TIMEOUT": 60, "LOG_JOBS": False})
        wait_until(lambda gate=gate: str(gate).encode() in raw_redis.lrange(f"i:waiting:{run}", 0, -1), T,
                   f"the task waiting at item {gate}")
        assert backend.get_result(result.id).status == TaskResultStatus.RUNNING
        worker.send(signal.SIGTERM)
        worker.wait_log("no longer accepting new work", T)  # quiet: the loop stops after this item
        raw_redis.rpush(f"i:go:{run}:{gate}", 1)
        assert worker.wait_exit(T) == 0
        saved = state.peek(result.id)
        assert saved is not None and saved.cursor == gate  # the item mid-flight at the TERM was finished
        assert raw_redis.llen(keys.queue("default")) == 1  # back on its queue, waiting for a worker
        # Django's READY: "ready to be executed again"; no return value while the iteration is unfinished.
        waiting = backend.get_result(result.id)
        assert waiting.status == TaskResultStatus.READY and waiting.finished_at is None
    last = workers.start("-c", "2", "-q", "default", overrides={"LOG_JOBS": False})
    wait_until(lambda: backend.get_result(result.id).status == TaskResultStatus.SUCCESSFUL, T,
               "the task to succeed")
    last.send(signal.SIGTERM)
    assert last.wait_exit(T) == 0

    assert _marks(raw_redis, run) == dict.fromkeys(range(COUNT), 1)  # every item exactly once
    assert _events(raw_redis, run) == [
        "segment:1:None", f"segment:2:{GATES[0]}", f"segment:3:{GATES[1]}", f"segment:4:{GATES[2]}",
        f"complete:{COUNT}"]
    done = backend.get_result(result.id)
    assert done.return_value == {"items": COUNT, "segments": 4}
    assert len(done.worker_ids) == 4  # one per segment
    segments = [(entry.status, entry.resumed) for entry in history_runs(raw_redis) if entry.jid == result.id]
    assert segments == [("rescheduled", False), ("rescheduled", True), ("rescheduled", True), ("ok", True)]
    assert state.peek(result.id) is None  # a completed iteration leaves no state behind


def test_a_task_that_fails_inside_its_loop_retries_after_the_last_item_done(raw_redis, workers: Workers):
    run = "task-retry"
    result = jobs.gated_count_task.enqueue(run, 300, [], fail_at=120)
    workers.start("-c", "2", "-q", "default", overrides={"LOG_JOBS": False})
    entry = wait_until(lambda: next((raw for raw, _ in raw_redis.zrange(keys.RETRY, 0, -1, withscores=True)
                                     if result.id.encode() in raw), None), T, "the failed run in retry")
    saved = state.peek(result.id)
    assert saved is not None and saved.cursor == 119  # saved by the run hook as it failed
    raw_redis.zadd(keys.RETRY, {entry: 0}, xx=True)  # due now: the poller brings it back
    backend = task_backends["default"]
    wait_until(lambda: backend.get_result(result.id).status == TaskResultStatus.SUCCESSFUL, T,
               "the retry to succeed")
    assert _marks(raw_redis, run) == dict.fromkeys(range(300), 1)  # nothing done twice, nothing skipped
    assert _events(raw_redis, run) == ["segment:1:None", "segment:2:119", "complete:300"]
    # The worker writes its history every flush interval, after the run: wait for it, don't read it at once.
    wait_until(lambda: api.History.recent(jid=result.id).runs, T, "the runs in the history")


@pytest.mark.django_db(transaction=False)
def test_under_another_backend_the_loop_walks_every_item_and_saves_nothing(raw_redis):
    immediate = {"default": {"BACKEND": "djwork.tasks_backend.DjworkBackend", "QUEUES": ["default", "low"]},
                 "immediate": {"BACKEND": _immediate_backend(), "QUEUES": ["default", "low"]}}
    with override_settings(TASKS=immediate):
        result = jobs.gated_count_task.using(backend="immediate").enqueue("task-inline", 2_500, [])
        assert result.status == TaskResultStatus.SUCCESSFUL
        assert result.return_value == {"items": 2_500, "segments": 1}
    assert _marks(raw_redis, "task-inline") == dict.fromkeys(range(2_500), 1)
    assert not list(raw_redis.scan_iter(match="djwork:iteration:*"))  # nothing would resume it


def test_a_bad_checkpoint_interval_is_refused_before_the_loop():
    with pytest.raises(TypeError, match="checkpoint_items must be None or an integer >= 1"):
        djwork.resumable(None, lambda cursor: iter(()), checkpoint_items=0)


def _immediate_backend() -> str:
    try:
        import django.tasks.backends.immediate  # noqa: F401  # Django 6.0+
    except ImportError:
        return "django_tasks.backends.immediate.ImmediateBackend"
    return "django.tasks.backends.immediate.ImmediateBackend"
