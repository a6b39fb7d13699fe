"""Bad enqueue options are refused at the call, naming the option and the job; nothing reaches Redis."""

from __future__ import annotations

import datetime as dt
import json
import math
import time

import pytest

import djwork
from djwork.options import OptionError
from tests import jobs

NAME = "tests.jobs.add"

BAD_QUEUES = ["has spaces", "a\n<script>", 5, ""]
BAD_DELAYS = [math.nan, -math.inf, math.inf, 1e20, "10", True]
BAD_MOMENTS = [math.nan, -math.inf, math.inf, 1e20, "tomorrow", True]
BAD_JIDS = [5, "a b<script>", "", "x" * 129]


def _refused(call, option: str) -> OptionError:
    with pytest.raises(OptionError) as caught:
        call()
    message = str(caught.value)
    assert NAME in message and option in message, message
    assert isinstance(caught.value, ValueError)
    return caught.value


@pytest.mark.parametrize("queue", BAD_QUEUES)
def test_a_bad_queue_is_refused_everywhere_it_can_be_given(raw_redis, queue):
    _refused(lambda: jobs.add.apply_async((1,), queue=queue), "queue")
    _refused(lambda: jobs.add.set(queue=queue).delay(1), "queue")
    _refused(lambda: jobs.add.set(queue=queue).delay_many([(1,), (2,)]), "queue")
    assert raw_redis.dbsize() == 0


@pytest.mark.parametrize("queue", BAD_QUEUES[:4])
def test_a_bad_queue_is_refused_when_the_job_is_declared(queue):
    with pytest.raises(OptionError, match="queue"):
        djwork.job(queue=queue)(lambda: None)
    with pytest.raises(OptionError, match="retry_queue"):
        djwork.job(retry_queue=queue)(lambda: None)


@pytest.mark.parametrize("value", BAD_DELAYS)
def test_a_bad_delay_is_refused(raw_redis, value):
    _refused(lambda: jobs.add.apply_async((1,), countdown=value), "countdown")
    _refused(lambda: jobs.add.perform_in(value, 1), "perform_in")
    _refused(lambda: jobs.add.apply_async((1,), expires=value), "expires")
    assert raw_redis.dbsize() == 0


@pytest.mark.parametrize("value", BAD_MOMENTS)
def test_a_bad_moment_is_refused(raw_redis, value):
    _refused(lambda: jobs.add.apply_async((1,), eta=value), "eta")
    _refused(lambda: jobs.add.perform_at(value, 1), "perform_at")
    assert raw_redis.dbsize() == 0


@pytest.mark.parametrize("jid", BAD_JIDS)
def test_a_bad_jid_is_refused(raw_redis, jid):
    _refused(lambda: jobs.add.apply_async((1,), jid=jid), "jid")
    assert raw_redis.dbsize() == 0


def test_good_options_still_enqueue(raw_redis):
    jobs.add.apply_async((1,), queue="low.priority:eu-1", jid="3f2a-b_c.d:e")
    jobs.add.apply_async((1,), countdown=-5)  # in the past: due now, as Celery and Sidekiq treat it
    jobs.add.apply_async((1,), countdown=dt.timedelta(minutes=1), expires=3600)
    jobs.add.perform_at(dt.datetime.now(dt.UTC) + dt.timedelta(days=365 * 99), 1)
    jobs.add.perform_in(time.time() + 60, 1)  # >= 1e9: an absolute epoch, as Sidekiq reads it
    queued = json.loads(raw_redis.lrange("queue:low.priority:eu-1", 0, -1)[0])
    assert queued["jid"] == "3f2a-b_c.d:e"
    assert raw_redis.zcard("schedule") == 3
    assert raw_redis.llen("queue:default") == 1  # the one due already
    [expiring] = [json.loads(member) for member in raw_redis.zrange("schedule", 0, -1) if b"expires_at" in member]
    assert math.isfinite(expiring["expires_at"])
