"""Features in a push, and where they run against the user's CLIENT_MIDDLEWARE (djwork/push_hooks.py).

Each test pins one reason for the order, with one push and with delay_many:
the user's middleware sees a batch's ``bid``, and the batch collects the
push as middleware left it (or not at all once stopped); a unique lock is
taken only by a push middleware let through; ``before_task_publish`` sees
the payload after every middleware; a batch keeps its pushes in a testing
mode.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.test import override_settings

import djwork
import djwork.testing
from djwork import keys, signals
from tests import batch_jobs, jobs, unique_jobs

seen: list[tuple[Any, Any]] = []  # (args, bid) as the middleware below saw each push


def tag_stop_or_move(payload: dict[str, Any], queue: str, call_next: Any) -> dict[str, Any] | None:
    """Records the ``bid`` it sees; stops a push whose first argument is "stop", moves "move" to queue low."""
    seen.append((payload.get("args"), payload.get("bid")))
    first = (payload.get("args") or [None])[0]
    if first == "stop":
        return None
    if first == "move":
        payload["queue"] = "low"
    payload["tenant"] = "acme"
    return call_next()


def client_middleware() -> Any:
    return override_settings(DJWORK={**settings.DJWORK, "CLIENT_MIDDLEWARE": [tag_stop_or_move]})


def jobs_on(raw_redis: Any, queue: str) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in reversed(raw_redis.lrange(keys.queue(queue), 0, -1))]


def test_a_batch_stamps_before_client_middleware_and_collects_what_it_let_through(raw_redis):
    seen.clear()
    batch = djwork.Batch()
    with client_middleware(), batch.jobs():
        kept = batch_jobs.member.delay("keep")
        stopped = batch_jobs.member.delay("stop")
        moved = batch_jobs.member.delay("move")
        bulk = batch_jobs.member.delay_many([("keep-too",), ("stop",)])
    assert [args for args, _bid in seen] == [["keep"], ["stop"], ["move"], ["keep-too"], ["stop"]]
    assert {bid for _args, bid in seen} == {batch.bid}  # the middleware saw the bid: stamped before it ran
    assert stopped.jid is None and bulk[1].jid is None
    # Collected after the middleware: a stopped push is no member (the batch would wait for it for ever),
    # a moved one is written where the middleware sent it, with its edits.
    members = {member.decode() for member in raw_redis.smembers(keys.batch_jids(batch.bid))}
    assert members == {kept.jid, moved.jid, bulk[0].jid}
    assert [(job["jid"], job["bid"], job["tenant"]) for job in jobs_on(raw_redis, "default")] == [
        (kept.jid, batch.bid, "acme"), (bulk[0].jid, batch.bid, "acme")]
    assert [(job["jid"], job["queue"]) for job in jobs_on(raw_redis, "low")] == [(moved.jid, "low")]


def test_a_unique_lock_is_taken_only_by_a_push_client_middleware_let_through(raw_redis):
    with client_middleware():
        assert unique_jobs.held.delay("stop").jid is None
        assert [ref.jid for ref in unique_jobs.held.delay_many([("stop",)])] == [None]
        assert raw_redis.keys("unique:*") == []  # a lock taken before the middleware would block the next push
        moved = unique_jobs.held.delay("move")
        again = unique_jobs.held.delay("move")
    # The lock step wrote the payload as the middleware left it, on the queue it chose, and listed that queue.
    (job,) = jobs_on(raw_redis, "low")
    assert (job["jid"], job["tenant"]) == (moved.jid, "acme")
    assert raw_redis.smembers(keys.QUEUES) == {b"low"}
    (lock,) = raw_redis.keys("unique:*")
    assert raw_redis.get(lock).decode() == moved.jid
    assert again.duplicate_of == moved.jid


def test_publish_signals_see_the_push_after_every_client_middleware(raw_redis):
    before: list[tuple[Any, Any]] = []
    after: list[str] = []

    def on_before(sender: Any, body: dict[str, Any], routing_key: str, **rest: Any) -> None:
        before.append((body.get("tenant"), routing_key))

    def on_after(sender: Any, body: dict[str, Any], **rest: Any) -> None:
        after.append(body["jid"])

    signals.before_task_publish.connect(on_before, weak=False)
    signals.after_task_publish.connect(on_after, weak=False)
    try:
        with client_middleware():
            moved = jobs.add.delay("move")
            jobs.add.delay("stop")
            bulk = jobs.add.delay_many([("stop",), ("keep",)])
    finally:
        signals.before_task_publish.disconnect(on_before)
        signals.after_task_publish.disconnect(on_after)
    # A stopped push is never published; a moved one is published to the queue the middleware chose.
    assert before == [("acme", "low"), ("acme", "default")]
    assert after == [moved.jid, bulk[1].jid]


def test_a_push_a_feature_kept_is_published_too(raw_redis):
    # push_bulk once returned before its after_task_publish loop when no job was left to write.
    after: list[str] = []

    def on_after(sender: Any, body: dict[str, Any], **rest: Any) -> None:
        after.append(body["jid"])

    signals.after_task_publish.connect(on_after, weak=False)
    try:
        with djwork.testing.fake():
            one = jobs.add.delay(1)
            many = jobs.add.delay_many([(2,), (3,)])
    finally:
        signals.after_task_publish.disconnect(on_after)
    assert after == [one.jid, many[0].jid, many[1].jid]


def test_a_batch_keeps_its_pushes_in_a_testing_mode(raw_redis):
    # Collected by fake(), a batch's job would never reach the batch's accounting: the batch is asked first.
    batch = djwork.Batch()
    with djwork.testing.fake() as pushed:
        with batch.jobs():
            ref = batch_jobs.member.delay("in-batch")
            (bulk,) = batch_jobs.member.delay_many([("in-batch-too",)])
        outside = batch_jobs.member.delay("outside")
    assert [job.jid for job in pushed] == [outside.jid]
    assert [job["jid"] for job in jobs_on(raw_redis, "default")] == [ref.jid, bulk.jid]
    assert {member.decode() for member in raw_redis.smembers(keys.batch_jids(batch.bid))} == {ref.jid, bulk.jid}
