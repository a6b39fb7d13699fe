"""QueueSampler: the leader's per-queue samples, every 30 s (docs/metrics.md, Queue samples).

Only the leader samples, so a cluster of fifty processes writes one sample
per 30 s, not fifty. Each sample adds to the current minute's and
ten-minute's ``djwork:qm|`` hashes: a count of samples and the sum of each
value, so a reader divides one by the other for a bucket's mean, and a
bucket written by two leaders in one minute (a lease handed over) still
averages correctly. The reads are replayed freely; the HINCRBY write never
is (a replay after a lost reply would count the sample twice).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from typing import Any

import orjson

from djwork import redis as redis_layer
from djwork.redis import key_layout, keys, lanes
from djwork.settings.conf import Config
from djwork.worker.component import PeriodicComponent
from djwork.worker.leader import Leader

logger = logging.getLogger("djwork.worker")

SAMPLE_EVERY = 30.0  # seconds between samples while leading
MS_THRESHOLD = 1e11  # an enqueued_at above this is Sidekiq 8's integer milliseconds, not seconds
GLOBALS = ("retry", "dead", "scheduled", "processes", "busy", "concurrency")


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def oldest_age_ms(raw: Any, now: float) -> int:
    """Milliseconds since the oldest job's ``enqueued_at`` (Sidekiq's Queue#latency); 0 when unreadable."""
    if raw is None or isinstance(raw, Exception):
        return 0
    try:
        enqueued = orjson.loads(raw).get("enqueued_at")
    except (orjson.JSONDecodeError, AttributeError):
        return 0
    if isinstance(enqueued, bool) or not isinstance(enqueued, (int, float)):
        return 0
    seconds = enqueued / 1000.0 if enqueued > MS_THRESHOLD else float(enqueued)
    return max(0, int((now - seconds) * 1000))


def read_sample(conn: Any) -> dict[str, int]:
    """One sample of the cluster: ``<global>`` values and ``q|<queue>|size`` / ``q|<queue>|lat`` (ms)."""
    pipe = conn.pipeline(transaction=False)
    pipe.smembers(keys.QUEUES)
    pipe.zcard(keys.RETRY)
    pipe.zcard(keys.DEAD)
    pipe.zcard(keys.SCHEDULE)
    pipe.smembers(keys.PROCESSES)
    names, retry, dead, scheduled, processes = pipe.execute(raise_on_error=False)
    queue_names = sorted(_text(name) for name in names) if isinstance(names, set) else []
    identities = sorted(_text(name) for name in processes) if isinstance(processes, set) else []
    layout = key_layout.layout_of(conn)  # a cluster's lanes carry their queue's hash tag
    pipe = conn.pipeline(transaction=False)
    for name in queue_names:
        pipe.llen(keys.queue(name))
        pipe.lindex(keys.queue(name), -1)
        pipe.smembers(layout.lanes(name))
    for identity in identities:
        pipe.hmget(keys.process(identity), "busy", "concurrency", "info")
    replies = pipe.execute(raise_on_error=False)
    now = time.time()
    sample = {"retry": _int(retry), "dead": _int(dead), "scheduled": _int(scheduled), "processes": 0,
              "busy": 0, "concurrency": 0}
    # A queue's priority lanes count in its size and latency (docs/priority.md): read in one more round
    # trip, only when some queue has lanes registered.
    lane_keys = {name: [lanes.list_key(name, lane, layout) for lane in lanes.registered(replies[3 * index + 2])]
                 for index, name in enumerate(queue_names)}
    lane_replies = iter(_read_lanes(conn, lane_keys) if any(lane_keys.values()) else ())
    for index, name in enumerate(queue_names):
        size, oldest = _int(replies[3 * index]), oldest_age_ms(replies[3 * index + 1], now)
        for _key in lane_keys.get(name, ()):
            size += _int(next(lane_replies))
            oldest = max(oldest, oldest_age_ms(next(lane_replies), now))
        sample[f"q|{name}|size"] = size
        sample[f"q|{name}|lat"] = oldest
    for reply in replies[3 * len(queue_names):]:
        if not isinstance(reply, list) or reply[2] is None:
            continue  # an identity whose hash expired: a dead process nobody pruned yet
        sample["processes"] += 1
        sample["busy"] += _int(reply[0])
        sample["concurrency"] += _int(reply[1])
    return sample


def _read_lanes(conn: Any, lane_keys: dict[str, list[str]]) -> list[Any]:
    """LLEN and the oldest job of each lane LIST, in ``lane_keys`` order."""
    pipe = conn.pipeline(transaction=False)
    for keys_of_queue in lane_keys.values():
        for key in keys_of_queue:
            pipe.llen(key)
            pipe.lindex(key, -1)
    return pipe.execute(raise_on_error=False)


def write_sample(conn: Any, sample: dict[str, int], now: dt.datetime) -> None:
    pipe = conn.pipeline(transaction=False)
    for key, ttl in ((keys.queue_metrics_minute(now), keys.METRICS_MINUTE_TTL),
                     (keys.queue_metrics_ten_minutes(now), keys.METRICS_TEN_MINUTE_TTL)):
        pipe.hincrby(key, "n", 1)
        for field, value in sample.items():
            if field.endswith("|size"):
                pipe.hincrby(key, field[:-len("size")] + "n", 1)
            if value:
                pipe.hincrby(key, field, value)
        pipe.expire(key, ttl)
    pipe.execute()


def sample_once(now: dt.datetime | None = None) -> dict[str, int]:
    """Read and write one sample (the sampler's tick; tests call it directly instead of waiting 30 s)."""
    sample = redis_layer.run(read_sample, idempotent=True)
    moment = now or dt.datetime.now(dt.UTC)
    redis_layer.run(lambda conn: write_sample(conn, sample, moment))
    return sample


class QueueSampler(PeriodicComponent):
    name = "queue-sampler"

    def __init__(self, config: Config, leader: Leader) -> None:
        super().__init__()
        self.config = config
        self.leader = leader

    def start(self) -> None:
        if not self.config.metrics or not self.leader.enabled:
            return  # it could never lead, or metrics are off: nothing to sample
        super().start()

    def interval(self) -> float:
        return SAMPLE_EVERY

    def first_delay(self) -> float:
        return SAMPLE_EVERY

    def tick(self) -> None:
        if self.leader.is_leader():
            sample_once()
