"""Jobs run by the cluster tests (tests/test_cluster_worker.py) and bench/cluster.py.

Each run counts itself through djwork's own Redis layer, so the count lands in whatever Redis the worker
runs on (one server or a cluster): a test tells exactly-once from lost from duplicated by the counts.
"""

from __future__ import annotations

import json
import time

import djwork
from djwork import limiter
from djwork import redis as redis_layer
from djwork.worker.limits import current_holdings

COUNTS = "c:counts"  # HASH key -> completed runs
STARTS = "c:starts"  # HASH key -> started runs
FAILURES = "c:failures"  # HASH key -> failed runs


@djwork.job
def noop() -> None:
    """The bench's job: nothing, so the drain measures djwork and Redis alone."""


@djwork.job
def record(key: str) -> None:
    redis_layer.run(lambda conn: conn.hincrby(COUNTS, key, 1))


@djwork.job
def slow(key: str, seconds: float) -> None:
    redis_layer.run(lambda conn: conn.hincrby(STARTS, key, 1))
    time.sleep(seconds)
    redis_layer.run(lambda conn: conn.hincrby(COUNTS, key, 1))


@djwork.job(bind=True, max_retries=3, default_retry_delay=1)
def fail_once(self, key: str) -> None:
    """Fails its first run (counted), retried a second later through `retry`, succeeds then."""
    failures = redis_layer.run(lambda conn: conn.hincrby(FAILURES, key, 1))
    if failures == 1:
        raise self.retry(countdown=1)
    redis_layer.run(lambda conn: conn.hincrby(COUNTS, key, 1))


@djwork.job(ignore_result=False)
def add(x: int, y: int) -> int:
    """A stored result (tests/test_cluster_results.py)."""
    return x + y


@djwork.job(ignore_result=False, retry=0)
def refuse(message: str) -> None:
    """A failure filed in `dead` with its result record (tests/test_cluster_results.py)."""
    raise ValueError(message)


@djwork.job(unique_for=300)
def unique_record(key: str) -> None:
    """A unique job: counted, then its lock released with its ack (tests/test_cluster_unique.py)."""
    redis_layer.run(lambda conn: conn.hincrby(COUNTS, key, 1))


@djwork.job(unique_for=300, retry=0)
def unique_refuse(key: str) -> None:
    """A unique job that dies at once: filed in `dead`, its lock released after (tests/test_cluster_unique.py)."""
    raise ValueError(key)


@djwork.job(unique_for=300, unique_until="start")
def unique_at_start(key: str, seconds: float) -> None:
    """A unique job that gives its lock up as it starts, then runs ``seconds`` (tests/test_cluster_unique.py)."""
    redis_layer.run(lambda conn: conn.hincrby(STARTS, key, 1))
    time.sleep(seconds)
    redis_layer.run(lambda conn: conn.hincrby(COUNTS, key, 1))


# Limited jobs (tests/test_cluster_limiters.py). RUNNING and HIGHEST share a hash tag, so the step that raises
# one and keeps the other is one script in one slot: two jobs starting together can't both miss the max.
RUNNING = "c:{limits}:running"  # STRING: limited jobs inside their body now
HIGHEST = "c:{limits}:highest"  # STRING: the most ever inside at once
ADMITTED = "c:admitted"  # LIST: each rate-limited admission's Redis time (Holding.acquired_at)
ENTER = """
local now = redis.call('INCR', KEYS[1])
if now > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], now) end
return now
"""
# wait_timeout=0: a job that finds both slots taken is refused at once and sent back to `schedule`
# (the reschedule's two steps on a cluster) rather than waiting in its thread.
two_at_once = limiter.concurrent("cluster-two", 2, wait_timeout=0, lock_timeout=300)
five_a_second = limiter.window("cluster-five", 5, 1)


@djwork.job(limits=[two_at_once])
def two_at_a_time(key: str, seconds: float) -> None:
    redis_layer.run(lambda conn: conn.eval(ENTER, 2, RUNNING, HIGHEST))
    try:
        time.sleep(seconds)
    finally:
        redis_layer.run(lambda conn: conn.decr(RUNNING))
    redis_layer.run(lambda conn: conn.hincrby(COUNTS, key, 1))


@djwork.job(limits=[five_a_second])
def five_a_second_job(key: str) -> None:
    for holding in current_holdings():
        redis_layer.run(lambda conn, at=holding.acquired_at: conn.rpush(ADMITTED, repr(at)))
    redis_layer.run(lambda conn: conn.hincrby(COUNTS, key, 1))


# Batches (tests/test_cluster_batches.py): each callback run counted per batch and event, in run order too.
BATCH_CALLBACKS = "c:batch-callbacks"  # HASH "<bid>:<event>" -> runs
BATCH_EVENTS = "c:batch-events"  # LIST "<bid>:<event>", in the order the callbacks ran
CHILDREN = "c:children"  # HASH key -> the bid of the child batch the job opened
BATCH_STATUSES = "c:batch-statuses"  # HASH "<bid>:<event>" -> the status the callback was given (JSON)


@djwork.job
def on_batch_event(status: dict, **_callback_args: object) -> None:
    name = f"{status['bid']}:{status['event']}"
    # The count last: tests wait for it, then read the status and the order (a run beside two CPU burners
    # read the status before this job had written it).
    redis_layer.run(lambda conn: conn.hset(BATCH_STATUSES, name, json.dumps(status)))
    redis_layer.run(lambda conn: conn.rpush(BATCH_EVENTS, name))
    redis_layer.run(lambda conn: conn.hincrby(BATCH_CALLBACKS, name, 1))


@djwork.job(retry=0)
def dies(key: str) -> None:
    """A batch member that dies at once (filed in `dead`): its batch counts a death."""
    redis_layer.run(lambda conn: conn.hincrby(FAILURES, key, 1))
    raise RuntimeError(f"batch member {key} always fails")


@djwork.job
def opens_child(key: str, members: int) -> None:
    """A member of a batch that opens a child batch of ``members`` jobs: the parent waits for the child."""
    child = djwork.Batch(description=f"child of {key}", on_success=on_batch_event, callback_queue="q2")
    with child.jobs():
        for index in range(members):
            record.set(queue="q3").delay(f"{key}-child-{index}")
    redis_layer.run(lambda conn: conn.hset(CHILDREN, key, child.bid))
    redis_layer.run(lambda conn: conn.hincrby(COUNTS, key, 1))


@djwork.job(ignore_result=False)
def total(values: list) -> int:
    """A chord's body (tests/test_cluster_canvas.py): the header's results, summed."""
    return sum(values)


FAILED_IDS = "c:failed-ids"  # LIST: the failed task ids an errback was called with


@djwork.job
def errback(failed_id: str) -> None:
    """An old-style errback (tests/test_cluster_canvas.py): called with the id of the task that failed."""
    redis_layer.run(lambda conn: conn.rpush(FAILED_IDS, failed_id))


@djwork.job(ignore_result=False)
def counted_total(values: list) -> int:
    """A chord's body that counts its runs (tests/test_cluster_canvas.py: the chord completes once)."""
    redis_layer.run(lambda conn: conn.hincrby(COUNTS, "counted_total", 1))
    return sum(values)


@djwork.job(bind=True, retry=0, ignore_result=False)
def replaces(self, *values: int) -> None:
    """A canvas member that replaces itself by ``add(sum(values), 1)`` (tests/test_cluster_canvas.py)."""
    raise self.replace(add.s(sum(values), 1).set(queue="q2"))


@djwork.job(bind=True, retry=0, ignore_result=False)
def replaces_with(self, value: int, shape: str) -> None:
    """A chain step that replaces itself by a chain or a group fed ``value`` (tests/test_cluster_canvas.py)."""
    if shape == "chain":
        raise self.replace(djwork.chain(add.s(value, 10).set(queue="q2"), add.s(100).set(queue="q3")))
    raise self.replace(djwork.group(add.s(value, 1).set(queue="q2"), add.s(value, 2).set(queue="q4")))


@djwork.job(bind=True, retry=0, ignore_result=False)
def adds_to_chord(self, value: int) -> int:
    """A chord header member that adds ``add(value, 1000)`` to its chord (tests/test_cluster_canvas.py)."""
    self.add_to_chord(add.s(value, 1000).set(queue="q5"))
    return value


ORDER = "c:order"  # LIST: the keys of in_order's runs, in the order they ran (tests/test_cluster_priority.py)


@djwork.job
def in_order(key: str) -> None:
    redis_layer.run(lambda conn: conn.rpush(ORDER, key))


@djwork.job
def slow_first_run(key: str) -> None:
    """Its first run (counted in STARTS) waits a minute, long enough to be killed in; a later run finishes."""
    if redis_layer.run(lambda conn: conn.hincrby(STARTS, key, 1)) == 1:
        time.sleep(60)
    redis_layer.run(lambda conn: conn.hincrby(COUNTS, key, 1))
