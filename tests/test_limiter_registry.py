"""Limiter names and options, registration on first use, the registry sweep, unlimited(), parse_rate, OverLimit."""

from __future__ import annotations

import math
import pickle

import pytest

from djwork import redis as redis_layer
from djwork.limiter import (
    OverLimit,
    RateSpec,
    bucket,
    concurrent,
    leaky,
    parse_rate,
    points,
    record_rescheduled,
    unlimited,
    window,
)
from djwork.redis import keys


def redis_now(raw_redis) -> float:
    seconds, micros = raw_redis.time()
    return seconds + micros / 1e6


@pytest.mark.parametrize("name", ["", "has space", "a/b", "tab\there", "ü", "a*", "x" * 201, None, 42])
def test_a_bad_name_is_refused_with_the_name_in_the_message(name):
    with pytest.raises(ValueError, match="limiter name"):
        window(name, 1, 1)
    if isinstance(name, str) and name and len(name) <= 40:
        with pytest.raises(ValueError) as refused:
            concurrent(name, 1)
        assert repr(name) in str(refused.value)


@pytest.mark.parametrize(("build", "message"), [
    (lambda: concurrent("ok", 0), "size"),
    (lambda: bucket("ok", 5, "week"), "not one of second, minute, hour, day"),
    (lambda: window("ok", 5, -1), "interval"),
    (lambda: leaky("ok", 5, "minute", wait_timeout=-1), "wait_timeout"),
    (lambda: window("ok", 5, "hour", ttl=60), "shorter than its interval"),
    (lambda: concurrent("ok", 5, lock_timeout=60, ttl=30), "lock_timeout"),
    (lambda: points("ok", 2.5, "hour"), "size"),
    (lambda: bucket("ok", 5, "second", reschedule=-1), "reschedule"),
])
def test_bad_options_are_refused_at_construction(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_constructing_costs_no_round_trip_and_first_use_registers(raw_redis):
    before = redis_layer.round_trips()
    limiters = [concurrent("c", 1), bucket("b", 1, "day"), window("w", 1, 60), leaky("l", 1, "hour"),
                points("p", 10, "hour"), concurrent("stripe:acct_42.eu-1", 2)]
    assert redis_layer.round_trips() == before
    assert raw_redis.dbsize() == 0
    for limiter in limiters:
        limiter.acquire().release()
    now = redis_now(raw_redis)
    registry = {name.decode(): score for name, score in raw_redis.zrange(keys.LIMITERS, 0, -1, withscores=True)}
    assert sorted(registry) == sorted(limiter.name for limiter in limiters)
    assert all(now + 89 * 86400 < expires <= now + 90 * 86400 for expires in registry.values())
    meta = raw_redis.hgetall(keys.limiter("w"))
    assert (meta[b"kind"], meta[b"size"], float(meta[b"interval"])) == (b"window", b"1", 60.0)
    assert 89 * 86400 * 1000 < raw_redis.pttl(keys.limiter("w")) <= 90 * 86400 * 1000


def test_a_changed_definition_updates_the_metadata_on_next_use(raw_redis):
    window("w", 1, 60).acquire()
    window("w", 5, 60).acquire()
    assert raw_redis.hget(keys.limiter("w"), "size") == b"5"


def test_ten_thousand_short_lived_tenant_names_leave_only_the_live_ones(raw_redis):
    tenants = [f"tenant-{tenant}" for tenant in range(10_000)]
    for tenant in tenants:
        window(tenant, 5, 1, ttl=3600).acquire()
    # Their ttl runs out, all at once: registered with a short ttl, a loaded machine took longer than it
    # to register them, and the registrations swept the first ones (186 were left once, not 10,000).
    expiry = redis_now(raw_redis) - 1
    with raw_redis.pipeline(transaction=False) as pipe:
        pipe.zadd(keys.LIMITERS, dict.fromkeys(tenants, expiry), xx=True)
        for key in raw_redis.scan_iter(match="djwork:limiter*tenant-*", count=5000):
            pipe.pexpire(key, 1)
        pipe.execute()
    live = [window(f"live-{index}", 1000, 1) for index in range(3)]
    # Registering the live ones swept a batch already; what is left goes 100 names per use (a bounded batch).
    expired = raw_redis.zcard(keys.LIMITERS) - len(live)
    assert expired > 200  # more than a batch, or this would not show the sweep is bounded
    uses = 0
    while raw_redis.zcard(keys.LIMITERS) > len(live) and uses < 200:
        live[uses % len(live)].acquire()
        uses += 1
    assert sorted(name.decode() for name in raw_redis.zrange(keys.LIMITERS, 0, -1)) == ["live-0", "live-1", "live-2"]
    assert uses <= math.ceil(expired / 100) + len(live)
    # Their keys expired with them: what is left belongs to the live limiters.
    left = [key for key in raw_redis.scan_iter(match="djwork:limiter*", count=5000)
            if raw_redis.exists(key)]
    assert left and all(key.decode().endswith(("live-0", "live-1", "live-2")) or key.decode() == keys.LIMITERS
                        for key in left)


def test_record_rescheduled_counts_with_the_limiters_ttl(raw_redis):
    mail = window("mail", 1, 60, ttl=3600)
    record_rescheduled(mail)
    record_rescheduled("mail", 2)
    assert raw_redis.hget(keys.limiter_stats("mail"), "rescheduled") == b"3"
    assert 3_500_000 < raw_redis.pttl(keys.limiter_stats("mail")) <= 3_600_000
    record_rescheduled("never-used")
    assert raw_redis.pttl(keys.limiter_stats("never-used")) > 0  # a new key never lives forever


def test_unlimited_has_the_interface_and_never_touches_redis(raw_redis):
    before = redis_layer.round_trips()
    free = unlimited()
    for _ in range(100):
        with free.within_limit():
            pass
    with free.within_limit(estimate=50, jid="j") as handle:
        handle.points_used(10)
    free.acquire(wait_timeout=0).release()
    assert redis_layer.round_trips() == before
    assert raw_redis.dbsize() == 0


@pytest.mark.parametrize(("rate", "spec"), [
    ("100/m", RateSpec(100, 60.0)), ("20/s", RateSpec(20, 1.0)), (" 5 / h ", RateSpec(5, 3600.0)),
    ("7", RateSpec(7, 1.0)), (3, RateSpec(3, 1.0)), ("0.5/s", RateSpec(1, 2.0)), ("2.5/m", RateSpec(2, 60.0)),
])
def test_parse_rate_reads_celerys_syntax(rate, spec):
    assert parse_rate(rate) == spec


@pytest.mark.parametrize("rate", ["", "0/m", "-1/s", "10/d", "ten/m", "10/m/s", True, None, 0])
def test_parse_rate_refuses_anything_else(rate):
    with pytest.raises(ValueError, match="rate limit"):
        parse_rate(rate)


def test_a_parsed_rate_builds_a_cluster_wide_window(raw_redis):
    limit = parse_rate("2/m").limiter("rate:tasks.send", wait_timeout=0)
    limit.acquire()
    limit.acquire()
    with pytest.raises(OverLimit) as refused:
        limit.acquire()
    assert refused.value.name == "rate:tasks.send" and 59 < refused.value.retry_after <= 60


def test_over_limit_carries_name_and_retry_after_and_pickles():
    error = OverLimit("stripe", 1.5, "concurrent")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.name, copy.limiter, copy.retry_after, copy.kind) == ("stripe", "stripe", 1.5, "concurrent")
    assert "stripe" in str(copy)
