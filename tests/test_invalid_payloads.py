"""Payloads no reader can decode reach `dead` as ``djwork.InvalidPayload``, whatever their shape or size.

A payload nested deeper than the JSON readers go (orjson stops at 1,024 levels, the stdlib
reader raises RecursionError) stayed in progress and came back to the next worker; a huge one
became a `dead` entry twice its size.
"""

from __future__ import annotations

import json

import pytest

from djwork import api
from djwork.payload import PayloadError, loads
from tests import worker_jobs
from tests.helpers_worker import counts, in_progress_items, wait_until, workers  # noqa: F401

DEPTH = 5_000


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
def test_a_5000_deep_payload_reaches_dead_and_leaves_nothing_in_progress(workers, raw_redis):  # noqa: F811
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
