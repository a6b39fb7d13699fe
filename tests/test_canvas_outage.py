"""A chain step that ends while Redis is away (kill -9, AOF on, restarted on its port): the next step gets its value.

The step's return value rides on its ack (lua/batch_lib.lua), so the ack that lands once Redis is
back keeps it in the same step as it counts the job; it used to be a write of its own, lost in the
outage, and the next step ran with ``None``.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from djwork.testing.redis_server import RedisServer
from tests import canvas_jobs as cj
from tests.helpers_worker import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def killable_redis(tmp_path):
    """The workers' Redis, with an fsynced AOF: killed and started again in its directory, it keeps its data."""
    server = RedisServer(directory=str(tmp_path / "redis"), append_only=True).start()
    try:
        yield server
    finally:
        server.stop()


def test_a_chain_step_ending_while_redis_is_killed_hands_its_value_to_the_next_step(
        workers, raw_redis, killable_redis):
    # The jobs note their calls in the suite's Redis (raw_redis), which stays up; djwork uses the killable one.
    worker = workers.start("-c", "2", overrides={"REDIS_URL": killable_redis.url, "LOG_JOBS": True})
    with override_settings(DJWORK={**settings.DJWORK, "REDIS_URL": killable_redis.url}):
        chain = (cj.add.s(1, 1, 3.0) | cj.add.s(10)).delay()
        worker.wait_log("class=tests.canvas_jobs.add", 30)  # step 1 started: it holds 3 s
        killable_redis.kill()
        # Step 1 ends, and is done with, while Redis is away: its ack waits in the worker.
        wait_until(lambda: b"add 1 1" in raw_redis.lrange(cj.CALLS, 0, -1), 20, "step 1 to end")
        worker.wait_log("done jid=", 20)
        killable_redis.start()
        assert chain.get(timeout=30) == 12
    assert [raw.decode() for raw in raw_redis.lrange(cj.CALLS, 0, -1)] == ["add 1 1", "add 2 10"]
