"""djwork.api's admin writes when the connection breaks mid-action (tests/faultproxy.py in front of the private Redis).

The dashboard's Retry / Enqueue now move an entry from a sorted set onto its
queue. Removing the entry first and pushing second lost the job whenever the
connection broke after the remove: the remove is not replayed (its reply
decides what happens next), so the push never came. The move is one
promote.lua call now, which pushes before it removes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from djwork import api
from djwork import redis as redis_layer
from djwork.redis import RedisEvent, scripts
from tests.browser import seed
from tests.faultproxy import FaultProxy

FAST = {"REDIS_BACKOFF_BASE": 0.01, "REDIS_BACKOFF_CAP": 0.05, "REDIS_MAX_ATTEMPTS": 3,
        "CONNECT_TIMEOUT": 0.5, "SOCKET_TIMEOUT": 2.0}

# (set class, its key, the action, where the job goes): every single-entry promote path of the API.
PROMOTIONS = [
    (api.RetrySet, "retry", "retry", "low"),
    (api.DeadSet, "dead", "retry", "low"),
    (api.ScheduledSet, "schedule", "add_to_queue", "low"),
]


@pytest.fixture
def proxy(raw_redis, redis_url: str, settings) -> Iterator[FaultProxy]:
    """The API's Redis behind a fault proxy; promote.lua already cached, so its one EVALSHA does the move."""
    raw_redis.script_load(scripts.source("promote"))
    with FaultProxy.in_front_of(redis_url) as running:
        settings.DJWORK = {**settings.DJWORK, "REDIS_URL": running.url, **FAST}
        yield running
        redis_layer.reset()  # no pooled socket to the stopped proxy survives the test


def _entry(raw_redis, set_class: type[api.JobSet], key: str) -> tuple[api.SortedEntry, dict]:
    payload = seed.failed(seed.job(klass="HardJob", queue="low"), count=2)
    seed.zadd(raw_redis, key, payload, time.time() + 600)
    entry = set_class().find_job(payload["jid"])
    assert entry is not None
    return entry, payload


@pytest.mark.parametrize(("set_class", "key", "action", "queue"), PROMOTIONS)
def test_lost_reply_mid_promotion_leaves_the_job_queued_exactly_once(raw_redis, proxy, events, set_class, key,
                                                                     action, queue) -> None:
    entry, payload = _entry(raw_redis, set_class, key)
    # The next command the action sends, whatever it is, runs on the server and then the connection is cut
    # before its reply arrives (a remove-then-push implementation loses the job right here).
    fired = proxy.drop_next()
    outcome: object = None
    try:
        getattr(set_class(), action)(entry)
    except Exception as error:  # checked below, after the data: what matters first is where the job is
        outcome = error
    assert fired.is_set()
    assert raw_redis.zcard(key) == 0
    queued = [json.loads(raw) for raw in raw_redis.lrange(f"queue:{queue}", 0, -1)]
    assert [job["jid"] for job in queued] == [payload["jid"]]
    assert proxy.count("EVALSHA") == 2  # the promotion ran, its reply was lost, and it was replayed once
    assert [(event.kind, event.reason) for event in events] == [("retry", "idempotent")]
    # The replay finds the entry gone (the first try moved it) and can only report it stale.
    assert isinstance(outcome, api.StaleEntry)


def test_redis_gone_after_the_promotion_ran_is_reported_and_the_job_is_kept(raw_redis, proxy, settings) -> None:
    entry, payload = _entry(raw_redis, api.RetrySet, "retry")

    def refuse_replays(event: RedisEvent) -> None:
        # Runs in the calling thread before the replay dials: every later dial is refused.
        if event.kind == "retry":
            proxy.refuse()

    fired = proxy.drop_next("EVALSHA", argument=scripts.sha("promote"))
    redis_layer.add_listener(refuse_replays)
    try:
        with pytest.raises(api.RedisUnavailable) as raised:
            api.RetrySet().retry(entry)
    finally:
        redis_layer.remove_listener(refuse_replays)
    assert fired.is_set()
    assert isinstance(raised.value, api.ApiError) and raised.value.__cause__ is not None
    assert raw_redis.zcard("retry") == 0
    assert [json.loads(raw)["jid"] for raw in raw_redis.lrange("queue:low", 0, -1)] == [payload["jid"]]


def test_lost_reply_during_retry_all_queues_every_job_once(raw_redis, proxy) -> None:
    jids = []
    for number in range(3):
        payload = seed.failed(seed.job(klass=f"Job{number}", queue="low"), count=1)
        seed.zadd(raw_redis, "retry", payload, 100.0 + number)
        jids.append(payload["jid"])
    # Let the bulk action's reads and first promotion through, then cut the second promotion's reply.
    fired = proxy.drop_next("EVALSHA", argument=scripts.sha("promote"), skip=1)
    done, skipped = api.RetrySet().retry_all()
    assert fired.is_set()
    assert (done, skipped) == (2, 1)  # the cut one is reported as gone meanwhile
    assert raw_redis.zcard("retry") == 0
    assert sorted(json.loads(raw)["jid"] for raw in raw_redis.lrange("queue:low", 0, -1)) == sorted(jids)
