"""limiter.bucket / window / leaky / points on the private Redis.

Admission times are the Redis TIME each decision was made at (what
``Holding.acquired_at`` reports), so the limits are checked on the clock that
enforces them, never on how long the test took.
"""

from __future__ import annotations

import math
import threading

import pytest

from djwork.api import Limiter as LimiterStatus
from djwork.limiter import OverLimit, bucket, leaky, points, window
from djwork.redis import keys
from tests.helpers_worker import wait_until

EPSILON = 2e-6  # admission times travel as strings with 6 decimals


def redis_now(raw_redis) -> float:
    seconds, micros = raw_redis.time()
    return seconds + micros / 1e6


def test_window_10_per_second_admits_at_most_10_in_any_sliding_second_under_threads(raw_redis):
    mail = window("mail", 10, 1, wait_timeout=30)
    times: list[float] = []
    lock = threading.Lock()

    def body() -> None:
        for _ in range(8):
            with mail.within_limit() as holding, lock:
                times.append(holding.acquired_at)

    threads = [threading.Thread(target=body) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(times) == 40
    times.sort()
    # Any 11 consecutive admissions span at least the window: no sliding second holds 11.
    assert all(times[index + 10] - times[index] >= 1 - EPSILON for index in range(len(times) - 10))
    summary = LimiterStatus("mail").summary()
    assert summary.stats.immediate + summary.stats.waited == 40 and summary.stats.over == 0


def test_window_refuses_every_attempt_until_the_oldest_admission_leaves(raw_redis):
    # Callers that keep trying (wait_timeout=0) must not get in a moment early either.
    edge = window("edge", 2, 0.5, wait_timeout=0)
    admitted = [edge.acquire().acquired_at for _ in range(2)]
    refusals = 0
    for _ in range(100_000):
        try:
            third = edge.acquire().acquired_at
            break
        except OverLimit:
            refusals += 1
    assert refusals > 0
    assert third >= admitted[0] + 0.5 - EPSILON


def test_window_retry_after_is_when_the_oldest_admission_leaves(raw_redis):
    mail = window("mail", 3, 10, wait_timeout=0)
    admitted = [mail.acquire().acquired_at for _ in range(3)]
    with pytest.raises(OverLimit) as refused:
        mail.acquire()
    after = redis_now(raw_redis)
    # retry_after = oldest + interval - (the refusal's own Redis time), which lies between the last
    # admission and now: no stampede before the slot frees, no idle gap after.
    refused_at = admitted[0] + 10 - refused.value.retry_after
    assert admitted[2] - EPSILON <= refused_at <= after + EPSILON
    assert refused.value.name == "mail" and refused.value.kind == "window"


def test_bucket_counts_per_calendar_period_and_resets_on_the_boundary(raw_redis):
    api = bucket("api", 5, "second", wait_timeout=0)
    admitted: list[float] = []
    refusal = None
    for _ in range(1000):
        try:
            admitted.append(api.acquire().acquired_at)
        except OverLimit as error:
            refusal = error
            break
    assert refusal is not None, "a bucket of 5 a second never refused"
    per_second: dict[int, int] = {}
    for at in admitted:
        per_second[math.floor(at)] = per_second.get(math.floor(at), 0) + 1
    assert max(per_second.values()) == 5
    boundary = math.floor(admitted[-1]) + 1
    # The refusal came in the last admission's second and points at the next one.
    assert admitted[-1] - EPSILON <= boundary - refusal.retry_after <= redis_now(raw_redis) + EPSILON
    next_admission = api.acquire(wait_timeout=5).acquired_at
    assert next_admission >= boundary


def test_bucket_per_minute_state_is_one_hash_with_the_period(raw_redis):
    api = bucket("api-min", 100, "minute")
    at = api.acquire().acquired_at
    state = raw_redis.hgetall(keys.limiter_state("api-min"))
    assert float(state[b"period"]) == math.floor(at / 60) * 60 and state[b"used"] == b"1"


def test_leaky_allows_a_burst_then_drips_one_at_a_time(raw_redis):
    shop = leaky("shop", 4, 1, wait_timeout=5)  # a burst of 4, then one every 0.25 s
    burst = [shop.acquire(wait_timeout=0).acquired_at for _ in range(4)]
    with pytest.raises(OverLimit) as refused:
        shop.acquire(wait_timeout=0)
    assert 0 < refused.value.retry_after <= 0.25 + EPSILON
    drips = [shop.acquire().acquired_at for _ in range(3)]
    admitted = burst + drips
    # The leaky-bucket bound: admissions in any span [t_i, t_j] are at most size + span * rate.
    assert all(j - i + 1 <= 4 + (admitted[j] - admitted[i]) * 4 + 1e-4
               for i in range(len(admitted)) for j in range(i, len(admitted)))
    # The burst had the whole bucket; each drip came only once one unit had drained.
    assert drips[0] - burst[0] >= 0.25 - EPSILON
    level = float(raw_redis.hget(keys.limiter_state("shop"), "level"))
    assert level <= 4 + EPSILON


def test_points_refund_the_unused_estimate(raw_redis):
    github = points("github", 100, "hour", wait_timeout=0)
    with github.within_limit(estimate=60) as handle:
        handle.points_used(10)
    # Without the refund 60 + 80 would be over 100.
    with github.within_limit(estimate=80):
        pass
    with pytest.raises(OverLimit) as refused:
        github.acquire(estimate=20)
    # 90 used, 20 wanted, refilling at 100 an hour: 10 points to wait for, 360 s (less what drained).
    assert 350 < refused.value.retry_after <= 360
    summary = LimiterStatus("github").summary()
    assert 89 < summary.used <= 90 and summary.stats.immediate == 2 and summary.stats.over == 1


def test_points_used_above_the_estimate_charges_the_excess(raw_redis):
    github = points("github", 100, "hour", wait_timeout=0)
    with github.within_limit(estimate=10) as handle:
        handle.points_used(95)
    with pytest.raises(OverLimit):
        github.acquire(estimate=10)
    with pytest.raises(ValueError, match="can never be admitted"):
        github.acquire(estimate=101)
    with pytest.raises(ValueError, match="points used"):
        handle.points_used(-1)


def test_a_rate_waiter_is_listed_while_it_waits_and_counted_as_waited(raw_redis):
    mail = window("mail", 1, 1, wait_timeout=10)
    mail.acquire()
    done: list[float] = []
    waiter = threading.Thread(target=lambda: done.append(mail.acquire(jid="jid-7").acquired_at))
    waiter.start()
    detail = wait_until(lambda: (lambda d: d if d and d.waiters else None)(LimiterStatus("mail").detail()), 10,
                        "the waiter listed")
    assert [waiter_entry.jid for waiter_entry in detail.waiters] == ["jid-7"]
    waiter.join(30)
    assert len(done) == 1
    summary = LimiterStatus("mail").summary()
    assert summary.waiting == 0 and summary.stats.waited == 1 and summary.stats.wait_time > 0
    assert raw_redis.zcard(keys.limiter_waiters("mail")) == 0


def test_a_wait_longer_than_the_budget_is_refused_and_leaves_no_waiter(raw_redis):
    slow = window("slow", 1, 60, wait_timeout=1)
    slow.acquire()
    with pytest.raises(OverLimit) as refused:
        slow.acquire()
    assert refused.value.retry_after > 1
    assert raw_redis.zcard(keys.limiter_waiters("slow")) == 0
