"""Payloads no reader can decode reach `dead` as ``djwork.InvalidPayload``, whatever their shape or size.

A payload nested deeper than the JSON readers go (orjson stops at 1,024 levels, the stdlib
reader raises RecursionError) stayed in progress and came back to the next worker; a huge one
became a `dead` entry twice its size.
"""

from __future__ import annotations

import json
import time

import pytest

from djwork import api, dead
from djwork.payload import PayloadError, dumps, loads
from djwork.redis import keys
from tests import worker_jobs
from tests.helpers_worker import counts, in_progress_items, wait_until

DEPTH = 5_000
IN_PROGRESS = "djwork:in-progress:host:1:abc:default"


def _deep_job() -> str:
    return ('{"class":"tests.worker_jobs.record","queue":"default","jid":"deep","args":['
            + "[" * DEPTH + "]" * DEPTH + "]}")


def _dead_entries(redis) -> list[dict]:
    return [json.loads(member) for member in redis.zrange("dead", 0, -1)]


def test_a_payload_nested_too_deep_for_any_json_reader_is_a_payload_error():
    with pytest.raises(PayloadError, match="nested too deep"):
        loads(_deep_job())


def test_the_api_shows_a_too_deep_queue_entry_as_unreadable_and_deletes_it(raw_redis):
    raw_redis.lpush("queue:default", _deep_job())
    queue = api.Queue("default")
    [record] = queue.jobs().items
    assert any("nested too deep" in problem for problem in record.problems), record.problems
    queue.delete_job(record.ident)
    assert raw_redis.llen("queue:default") == 0


@pytest.mark.slow
def test_a_5000_deep_payload_reaches_dead_and_leaves_nothing_in_progress(workers, raw_redis):
    raw_redis.lpush("queue:default", _deep_job())
    worker_jobs.record.delay("after-the-deep-one")
    worker = workers.start("-c", "1", "-q", "default")
    wait_until(lambda: raw_redis.zcard("dead") == 1 and "after-the-deep-one" in counts(raw_redis), 30,
               "the deep payload buried and the job behind it run")
    [entry] = _dead_entries(raw_redis)
    assert entry["class"] == entry["error_class"] == "djwork.InvalidPayload"
    assert "nested too deep" in entry["error_message"]
    assert entry["raw_payload"] == _deep_job()
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 10, "nothing left in progress")
    assert "internal error while processing a job" not in worker.log()


# --- what `dead` keeps: a prefix of an unreadable payload, and a byte cap over the whole set ---------------------
HUGE = 20 * 1024 * 1024


@pytest.mark.slow
def test_a_20mb_unreadable_payload_becomes_a_small_dead_entry_that_keeps_its_start_and_size(
        workers, raw_redis):
    raw = "not json " + "x" * (HUGE - 9)
    raw_redis.lpush("queue:default", raw)
    workers.start("-c", "1", "-q", "default")
    wait_until(lambda: raw_redis.zcard("dead") == 1, 30, "the huge payload buried")
    [member] = raw_redis.zrange("dead", 0, -1)
    assert len(member) < 3 * dead.INVALID_PAYLOAD_KEPT  # the prefix twice, and the wrapper
    entry = json.loads(member)
    assert entry["raw_payload"] == entry["args"][0] == raw[:dead.INVALID_PAYLOAD_KEPT]
    assert entry["raw_payload_bytes"] == HUGE and entry["raw_payload_truncated"] is True
    assert f"{HUGE:,} bytes" in entry["error_message"]
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 10, "nothing left in progress")


def test_a_short_unreadable_payload_is_kept_whole_with_its_size():
    wrapper = dead.invalid_payload(b"\xff{", "default", "payload is not valid UTF-8")
    assert wrapper["raw_payload"] == wrapper["args"][0] == "\\xff{"
    assert wrapper["raw_payload_bytes"] == 2 and "raw_payload_truncated" not in wrapper


def _bury(raw_redis, jid: str, size: int, now: float) -> None:
    raw = dumps({"class": "HardJob", "args": ["y" * size], "queue": "default", "jid": jid})
    raw_redis.lpush(IN_PROGRESS, raw)
    dead.file_failure(IN_PROGRESS, raw, "dead", raw, now, jid, now=now).evaluate(raw_redis)


def _dead_bytes(raw_redis) -> int:
    return sum(len(member) for member in raw_redis.zrange(keys.DEAD, 0, -1))


def test_dead_is_trimmed_by_bytes_oldest_first_and_keeps_the_newest_entry_however_large(raw_redis, settings):
    settings.DJWORK = {**settings.DJWORK, "DEAD_MAX_BYTES": 10_000}
    now = time.time()
    for index in range(30):
        _bury(raw_redis, f"job-{index:02d}", 1_000, now + index)
    assert _dead_bytes(raw_redis) <= 10_000
    jids = [json.loads(member)["jid"] for member in raw_redis.zrange(keys.DEAD, 0, -1)]
    assert len(jids) >= 8 and jids == [f"job-{index:02d}" for index in range(30 - len(jids), 30)]
    assert int(raw_redis.get(keys.DEAD_BYTES)) == _dead_bytes(raw_redis)
    _bury(raw_redis, "huge", 50_000, now + 100)  # alone past the cap: kept, everything older goes
    assert [json.loads(member)["jid"] for member in raw_redis.zrange(keys.DEAD, 0, -1)] == ["huge"]


def test_the_byte_count_recovers_when_dead_is_emptied_or_its_counter_is_not_a_number(raw_redis, settings):
    settings.DJWORK = {**settings.DJWORK, "DEAD_MAX_BYTES": 10_000}
    now = time.time()
    for index in range(9):
        _bury(raw_redis, f"first-{index}", 1_000, now + index)
    raw_redis.delete(keys.DEAD)  # cleared by hand: the counter still says ~9,000
    for index in range(9):
        _bury(raw_redis, f"second-{index}", 1_000, now + 10 + index)
    assert raw_redis.zcard(keys.DEAD) >= 8  # not trimmed on the stale count alone
    raw_redis.set(keys.DEAD_BYTES, "garbage")
    _bury(raw_redis, "after-garbage", 1_000, now + 30)
    assert int(raw_redis.get(keys.DEAD_BYTES)) == _dead_bytes(raw_redis) <= 10_000
