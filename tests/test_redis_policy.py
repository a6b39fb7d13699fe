"""The replay (apply-safety) policy of djwork.redis, against real redis-servers through a fault proxy.

Every path the policy distinguishes is provoked for real: dials refused or
reset (connect phase), a command that ran but whose reply was lost, a read
that times out, READONLY / NOREPLICAS replies, and an exhausted pool. The
proxy counts the commands it relayed, so "sent exactly once" is asserted on
the wire, not inferred.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis as redis_py
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ReadOnlyError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from djwork import redis as redis_layer
from djwork.redis import ConnectPhaseError, PoolExhaustedError, RedisEvent, RedisLayer
from djwork.settings.conf import build_config
from djwork.testing.redis_server import RedisServer
from tests.faultproxy import FaultProxy

KEY = "policy:list"

# Small timeouts and backoff keep the whole file fast; tests that check the
# defaults build their own config without these.
FAST = {
    "REDIS_BACKOFF_BASE": 0.01,
    "REDIS_BACKOFF_CAP": 0.05,
    "REDIS_MAX_ATTEMPTS": 4,
    "CONNECT_TIMEOUT": 0.5,
    "SOCKET_TIMEOUT": 1.0,
    "POOL_TIMEOUT": 0.2,
}


# --- fixtures -----------------------------------------------------------------
@pytest.fixture
def proxy(redis_url: str) -> Iterator[FaultProxy]:
    with FaultProxy.in_front_of(redis_url) as running:
        yield running


@pytest.fixture
def make_layer() -> Iterator[Callable[..., RedisLayer]]:
    layers: list[RedisLayer] = []

    def build(url: str, **overrides: Any) -> RedisLayer:
        layer = RedisLayer(build_config({"REDIS_URL": url, **FAST, **overrides}))
        layers.append(layer)
        return layer

    yield build
    for layer in layers:
        layer.close()


@pytest.fixture(scope="module")
def replication() -> Iterator[tuple[RedisServer, RedisServer]]:
    """A private primary and a replica of it (not the suite's server: syncing it would take seconds)."""
    primary = RedisServer().start()
    replica = RedisServer().start()
    with redis_py.Redis(port=primary.port) as client:
        client.config_set("repl-diskless-sync-delay", 0)  # default 5 s before a full sync starts
    yield primary, replica
    replica.stop()
    primary.stop()


@pytest.fixture
def replica(replication: tuple[RedisServer, RedisServer]) -> Iterator[redis_py.Redis]:
    """The replica, attached and in sync (a syncing replica answers LOADING, not READONLY)."""
    primary, server = replication
    client = redis_py.Redis(port=server.port, decode_responses=True)
    client.replicaof("127.0.0.1", primary.port)
    deadline = time.monotonic() + 10
    while client.info("replication").get("master_link_status") != "up":
        assert time.monotonic() < deadline, "replica did not sync"
        time.sleep(0.02)
    yield client
    client.close()


def hook_sink(event: RedisEvent) -> None:
    """A module-level hook for the dotted-path REDIS_EVENT_HOOK test."""
    HOOKED.append(event)


HOOKED: list[RedisEvent] = []


def kinds(seen: list[RedisEvent]) -> list[tuple[str, str]]:
    return [(event.kind, event.reason) for event in seen]


def _records(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == "djwork.redis" and text in record.getMessage()]


# --- pool configuration -------------------------------------------------------
def test_pools_default_to_issue_timeouts_and_redis_py_retry_is_off(raw_redis, redis_url) -> None:
    layer = RedisLayer(build_config({"REDIS_URL": redis_url, "FETCH_TIMEOUT": 2.0}))
    try:
        for purpose in RedisLayer.PURPOSES:
            pool = layer.client(purpose).connection_pool
            kwargs = pool.connection_kwargs
            assert kwargs["socket_connect_timeout"] == 1.0
            # fetch blocks server-side up to FETCH_TIMEOUT; its socket must outlast that.
            assert kwargs["socket_timeout"] == (4.5 if purpose == "fetch" else 2.5)
            assert kwargs["retry"].get_retries() == 0
            assert pool.connection_class is redis_layer.CountingConnection
            connection = pool.get_connection()
            try:
                assert isinstance(connection, redis_layer.CountingConnection)
                assert connection.socket_connect_timeout == 1.0
                assert connection.retry.get_retries() == 0
            finally:
                pool.release(connection)
        assert layer.client() is layer.client("default")
        assert layer.client("fetch") is not layer.client("default")
    finally:
        layer.close()


def test_user_options_cannot_turn_redis_py_retry_back_on(raw_redis, redis_url) -> None:
    options = {"retry": Retry(ExponentialBackoff(), 5), "retry_on_timeout": True}
    layer = RedisLayer(build_config({"REDIS_URL": redis_url + "?retry_on_timeout=true", "REDIS_OPTIONS": options}))
    try:
        pool = layer.client().connection_pool
        connection = pool.get_connection()
        try:
            assert connection.retry.get_retries() == 0
        finally:
            pool.release(connection)
    finally:
        layer.close()


# --- round-trip accounting ------------------------------------------------------
def test_round_trips_are_counted_per_thread_and_per_connection(raw_redis, redis_url, make_layer) -> None:
    layer = make_layer(redis_url, POOL_SIZE=1)
    layer.run(lambda conn: conn.ping())  # dial (and handshake) before measuring
    before = redis_layer.round_trips()
    pool = layer.client().connection_pool
    connection = pool.get_connection()
    on_connection = connection.round_trips
    pool.release(connection)

    layer.run(lambda conn: (conn.set("k", "v"), conn.get("k")))
    with pytest.raises(ResponseError):  # an error reply is a reply: the command ran
        layer.run(lambda conn: conn.incr("k"))
    assert redis_layer.round_trips() == before + 3

    other: list[int] = []
    worker = threading.Thread(target=lambda: (layer.run(lambda conn: conn.ping()), other.append(
        redis_layer.round_trips())))
    worker.start()
    worker.join(5)
    assert other == [1]  # a fresh thread starts its own odometer...
    assert redis_layer.round_trips() == before + 3  # ...and does not move this one

    connection = pool.get_connection()
    try:
        assert connection.round_trips == on_connection + 4  # the one pooled connection saw all four
    finally:
        pool.release(connection)


def test_handshake_replies_are_not_round_trips(raw_redis, proxy, make_layer) -> None:
    layer = make_layer(proxy.url)
    before = redis_layer.round_trips()
    layer.run(lambda conn: conn.ping())
    assert proxy.count("CLIENT") >= 1  # the dial did a handshake (CLIENT SETNAME ...)
    assert redis_layer.round_trips() == before + 1


# --- connect phase --------------------------------------------------------------
def test_refused_dial_is_replayed_for_a_non_idempotent_block(raw_redis, proxy, make_layer, events, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="djwork.redis")
    layer = make_layer(proxy.url, REDIS_MAX_ATTEMPTS=50)
    proxy.refuse()
    opener = threading.Timer(0.25, proxy.allow)
    opener.start()
    try:
        for attempt in layer.attempts(idempotent=False):
            with attempt as conn:
                conn.lpush(KEY, "job")
    finally:
        opener.cancel()
    assert raw_redis.lrange(KEY, 0, -1) == [b"job"]
    assert proxy.count("LPUSH") == 1
    assert events, "no retry reached the listener"
    assert set(kinds(events)) == {("retry", "connect")}
    assert all(isinstance(event.error, ConnectPhaseError) and not event.idempotent for event in events)
    assert [event.attempt for event in events] == list(range(1, len(events) + 1))
    assert _records(caplog, "redis retry (connect)")
    assert all(record.levelno == logging.WARNING for record in _records(caplog, "redis retry"))


def test_refused_dial_forever_gives_up_within_the_backoff_cap(raw_redis, proxy, make_layer, events, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="djwork.redis")
    layer = make_layer(proxy.url, REDIS_MAX_ATTEMPTS=4, REDIS_BACKOFF_BASE=0.04, REDIS_BACKOFF_CAP=0.08)
    proxy.refuse()
    started = time.monotonic()
    with pytest.raises(ConnectPhaseError):
        layer.run(lambda conn: conn.lpush(KEY, "job"))
    elapsed = time.monotonic() - started
    assert kinds(events) == [("retry", "connect")] * 3 + [("gave_up", "connect")]
    assert events[-1].attempt == 4
    # Three sleeps, each jittered in [delay/2, delay], delays 0.04, 0.08 (capped), 0.08 (capped).
    assert 0.1 <= elapsed < 0.2 + 1.0
    assert proxy.count("LPUSH") == 0
    gave_up = _records(caplog, "redis gave_up (connect)")
    assert gave_up and gave_up[0].levelno == logging.ERROR
    proxy.allow()
    assert raw_redis.llen(KEY) == 0


def test_connection_reset_during_handshake_is_connect_phase(raw_redis, proxy, make_layer, events) -> None:
    layer = make_layer(proxy.url, REDIS_MAX_ATTEMPTS=50)
    proxy.reset_connects()  # TCP connect succeeds; the handshake's first reply never comes
    opener = threading.Timer(0.2, proxy.allow)
    opener.start()
    try:
        layer.run(lambda conn: conn.lpush(KEY, "job"))
    finally:
        opener.cancel()
    assert proxy.accepted >= 2
    assert events and set(kinds(events)) == {("retry", "connect")}
    assert raw_redis.lrange(KEY, 0, -1) == [b"job"]
    assert proxy.count("LPUSH") == 1


def test_dial_cut_after_part_of_the_handshake_is_still_connect_phase(raw_redis, proxy, make_layer, events) -> None:
    # CLIENT SETNAME gets its reply, then the dial dies on CLIENT SETINFO: the
    # block's own command never left, so the handshake's reply must not make it "dirty".
    layer = make_layer(proxy.url)
    fired = proxy.drop_next("CLIENT", skip=1)
    layer.run(lambda conn: conn.lpush(KEY, "job"))
    assert fired.is_set()
    assert kinds(events) == [("retry", "connect")]
    assert isinstance(events[0].error, ConnectPhaseError)
    assert raw_redis.lrange(KEY, 0, -1) == [b"job"]
    assert proxy.count("LPUSH") == 1


# --- a connection of one caller's own (the worker's fetch) ---------------------
def push_on(connection: Any) -> list[Any]:
    return redis_layer.exchange(connection, [("LPUSH", KEY, "job")])


def test_dedicated_connection_redials_a_socket_the_server_closed(raw_redis, proxy, make_layer, events) -> None:
    own = redis_layer.DedicatedConnection("fetch", make_layer(proxy.url))
    try:
        own.run(lambda connection: redis_layer.exchange(connection, [("PING",)]))
        proxy.cut_all()  # as a Redis restart or an idle timeout would: the socket reads EOF
        assert proxy.wait_idle()
        # Checked before the send, as the pool checks what it lends: redialled, not failed after the send.
        assert own.run(push_on) == [1]
    finally:
        own.close()
    assert events == []
    assert raw_redis.lrange(KEY, 0, -1) == [b"job"]
    assert proxy.count("LPUSH") == 1


def test_dedicated_connection_retries_a_refused_dial_once_then_gives_up(raw_redis, proxy, make_layer,
                                                                        events) -> None:
    own = redis_layer.DedicatedConnection("fetch", make_layer(proxy.url))
    proxy.refuse()
    with pytest.raises(ConnectPhaseError):
        own.run(push_on)
    assert kinds(events) == [("retry", "connect"), ("gave_up", "connect")]
    assert proxy.count("LPUSH") == 0
    proxy.allow()
    try:
        assert own.run(push_on) == [1]
    finally:
        own.close()
    assert raw_redis.lrange(KEY, 0, -1) == [b"job"]


def test_dedicated_connection_never_replays_a_command_whose_reply_was_lost(raw_redis, proxy, make_layer,
                                                                          events) -> None:
    own = redis_layer.DedicatedConnection("fetch", make_layer(proxy.url))
    try:
        own.run(lambda connection: redis_layer.exchange(connection, [("PING",)]))
        fired = proxy.drop_next("LPUSH")
        with pytest.raises(RedisConnectionError) as raised:
            own.run(push_on)
        assert fired.is_set()
        assert not isinstance(raised.value, ConnectPhaseError)
    finally:
        own.close()
    assert events == []
    assert raw_redis.lrange(KEY, 0, -1) == [b"job"]
    assert proxy.count("LPUSH") == 1


# --- the command left: never replay a non-idempotent block ----------------------
def test_reply_lost_after_send_is_not_replayed(raw_redis, proxy, make_layer, events, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="djwork.redis")
    layer = make_layer(proxy.url)
    layer.run(lambda conn: conn.ping())  # pool a live connection first
    fired = proxy.drop_next("LPUSH")
    with pytest.raises(RedisConnectionError) as raised:
        layer.run(lambda conn: conn.lpush(KEY, "job"))
    assert fired.is_set()
    assert not isinstance(raised.value, ConnectPhaseError)
    assert kinds(events) == [("refused", "unsafe")]
    assert events[0].error is raised.value and events[0].attempt == 1
    assert _records(caplog, "redis refused (unsafe)")
    # The command ran once and was sent once: neither djwork nor redis-py re-sent it.
    assert raw_redis.lrange(KEY, 0, -1) == [b"job"]
    assert proxy.count("LPUSH") == 1


def test_control_redis_py_own_retry_would_replay_the_push(raw_redis, proxy) -> None:
    # Shows the proxy fault really provokes a double push when redis-py is allowed to retry.
    client = redis_py.Redis.from_url(proxy.url, retry=Retry(NoBackoff(), 1))
    try:
        client.ping()
        proxy.drop_next("LPUSH")
        client.lpush(KEY, "job")
    finally:
        client.close()
    assert proxy.count("LPUSH") == 2
    assert raw_redis.llen(KEY) == 2


def test_reply_lost_in_an_idempotent_block_is_retried(raw_redis, proxy, make_layer, events) -> None:
    layer = make_layer(proxy.url)
    fired = proxy.drop_next("SET")
    assert layer.run(lambda conn: conn.set("policy:k", "v"), idempotent=True) is True
    assert fired.is_set()
    assert kinds(events) == [("retry", "idempotent")]
    assert events[0].idempotent and not isinstance(events[0].error, ConnectPhaseError)
    assert proxy.count("SET") == 2  # the block really ran again
    assert raw_redis.get("policy:k") == b"v"


def test_read_timeout_is_not_replayed(raw_redis, proxy, make_layer, events) -> None:
    layer = make_layer(proxy.url, SOCKET_TIMEOUT=0.3)
    fired = proxy.stall_next("LPUSH")
    with pytest.raises(RedisTimeoutError):
        layer.run(lambda conn: conn.lpush(KEY, "job"))
    assert fired.is_set()
    assert kinds(events) == [("refused", "unsafe")]
    assert proxy.count("LPUSH") == 1
    assert raw_redis.llen(KEY) == 1


def test_connect_error_after_a_completed_round_trip_is_refused(raw_redis, proxy, make_layer, events) -> None:
    layer = make_layer(proxy.url)

    def block(conn: redis_py.Redis) -> None:
        conn.incr("policy:counter")
        proxy.refuse()
        # Kill our pooled connection server-side; the proxy then closes its client end.
        for entry in raw_redis.client_list():
            if entry["name"] == "djwork-default":
                raw_redis.client_kill_filter(_id=entry["id"])
        assert proxy.wait_idle()
        conn.incr("policy:counter")  # re-dial -> refused: connect phase, but the block is dirty

    def reopen(event: RedisEvent) -> None:
        # Were the block wrongly replayed, let the replay through so the double INCR shows.
        if event.kind == "retry":
            proxy.allow()

    redis_layer.add_listener(reopen)
    try:
        with pytest.raises(ConnectPhaseError):
            layer.run(block)
    finally:
        redis_layer.remove_listener(reopen)
    assert kinds(events) == [("refused", "unsafe")]
    assert isinstance(events[0].error, ConnectPhaseError)
    assert raw_redis.get("policy:counter") == b"1"
    assert proxy.count("INCRBY") == 1  # redis-py sends INCR as INCRBY k 1


def test_idempotent_block_gives_up_after_max_attempts(raw_redis, proxy, make_layer, events) -> None:
    layer = make_layer(proxy.url, REDIS_MAX_ATTEMPTS=3)
    layer.run(lambda conn: conn.ping())

    def block(conn: redis_py.Redis) -> Any:
        proxy.drop_next("GET")
        return conn.get("policy:k")

    with pytest.raises(RedisConnectionError):
        layer.run(block, idempotent=True)
    assert kinds(events) == [("retry", "idempotent")] * 2 + [("gave_up", "idempotent")]
    assert proxy.count("GET") == 3


def test_backoff_is_exponential_with_jitter_up_to_the_cap(redis_url) -> None:
    layer = RedisLayer(build_config({"REDIS_URL": redis_url, "REDIS_BACKOFF_BASE": 0.1, "REDIS_BACKOFF_CAP": 0.5}))
    for attempt, full in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.5), (10, 0.5)]:
        delays = [layer.backoff_delay(attempt) for _ in range(200)]
        assert all(full / 2 <= delay <= full for delay in delays), attempt
        assert len(set(delays)) > 1  # jittered


# --- failover replies -----------------------------------------------------------
def test_readonly_is_retried_once_then_gives_up(replica, replication, make_layer, events) -> None:
    layer = make_layer(replication[1].url)
    with pytest.raises(ReadOnlyError):
        layer.run(lambda conn: conn.lpush(KEY, "job"))
    assert kinds(events) == [("retry", "failover"), ("gave_up", "failover")]
    assert [event.attempt for event in events] == [1, 2]
    assert all(isinstance(event.error, ReadOnlyError) and not event.idempotent for event in events)


def test_readonly_retry_reaches_a_healed_primary(replica, replication, make_layer, events) -> None:
    layer = make_layer(replication[1].url)

    def promote(event: RedisEvent) -> None:
        if event.kind == "retry" and event.reason == "failover":
            replica.replicaof("NO", "ONE")

    redis_layer.add_listener(promote)
    try:
        assert layer.run(lambda conn: conn.lpush(KEY, "job")) == 1
    finally:
        redis_layer.remove_listener(promote)
    assert kinds(events) == [("retry", "failover")]
    assert replica.lrange(KEY, 0, -1) == ["job"]


def test_readonly_after_a_completed_round_trip_is_refused(replica, replication, make_layer, events) -> None:
    layer = make_layer(replication[1].url)

    def block(conn: redis_py.Redis) -> None:
        conn.get("policy:k")
        conn.lpush(KEY, "job")

    with pytest.raises(ReadOnlyError):
        layer.run(block)
    assert kinds(events) == [("refused", "unsafe")]


def test_failover_retry_leaves_other_threads_commands_alone(replica, replication, make_layer, events) -> None:
    layer = make_layer(replication[1].url)
    outcome: list[Any] = []

    def reader() -> None:
        try:
            outcome.append(layer.run(lambda conn: conn.xread({"policy:stream": "$"}, block=600)))
        except Exception as error:
            outcome.append(error)

    thread = threading.Thread(target=reader)
    thread.start()
    deadline = time.monotonic() + 5
    while not any(entry.get("cmd") == "xread" for entry in replica.client_list()):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with pytest.raises(ReadOnlyError):
        layer.run(lambda conn: conn.lpush(KEY, "job"))
    thread.join(5)
    # The blocked read ran out its BLOCK time normally: the failover retry did not cut it.
    assert len(outcome) == 1 and not isinstance(outcome[0], Exception), outcome
    assert kinds(events) == [("retry", "failover"), ("gave_up", "failover")]


def test_noreplicas_reply_is_a_failover(replication, make_layer, events) -> None:
    primary = redis_py.Redis(port=replication[0].port)
    primary.config_set("min-replicas-to-write", 5)  # more than exist: every write gets NOREPLICAS

    def heal(event: RedisEvent) -> None:
        primary.config_set("min-replicas-to-write", 0)

    redis_layer.add_listener(heal)
    try:
        layer = make_layer(replication[0].url)
        assert layer.run(lambda conn: conn.lpush(KEY, "job")) >= 1
    finally:
        redis_layer.remove_listener(heal)
        primary.config_set("min-replicas-to-write", 0)
        primary.close()
    assert kinds(events) == [("retry", "failover")]
    assert str(events[0].error).startswith("NOREPLICAS")


@pytest.mark.parametrize("reply", [
    "READONLY You can't write against a read only replica.",
    "LOADING Redis is loading the dataset in memory",
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
    "NOREPLICAS Not enough good replicas to write.",
    "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)",
])
def test_failover_replies_classify_as_failover(reply: str) -> None:
    from redis._parsers.base import BaseParser

    error = BaseParser.parse_error(reply)
    assert redis_layer.Attempt.classify(error) == "failover"


def test_ordinary_error_replies_are_not_retried(raw_redis, redis_url, make_layer, events) -> None:
    layer = make_layer(redis_url)
    raw_redis.set("policy:k", "text")
    with pytest.raises(ResponseError):
        layer.run(lambda conn: conn.lpush("policy:k", "x"), idempotent=True)  # WRONGTYPE
    assert events == []


# --- pool exhaustion --------------------------------------------------------------
def test_exhausted_pool_is_retried_once_then_gives_up(raw_redis, redis_url, make_layer, events) -> None:
    layer = make_layer(redis_url, POOL_SIZE=2, POOL_TIMEOUT=0.1)
    pool = layer.client().connection_pool
    held = [pool.get_connection(), pool.get_connection()]
    try:
        started = time.monotonic()
        with pytest.raises(PoolExhaustedError):
            layer.run(lambda conn: conn.lpush(KEY, "job"))
        assert time.monotonic() - started < 1.0
    finally:
        for connection in held:
            pool.release(connection)
    assert kinds(events) == [("retry", "pool"), ("gave_up", "pool")]
    assert raw_redis.llen(KEY) == 0


def test_exhausted_pool_succeeds_when_a_connection_is_released(raw_redis, redis_url, make_layer, events) -> None:
    layer = make_layer(redis_url, POOL_SIZE=2, POOL_TIMEOUT=0.1)
    pool = layer.client().connection_pool
    held = [pool.get_connection(), pool.get_connection()]

    def release_one(event: RedisEvent) -> None:
        if event.kind == "retry" and held:
            pool.release(held.pop())

    redis_layer.add_listener(release_one)
    try:
        assert layer.run(lambda conn: conn.lpush(KEY, "job")) == 1
    finally:
        redis_layer.remove_listener(release_one)
        for connection in held:
            pool.release(connection)
    assert kinds(events) == [("retry", "pool")]
    assert raw_redis.lrange(KEY, 0, -1) == [b"job"]


def test_blocks_holding_the_pool_exhaust_a_third(raw_redis, redis_url, make_layer, events) -> None:
    layer = make_layer(redis_url, POOL_SIZE=2, POOL_TIMEOUT=0.1)
    inside = threading.Barrier(3)
    leave = threading.Event()

    def holder() -> None:
        def block(conn: redis_py.Redis) -> None:
            with conn.pipeline() as pipe:
                pipe.watch("policy:k")  # WATCH pins a connection to the pipeline until reset
                inside.wait(5)
                leave.wait(5)
        layer.run(block)

    threads = [threading.Thread(target=holder) for _ in range(2)]
    for thread in threads:
        thread.start()
    inside.wait(5)
    try:
        with pytest.raises(PoolExhaustedError):
            layer.run(lambda conn: conn.ping())
    finally:
        leave.set()
        for thread in threads:
            thread.join(5)
    assert kinds(events) == [("retry", "pool"), ("gave_up", "pool")]


def test_exhausted_pool_after_a_completed_round_trip_is_refused(raw_redis, redis_url, make_layer, events) -> None:
    layer = make_layer(redis_url, POOL_SIZE=1, POOL_TIMEOUT=0.1)
    pool = layer.client().connection_pool
    held: list[Any] = []

    def block(conn: redis_py.Redis) -> None:
        conn.lpush(KEY, "first")
        if not held:  # only the first try starves: a replay would run to completion
            held.append(pool.get_connection())
        conn.lpush(KEY, "second")

    try:
        with pytest.raises(PoolExhaustedError):
            layer.run(block)
    finally:
        for connection in held:
            pool.release(connection)
    assert kinds(events) == [("refused", "unsafe")]
    assert raw_redis.lrange(KEY, 0, -1) == [b"first"]


# --- telemetry hooks ----------------------------------------------------------------
@pytest.mark.parametrize("hook", ["tests.test_redis_policy.hook_sink", hook_sink])
def test_event_hook_setting_receives_events(raw_redis, proxy, make_layer, hook) -> None:
    HOOKED.clear()
    layer = make_layer(proxy.url, REDIS_MAX_ATTEMPTS=2, REDIS_EVENT_HOOK=hook)
    proxy.refuse()
    with pytest.raises(ConnectPhaseError):
        layer.run(lambda conn: conn.get("policy:k"), idempotent=True, purpose="admin")
    assert kinds(HOOKED) == [("retry", "idempotent"), ("gave_up", "idempotent")]
    assert all(event.purpose == "admin" and event.idempotent for event in HOOKED)


def test_failing_hook_is_logged_and_does_not_stop_the_others(raw_redis, proxy, make_layer, events, caplog) -> None:
    def broken(_event: RedisEvent) -> None:
        raise RuntimeError("telemetry down")

    caplog.set_level(logging.WARNING, logger="djwork.redis")
    layer = make_layer(proxy.url, REDIS_MAX_ATTEMPTS=1, REDIS_EVENT_HOOK=broken)
    proxy.refuse()
    with pytest.raises(ConnectPhaseError):
        layer.run(lambda conn: conn.get("policy:k"), idempotent=True)
    assert kinds(events) == [("gave_up", "idempotent")]
    assert _records(caplog, "redis telemetry hook failed")


def test_module_level_run_uses_the_settings_layer(raw_redis, settings, events) -> None:
    settings.DJWORK = {**settings.DJWORK, "REDIS_EVENT_HOOK": "tests.test_redis_policy.hook_sink"}
    HOOKED.clear()
    assert redis_layer.run(lambda conn: conn.lpush(KEY, "job")) == 1
    assert redis_layer.get_layer().config.redis_event_hook == "tests.test_redis_policy.hook_sink"
    assert redis_layer.client() is redis_layer.get_layer().client()
    assert HOOKED == [] and events == []


def test_changed_settings_drop_the_pools_built_from_the_old_ones(raw_redis, settings) -> None:
    before = redis_layer.get_layer()
    before.client().ping()
    settings.DJWORK = {**settings.DJWORK, "POOL_TIMEOUT": 0.5}
    after = redis_layer.get_layer()
    assert after is not before and after.config.pool_timeout == 0.5
    assert before._clients == {}  # closed, not left dialling the old settings' server
    settings.CACHES = {**settings.CACHES}
    assert redis_layer.get_layer() is not after


def test_a_refusal_read_after_a_send_ahead_is_sent_again_on_a_new_connection(replication, make_layer,
                                                                             events) -> None:
    # The worker's refill sends its fetch and reads the reply later (DedicatedConnection.receive):
    # a refusal there ran nothing, so it is replayed as one inside run() would be, never a lost reply.
    primary = redis_py.Redis(port=replication[0].port)
    primary.delete(KEY)  # the replication servers outlive a test
    primary.config_set("min-replicas-to-write", 5)  # more than exist: every write gets NOREPLICAS

    def heal(event: RedisEvent) -> None:
        primary.config_set("min-replicas-to-write", 0)

    own = redis_layer.DedicatedConnection("fetch", make_layer(replication[0].url))
    redis_layer.add_listener(heal)
    try:
        own.run(lambda connection: connection.send_packed_command(
            redis_layer.pack(connection, [("LPUSH", KEY, "job")])))
        assert own.receive(lambda connection: connection.read_response(), replay=push_on) == [1]
        assert primary.lrange(KEY, 0, -1) == [b"job"]
    finally:
        own.close()
        redis_layer.remove_listener(heal)
        primary.config_set("min-replicas-to-write", 0)
        primary.close()
    assert kinds(events) == [("retry", "failover")]
    assert str(events[0].error).startswith("NOREPLICAS")


def test_a_refusal_read_after_a_send_ahead_without_a_replay_propagates(replication, make_layer, events) -> None:
    primary = redis_py.Redis(port=replication[0].port)
    primary.delete(KEY)  # the replication servers outlive a test
    primary.config_set("min-replicas-to-write", 5)
    own = redis_layer.DedicatedConnection("fetch", make_layer(replication[0].url))
    try:
        own.run(lambda connection: connection.send_packed_command(
            redis_layer.pack(connection, [("LPUSH", KEY, "job")])))
        with pytest.raises(ResponseError, match="NOREPLICAS"):
            own.receive(lambda connection: connection.read_response())
        assert primary.exists(KEY) == 0
    finally:
        own.close()
        primary.config_set("min-replicas-to-write", 0)
        primary.close()
    assert events == []
