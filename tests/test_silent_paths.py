"""Paths that used to pass without a word: each now leaves a log line or a clear refusal."""

from __future__ import annotations

import time

import pytest

from djwork import api, dead
from djwork.payload import dumps, new_jid
from tests.helpers_worker import wait_until


def test_an_unknown_class_is_logged_when_it_goes_to_dead(workers, raw_redis):
    jid = new_jid()
    raw_redis.lpush("queue:default", dumps({"class": "nowhere.Missing", "args": [], "queue": "default",
                                           "jid": jid, "retry": True, "created_at": time.time(),
                                           "enqueued_at": time.time()}))
    worker = workers.start("-c", "1")
    wait_until(lambda: raw_redis.zcard("dead") == 1, 20, "the unknown class buried")
    line = worker.wait_log("unknown job class 'nowhere.Missing'", 10)
    assert jid in line and "sent to dead" in line


def test_retry_now_refuses_an_unreadable_payloads_wrapper(raw_redis):
    # Queued, the wrapper would come straight back to dead as an unknown class.
    wrapper = dead.invalid_payload(b"\xff", "default", "payload is not valid UTF-8")
    raw_redis.zadd("dead", {dumps(wrapper): time.time()})
    dead_set = api.DeadSet()
    [entry] = dead_set.page().items
    with pytest.raises(api.NotRetryable, match="unreadable payload"):
        dead_set.retry(entry)
    assert raw_redis.zcard("dead") == 1 and raw_redis.llen("queue:default") == 0
