"""Iterable jobs under real ``manage.py runworkers`` processes and real signals (docs/iterable.md).

10,000 rows of a real SQLite table (``auth_group`` in a file the workers share), walked by primary key,
each row marked in Redis as ``each`` finishes it. A row listed in the job's ``gates`` waits for the
test's go, so the test signals or kills the worker while that row is mid-flight, never by timing.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import djwork
from djwork import api
from djwork.iterable import state
from djwork.redis import keys
from tests import iterable_jobs as jobs
from tests.helpers_worker import ROOT, Workers, history_runs, wait_until

ROWS = 10_000
GATES = [2_517, 5_003, 7_481]  # off the 50-item checkpoints: a stop must save its own
T = 60  # seconds any one event may take on a loaded machine; each wait ends when it happens


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("iterable") / "rows.sqlite3"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings_worker", "DJWORK_EXAMPLE_DB": str(path)}
    subprocess.run([sys.executable, "manage.py", "migrate", "auth", "--noinput"], cwd=ROOT, check=True, env=env,
                   capture_output=True, timeout=300)
    with sqlite3.connect(path) as db:
        db.executemany("INSERT INTO auth_group (id, name) VALUES (?, ?)",
                       ((pk, f"row-{pk}") for pk in range(1, ROWS + 1)))
    return path


@pytest.fixture
def row_workers(workers: Workers, database: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DJWORK_EXAMPLE_DB", str(database))  # inherited by every worker started

    def start():
        # A drain long enough that the gated row always finishes inside it (TIMEOUT is 2 s in tests).
        return workers.start("-c", "2", "-q", "default", overrides={"TIMEOUT": 60, "LOG_JOBS": False})

    return start


def _release_gate(raw_redis, run: str, gate: int) -> None:
    raw_redis.rpush(f"i:go:{run}:{gate}", 1)


def _wait_at_gate(raw_redis, run: str, gate: int) -> None:
    wait_until(lambda: str(gate).encode() in raw_redis.lrange(f"i:waiting:{run}", 0, -1), T,
               f"the job waiting at row {gate}")


def _marks(raw_redis, run: str) -> dict[int, int]:
    return {int(row): int(count) for row, count in raw_redis.hgetall(jobs.marks(run)).items()}


def test_an_iteration_stopped_by_term_three_times_does_every_row_exactly_once(raw_redis, row_workers):
    run = "term"
    jid = jobs.Rows.delay(run, GATES).jid
    for gate in GATES:
        worker = row_workers()
        _wait_at_gate(raw_redis, run, gate)
        worker.send(signal.SIGTERM)
        worker.wait_log("no longer accepting new work", T)  # quiet: the job stops after this row
        _release_gate(raw_redis, run, gate)
        assert worker.wait_exit(T) == 0
        saved = state.peek(jid)
        assert saved is not None and saved.cursor == gate  # the row mid-flight at the TERM was finished
        assert raw_redis.llen(keys.queue("default")) == 1  # back on its queue, waiting for a worker
    last = row_workers()
    wait_until(lambda: raw_redis.lrange(jobs.events(run), -1, -1) == [f"complete:{ROWS}".encode()], T,
               "the iteration to complete")
    last.send(signal.SIGTERM)
    assert last.wait_exit(T) == 0

    assert _marks(raw_redis, run) == dict.fromkeys(range(1, ROWS + 1), 1)  # every row exactly once
    assert [event.decode() for event in raw_redis.lrange(jobs.events(run), 0, -1)] == [
        "start", f"stop:{GATES[0]}", f"resume:{GATES[0]}", f"stop:{GATES[1]}", f"resume:{GATES[1]}",
        f"stop:{GATES[2]}", f"resume:{GATES[2]}", f"complete:{ROWS}"]
    segments = [(entry.status, entry.resumed) for entry in history_runs(raw_redis) if entry.jid == jid]
    # Four segments, one run each; the three that started from a saved cursor are marked resumed.
    assert segments == [("rescheduled", False), ("rescheduled", True), ("rescheduled", True), ("ok", True)]
    assert [run.resumed for run in api.History.recent(jid=jid).runs] == [True, True, True, False]
    assert state.peek(jid) is None  # a completed iteration leaves no state behind


def test_an_iteration_killed_three_times_repeats_only_the_rows_since_its_checkpoint(raw_redis, row_workers):
    run = "kill"
    jid = jobs.Rows.delay(run, GATES).jid
    repeated: set[int] = set()
    for gate in GATES:
        worker = row_workers()
        _wait_at_gate(raw_redis, run, gate)
        saved = state.peek(jid)
        assert saved is not None
        # Done since the last checkpoint, so done again by the next segment: fewer than checkpoint_items.
        since_checkpoint = set(range(saved.cursor + 1, gate))
        assert len(since_checkpoint) < jobs.Rows.checkpoint_items
        repeated |= since_checkpoint
        worker.send(signal.SIGKILL)
        worker.wait_exit(T)
        _release_gate(raw_redis, run, gate)  # the next segment does the killed row once
    last = row_workers()  # its reaper returns the orphaned job, which resumes from the checkpoint
    wait_until(lambda: raw_redis.lrange(jobs.events(run), -1, -1) != [] and
               raw_redis.lrange(jobs.events(run), -1, -1)[0].startswith(b"complete:"), T * 2,
               "the iteration to complete")
    last.send(signal.SIGTERM)
    assert last.wait_exit(T) == 0

    marks = _marks(raw_redis, run)
    assert set(marks) == set(range(1, ROWS + 1))  # every row at least once
    assert {row for row, count in marks.items() if count > 1} == repeated  # again: only those since a checkpoint
    assert max(marks.values()) == 2
    events = [event.decode() for event in raw_redis.lrange(jobs.events(run), 0, -1)]
    assert events[0] == "start" and len([e for e in events if e.startswith("resume:")]) == 3
    assert not any(e.startswith("stop:") for e in events)  # a kill -9 runs no hook


@pytest.fixture
def counting_worker(workers: Workers):
    return workers.start("-c", "2", "-q", "default", overrides={"LOG_JOBS": False})


def test_a_retry_resumes_after_the_last_item_done(raw_redis, counting_worker):
    run = "retry"
    jid = jobs.CountTo.delay(run, 300, fail_at=120).jid
    entry = wait_until(lambda: next((raw for raw, _ in raw_redis.zrange(keys.RETRY, 0, -1, withscores=True)
                                     if jid.encode() in raw), None), T, "the failed segment in retry")
    saved = state.peek(jid)
    assert saved is not None and saved.cursor == 119  # saved as it failed: the item before the failing one
    raw_redis.zadd(keys.RETRY, {entry: 0}, xx=True)  # due now: the poller brings it back
    wait_until(lambda: raw_redis.lrange(jobs.events(run), -1, -1) == [b"complete:300"], T, "the retry to complete")

    assert _marks(raw_redis, run) == dict.fromkeys(range(300), 1)  # nothing done twice, nothing skipped
    assert [event.decode() for event in raw_redis.lrange(jobs.events(run), 0, -1)] == [
        "start", "resume:119", "complete:300"]


def test_a_cancel_stops_the_iteration_after_the_item_in_flight(raw_redis, counting_worker):
    run = "cancel"
    jobs.CancelSelf.delay(run, 1_000, 10)
    wait_until(lambda: raw_redis.lrange(jobs.events(run), -1, -1) == [b"stop:11"], T, "the cancelled stop")
    wait_until(lambda: not raw_redis.llen(keys.queue("default")) and not any(
        raw_redis.llen(key) for key in raw_redis.scan_iter(match="djwork:inprogress:*")), T, "the job to end")
    assert _marks(raw_redis, run) == dict.fromkeys(range(11), 1)  # item 10 finished; 11 never started
    assert raw_redis.lrange(jobs.events(run), 0, -1) == [b"start", b"stop:11"]


def test_a_soft_time_limit_sends_the_iteration_back_to_its_queue(raw_redis, counting_worker):
    run = "soft"
    jid = jobs.SlowOnce.delay(run, 40, 7).jid
    wait_until(lambda: raw_redis.lrange(jobs.events(run), -1, -1) == [b"complete:40"], T, "the iteration to end")
    assert _marks(raw_redis, run) == dict.fromkeys(range(40), 1)  # item 7, cut short, was done once after
    assert raw_redis.lrange(jobs.events(run), 0, -1) == [b"start", b"stop:7", b"resume:6", b"complete:40"]
    assert raw_redis.zcard(keys.RETRY) == 0  # not a failure: no retry spent
    def statuses() -> list[str]:
        # In the order the segments started, not the stream's: with two threads the resumed segment can end,
        # and be buffered, before the cut-short one's own record is (seen beside two CPU burners).
        runs = sorted((entry for entry in history_runs(raw_redis) if entry.jid == jid), key=lambda run: run.started)
        return [entry.status for entry in runs]

    try:
        wait_until(lambda: statuses() == ["rescheduled", "ok"], T, "two segments in the history")
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}: this job's runs in the history: {statuses()}") from None


def _interrupt_at_gate(raw_redis, worker, run: str, gate: int) -> None:
    _wait_at_gate(raw_redis, run, gate)
    worker.send(signal.SIGTERM)
    worker.wait_log("no longer accepting new work", T)
    _release_gate(raw_redis, run, gate)
    assert worker.wait_exit(T) == 0


def test_a_unique_iterations_lock_lives_until_it_completes(raw_redis, workers: Workers):
    run = "unique"
    ref = jobs.UniqueGatedCount.delay(run, 100, 30)
    _interrupt_at_gate(raw_redis, workers.start("-q", "default"), run, 30)
    assert jobs.UniqueGatedCount.delay(run, 100, 30).duplicate_of == ref.jid  # interrupted, still locked
    workers.start("-q", "default")
    wait_until(lambda: raw_redis.lrange(jobs.events(run), -1, -1) == [b"complete:100"], T, "the iteration to end")
    wait_until(lambda: jobs.UniqueGatedCount.set(countdown=3600).delay(run, 100, 30).duplicate_of is None, T,
               "the lock released with the completed iteration")
    assert _marks(raw_redis, run) == dict.fromkeys(range(100), 1)


def test_a_batch_member_counts_done_when_its_iteration_completes(raw_redis, workers: Workers):
    run = "batch"
    batch = djwork.Batch(description="iterable member")
    with batch.jobs():
        jobs.GatedCount.delay(run, 100, 30)
    _interrupt_at_gate(raw_redis, workers.start("-q", "default"), run, 30)
    interrupted = djwork.Batch.status(batch.bid)
    assert interrupted is not None and interrupted.pending == 1 and interrupted.complete_at is None
    workers.start("-q", "default")
    wait_until(lambda: djwork.Batch.status(batch.bid).complete_at is not None, T, "the batch to complete")
    assert djwork.Batch.status(batch.bid).pending == 0
    assert _marks(raw_redis, run) == dict.fromkeys(range(100), 1)


def test_a_quieted_worker_hands_the_iteration_to_another(raw_redis, workers: Workers):
    run = "quiet"
    jid = jobs.GatedCount.delay(run, 100, 30).jid
    quieted = workers.start("-q", "default", label="quieted")
    _wait_at_gate(raw_redis, run, 30)
    quieted.send(signal.SIGTSTP)
    quieted.wait_log("no longer accepting new work", T)
    _release_gate(raw_redis, run, 30)
    wait_until(lambda: raw_redis.llen(keys.queue("default")) == 1, T, "the iteration back on its queue")
    assert quieted.alive() and state.peek(jid).cursor == 30  # quiet, not stopped: it just takes no more work
    workers.start("-q", "default", label="next")
    wait_until(lambda: raw_redis.lrange(jobs.events(run), -1, -1) == [b"complete:100"], T, "the iteration to end")
    assert _marks(raw_redis, run) == dict.fromkeys(range(100), 1)
    assert raw_redis.lrange(jobs.events(run), 0, -1) == [b"start", b"stop:31", b"resume:30", b"complete:100"]
