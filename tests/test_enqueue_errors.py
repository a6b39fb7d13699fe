"""An enqueue that fails on the connection says whether the job was written."""

from __future__ import annotations

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

import djwork
from djwork.testing.redis_server import free_port
from tests import jobs
from tests.faultproxy import FaultProxy


@pytest.fixture
def redis_at(settings):
    def point(url: str) -> None:
        settings.DJWORK = {**settings.DJWORK, "REDIS_URL": url, "REDIS_MAX_ATTEMPTS": 2, "REDIS_BACKOFF_BASE": 0.01}
    return point


def test_a_refused_dial_says_the_job_was_not_written(raw_redis, redis_at):
    redis_at(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens: the dial fails, nothing is sent
    with pytest.raises(djwork.EnqueueError) as raised:
        jobs.add.delay(1)
    assert raised.value.written is False
    assert "not written" in str(raised.value) and raised.value.jids[0] in str(raised.value)
    assert isinstance(raised.value, RedisConnectionError)  # still caught by code written for redis-py


def test_a_reply_lost_after_the_push_says_unknown_and_the_job_is_there_once(raw_redis, redis_url, redis_at):
    with FaultProxy.in_front_of(redis_url) as proxy:
        redis_at(proxy.url)
        fired = proxy.drop_next("LPUSH")  # forwarded and run; the reply never comes back
        with pytest.raises(djwork.EnqueueError) as raised:
            jobs.add.delay(1)
        assert fired.is_set()
    assert raised.value.written is None
    assert "may or may not have been written" in str(raised.value)
    assert raw_redis.llen("queue:default") == 1  # written once: the push was not replayed


def test_a_bulk_push_names_its_jobs(raw_redis, redis_at):
    redis_at(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(djwork.EnqueueError) as raised:
        jobs.add.delay_many([(1,), (2,), (3,)])
    assert raised.value.written is False and len(raised.value.jids) == 3
    assert "3 jobs" in str(raised.value)


def test_enqueue_while_redis_is_down_raises_redis_unavailable_naming_the_url_without_its_password(
        raw_redis, redis_at):
    port = free_port()  # closed: nothing listens
    redis_at(f"redis://:s3cret-pw@127.0.0.1:{port}/3")
    with pytest.raises(djwork.RedisUnavailable) as raised:
        jobs.add.delay(1)
    message = str(raised.value)
    assert f"Redis at redis://127.0.0.1:{port}/3 is unreachable" in message
    assert "s3cret-pw" not in message
    assert raised.value.jids[0] in message
    assert djwork.RedisUnavailable is djwork.api.RedisUnavailable  # one class, whichever door a caller uses
