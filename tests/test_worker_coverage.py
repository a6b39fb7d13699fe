"""Runtime features no other test drives through a real worker: basic fetch, weighted queue order,
capsules, server middleware and expired jobs."""

from __future__ import annotations

import json
import math
import signal

from djwork import api
from tests import coverage_jobs, worker_jobs
from tests.helpers_worker import counts, decode, history_runs, in_progress_items, wait_until, zset_jobs


def _history(redis) -> dict[str, str]:
    """jid -> status, from the execution history stream."""
    return {run.jid: run.status for run in history_runs(redis)}


def _held_started(redis, group: str, count: int = 1) -> list[dict]:
    started = worker_jobs.notes(redis, job="held", group=group)
    return started if len(started) >= count else []


# --- FETCH = "basic" ------------------------------------------------------------------------------
def test_basic_fetch_runs_jobs_with_no_in_progress_list_and_stops_cleanly(workers, raw_redis):
    worker_jobs.record.delay_many([(f"basic-{index}",) for index in range(20)])
    coverage_jobs.held.delay("basic", 0)
    worker = workers.start("-c", "4", overrides={"FETCH": "basic", "TIMEOUT": 20})
    identity = worker.identity(raw_redis)

    wait_until(lambda: len(counts(raw_redis)) == 20, 30, "the 20 jobs")
    assert set(counts(raw_redis).values()) == {1}
    wait_until(lambda: _held_started(raw_redis, "basic"), 30, "the held job to start")
    # Running, and popped: reliable fetch would hold it on an in-progress list
    # until the ack; basic fetch keeps it in the process only (a kill -9 now loses it).
    assert in_progress_items(raw_redis) == {}
    assert raw_redis.llen("queue:default") == 0

    worker.send(signal.SIGTERM)
    wait_until(lambda: raw_redis.hget(identity, "quiet") == b"true", 15, "the worker to go quiet")
    raw_redis.set(coverage_jobs.GATE, 1)
    assert worker.wait_exit(30) == 0
    assert worker_jobs.notes(raw_redis, job="held-done", group="basic")
    assert not raw_redis.sismember("processes", identity)
    assert raw_redis.llen("queue:default") == 0
    assert raw_redis.zcard("retry") == 0 and raw_redis.zcard("dead") == 0
    assert not list(raw_redis.scan_iter("djwork:inprogress:*"))


def test_basic_fetch_pushes_back_a_job_still_running_at_the_deadline(workers, raw_redis):
    coverage_jobs.held.delay("deadline", 0)
    worker = workers.start("-c", "1", overrides={"FETCH": "basic", "TIMEOUT": 1})
    wait_until(lambda: _held_started(raw_redis, "deadline"), 30, "the held job to start")
    # The gate stays shut: the job is certainly still running when the 1 s drain ends.
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(30) == 0
    assert [json.loads(raw)["args"] for raw in raw_redis.lrange("queue:default", 0, -1)] == [["deadline", 0]]


# --- weighted queue order -------------------------------------------------------------------------
# Each fetch fills its batch from the first queue in its order while that queue
# has jobs; with weights the first queue is picked by a smooth weighted
# round-robin (QUEUES in docs/settings.md), so over every four one-job fetches
# "a" comes first three times. With concurrency 1 every batch is one job: over
# 3,000 jobs a:b is 3:1 within a job or two, far inside 5 %. Strict order would
# run only "a" jobs, equal weights as many "b" as "a", and a weighted random
# draw (Sidekiq's) misses the 5 % window about one run in four.
WEIGHTED_JOBS = 3_000
WEIGHTS = {"a": 3, "b": 1}
RATIO_TOLERANCE = 0.05


def test_weighted_queues_are_taken_three_to_one(workers, raw_redis):
    # More than the measured jobs use up in strict order or with equal weights too, so that a
    # wrong order fails on the ratio; every counted job was taken while both queues had jobs.
    preload = {"a": WEIGHTED_JOBS * 5 // 4, "b": WEIGHTED_JOBS * 5 // 8}
    for queue, amount in preload.items():
        coverage_jobs.take_order.set(queue=queue).delay_many([(queue,)] * amount)
    worker = workers.start("-c", "1", "-q", "a,3", "-q", "b,1", overrides={"LOG_JOBS": False})

    def enough_taken() -> bool:
        assert worker.alive(), worker.log()[-3000:]
        return raw_redis.llen(coverage_jobs.ORDER) >= WEIGHTED_JOBS

    wait_until(enough_taken, 300, f"{WEIGHTED_JOBS} jobs", interval=0.5)
    worker.send(signal.SIGTERM)
    order = [decode(queue) for queue in raw_redis.lrange(coverage_jobs.ORDER, 0, WEIGHTED_JOBS - 1)]
    taken = {queue: order.count(queue) for queue in WEIGHTS}
    assert taken["a"] + taken["b"] == WEIGHTED_JOBS
    assert taken["a"] < preload["a"] and taken["b"] < preload["b"], f"a queue ran dry while counting: {taken}"
    ratio = taken["a"] / taken["b"] if taken["b"] else math.inf
    assert abs(ratio / 3 - 1) <= RATIO_TOLERANCE, f"a:b = {ratio:.3f}:1 over {WEIGHTED_JOBS} jobs {taken}"
    assert worker.wait_exit(30) == 0


# --- capsules ---------------------------------------------------------------------------------------
def test_each_capsule_runs_its_queues_on_its_own_threads(workers, raw_redis):
    coverage_jobs.held.set(queue="serial").delay_many([("serial", index) for index in range(5)])
    coverage_jobs.rendezvous.delay_many([("default", 3)] * 3)
    worker = workers.start("-c", "3", "-q", "default", overrides={
        "CAPSULES": {"serial": {"QUEUES": ["serial"], "CONCURRENCY": 1}},
    })
    identity = worker.identity(raw_redis)

    # The default capsule's three threads: the rendezvous jobs finish only once all three run at once.
    wait_until(lambda: len(worker_jobs.notes(raw_redis, job="rendezvous")) == 3, 30, "three jobs at once")
    # The serial capsule's one thread: its first job holds it, and its fetch took that job alone.
    wait_until(lambda: _held_started(raw_redis, "serial"), 30, "the first serial job")
    held_in_progress = [json.loads(raw)["args"] for items in in_progress_items(raw_redis).values() for raw in items
                        if json.loads(raw)["queue"] == "serial"]
    assert held_in_progress == [["serial", 0]]
    assert raw_redis.llen("queue:serial") == 4

    raw_redis.set(coverage_jobs.GATE, 1)
    wait_until(lambda: len(worker_jobs.notes(raw_redis, job="held-done", group="serial")) == 5, 30,
               "the five serial jobs")
    started = worker_jobs.notes(raw_redis, job="held", group="serial")
    assert [note["index"] for note in started] == [0, 1, 2, 3, 4]
    assert {note["running"] for note in started} == {1}
    assert raw_redis.get(coverage_jobs.PEAK.format("serial")) == b"1"

    assert raw_redis.hget(identity, "concurrency") == b"4"
    info = json.loads(raw_redis.hget(identity, "info"))
    assert info["concurrency"] == 4
    assert set(info["queues"]) == {"default", "serial"}
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(15) == 0


# --- server middleware ----------------------------------------------------------------------------
def test_server_middleware_wraps_every_job_and_sees_its_errors(workers, raw_redis):
    refs = {
        "plain": coverage_jobs.guarded.delay("plain"),
        "failing": coverage_jobs.guarded.delay("failing", fail=True),
        "refused": coverage_jobs.guarded.delay("refused"),
        "swallowed": coverage_jobs.guarded.delay("swallowed", fail=True),
    }
    jids = {key: ref.jid for key, ref in refs.items()}
    workers.start("-c", "2", overrides={
        "SERVER_MIDDLEWARE": ["tests.coverage_jobs.recording_middleware", "tests.coverage_jobs.Gatekeeper"],
    })

    wait_until(lambda: len(_history(raw_redis)) == 4, 30, "the four jobs in the history")
    assert _history(raw_redis) == {jids["plain"]: "ok", jids["failing"]: "retry", jids["refused"]: "retry",
                                   jids["swallowed"]: "ok"}

    def seen(key: str) -> list[str]:
        """What the outer middleware and the job recorded for one job, in order."""
        rows = [row for row in worker_jobs.notes(raw_redis)
                if row.get("jid") == jids[key] or (row.get("job") == "guarded" and row.get("key") == key)]
        return [row.get("middleware") or row["job"] if "error" not in row else f"error:{row['error']}"
                for row in rows]

    assert seen("plain") == ["before", "guarded", "after"]
    assert seen("failing") == ["before", "guarded", "error:ValueError"]
    assert seen("refused") == ["before", "error:RefusedByMiddleware"]  # the job itself never ran
    assert seen("swallowed") == ["before", "guarded", "after"]
    for row in worker_jobs.notes(raw_redis, middleware="before"):
        assert row["job_name"] == coverage_jobs.guarded.name
        assert row["queue"] == "default"
        key = next(key for key, jid in jids.items() if jid == row["jid"])
        assert row["args"][0] == key

    retried = {entry["jid"]: entry for entry, _score, _raw in zset_jobs(raw_redis, "retry")}
    assert set(retried) == {jids["failing"], jids["refused"]}
    assert retried[jids["failing"]]["error_class"] == "ValueError"
    assert retried[jids["refused"]]["error_class"].endswith("RefusedByMiddleware")
    assert raw_redis.zcard("dead") == 0


# --- expired jobs -----------------------------------------------------------------------------------
def test_an_expired_job_is_dropped_acked_and_recorded(workers, raw_redis):
    expired = worker_jobs.record.apply_async(["expired"], expires=-60)
    fresh = worker_jobs.record.apply_async(["fresh"], expires=3600)
    queued = [json.loads(raw) for raw in raw_redis.lrange("queue:default", 0, -1)]
    assert all("expires_at" in payload for payload in queued)
    worker = workers.start("-c", "1")

    # One thread and one queue: the expired job, enqueued first, was handled before the fresh one ran.
    wait_until(lambda: counts(raw_redis).get("fresh") == 1, 20, "the job that has not expired")
    wait_until(lambda: len(_history(raw_redis)) == 2, 10, "both jobs in the history")
    assert _history(raw_redis) == {expired.jid: "expired", fresh.jid: "ok"}
    assert "expired" not in counts(raw_redis)
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 10, "both acks")
    assert raw_redis.llen("queue:default") == 0
    assert raw_redis.zcard("retry") == 0 and raw_redis.zcard("dead") == 0
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(15) == 0
    # The stat window is flushed at shutdown at the latest: counted once, as expired and not as processed.
    assert raw_redis.get("djwork:stat:expired") == b"1"
    assert raw_redis.get("stat:processed") == b"1"
    assert api.Stats.fetch().expired == 1
