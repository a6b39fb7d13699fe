"""Payloads that are not UTF-8: bytes until proven text, so one bad byte can't stop a worker.

A strict decode on the fetch, reconcile and taker paths raised on every pass
(the worker ran nothing more, and a requeue at TERM handed the byte to the
next worker); a lenient one changed the member, so the ack's LREM and the
dashboard's delete never found it. Now the exact bytes travel to dead, inside
the readable wrapper, escaped.
"""

from __future__ import annotations

import json

from djwork import api
from tests import worker_jobs
from tests.helpers_worker import counts, in_progress_items, wait_until

BAD_BYTES = b"\xff"
BAD_INSIDE_JSON = b'{"class":"tests.worker_jobs.record","args":["caf\xe9"],"queue":"default","jid":"badutf8"}'
NEVER = 60  # seconds: a FETCH_TIMEOUT no test here waits out


def _dead_entries(redis) -> list[dict]:
    return [json.loads(member) for member in redis.zrange("dead", 0, -1)]


def _assert_buried_escaped(redis, expected: int) -> None:
    dead = _dead_entries(redis)
    assert len(dead) == expected, dead
    for entry in dead:
        assert entry["class"] == "djwork.InvalidPayload"
        assert "not valid UTF-8" in entry["error_message"]
        assert "\\x" in entry["raw_payload"], entry["raw_payload"]  # the bytes, escaped, not replaced


def test_undecodable_payloads_in_a_backlog_go_to_dead_and_every_job_after_them_runs(workers, raw_redis):
    worker_jobs.record.delay_many([(index,) for index in range(10)])
    raw_redis.lpush("queue:default", BAD_BYTES, BAD_INSIDE_JSON)
    worker_jobs.record.delay_many([(index,) for index in range(10, 20)])
    worker = workers.start("-c", "2")
    wait_until(lambda: len(counts(raw_redis)) == 20 and raw_redis.zcard("dead") == 2, 30,
               "20 good jobs run and 2 bad payloads buried", interval=0.1)
    _assert_buried_escaped(raw_redis, 2)
    assert set(counts(raw_redis).values()) == {1}
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 10, "nothing left in progress")
    assert "UnicodeDecodeError" not in worker.log()


def test_an_idle_workers_taker_buries_an_undecodable_payload_and_keeps_taking(workers, raw_redis):
    # One queue: with idle takers of other queues holding every free slot, the rest of a burst waits
    # for their blocks to time out (a known latency gap, not this test's subject).
    worker = workers.start("-c", "2", "-q", "default", overrides={"FETCH_TIMEOUT": NEVER})
    wait_until(lambda: raw_redis.zcard("djwork:beats") == 1, 20, "the worker's first beat")
    # Takers block now (the queue is empty): the bad payload lands on one of them.
    raw_redis.lpush("queue:default", BAD_BYTES)
    wait_until(lambda: raw_redis.zcard("dead") == 1, 20, "the bad payload buried")
    worker_jobs.record.delay_many([(index,) for index in range(5)])
    wait_until(lambda: len(counts(raw_redis)) == 5, 20, "the 5 jobs after it")
    _assert_buried_escaped(raw_redis, 1)
    assert "UnicodeDecodeError" not in worker.log()


def test_the_api_shows_and_deletes_an_undecodable_queue_entry(raw_redis):
    raw_redis.lpush("queue:default", BAD_BYTES)
    queue = api.Queue("default")
    [record] = queue.jobs().items
    assert record.problems[0].startswith("payload is not valid UTF-8")
    assert record.raw == "\\xff"
    queue.delete_job(record.ident)
    assert raw_redis.llen("queue:default") == 0


def test_the_api_deletes_and_kills_undecodable_sorted_set_members(raw_redis):
    raw_redis.zadd("retry", {BAD_INSIDE_JSON: 1.0, BAD_BYTES: 2.0})
    retries = api.RetrySet()
    entries = {entry.job.member: entry for entry in retries.page().items}
    assert set(entries) == {BAD_INSIDE_JSON, BAD_BYTES}
    retries.delete(entries[BAD_BYTES])
    retries.kill(entries[BAD_INSIDE_JSON])
    assert raw_redis.zcard("retry") == 0
    assert raw_redis.zcard("dead") == 1


def test_a_due_scheduled_entry_that_is_not_utf8_goes_to_dead_unchanged_not_promoted(workers, raw_redis):
    # A lenient decode turned the byte into U+FFFD and promoted a different job than the one stored.
    raw_redis.zadd("schedule", {BAD_INSIDE_JSON: 1.0})
    worker_jobs.record.perform_in(0, "after")
    workers.start("-c", "1")
    wait_until(lambda: raw_redis.zcard("dead") == 1 and counts(raw_redis).get("after") == 1, 30,
               "the bad entry buried and the good one run")
    _assert_buried_escaped(raw_redis, 1)
    assert raw_redis.zcard("schedule") == 0
    assert counts(raw_redis) == {"after": 1}
