"""Redis Sentinel: the ``redis+sentinel://`` URL, and djwork following a real failover.

Real sentinels only (djwork.testing.sentinel: one master, one replica, three
sentinels on free loopback ports, torn down in ``finally``). The failover is
Sentinel's own (``SENTINEL FAILOVER``); every wait is for something it, the
servers or the worker can be seen to do: all sentinels naming the new master,
the replica reporting its promotion, a job enqueued after the switch running.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as redis_py
from django.conf import settings
from django.test import override_settings
from django.urls import reverse

from djwork import api
from djwork import redis as redis_layer
from djwork.redis import ConnectPhaseError, DedicatedConnection, RedisLayer, keys
from djwork.settings.checks import check_settings
from djwork.settings.conf import build_config
from djwork.settings.kinds import SentinelUrl, sentinel_url
from djwork.testing.sentinel import SentinelTopology, sentinel_command
from tests import worker_jobs
from tests.helpers_worker import counts, in_progress_items, wait_beats, wait_until

IN_CI = os.environ.get("CI") == "true"


def _require_sentinel() -> None:
    """No sentinel binary: a failure in CI, where .ci/run installs one; a skip on a developer's machine."""
    try:
        sentinel_command(Path("sentinel.conf"))
    except RuntimeError as missing:
        if IN_CI:
            pytest.fail(str(missing))
        pytest.skip(str(missing))


@contextlib.contextmanager
def started(**options: Any) -> Iterator[SentinelTopology]:
    _require_sentinel()
    topology = SentinelTopology(**options)
    try:
        yield topology.start()
    finally:
        topology.stop()


@pytest.fixture(scope="module")
def topology() -> Iterator[SentinelTopology]:
    """One topology for the tests that fail nothing over."""
    with started() as running:
        yield running


def tcp_port(info: dict[str, Any] | bytes) -> int:
    """The port of the server that answered INFO (parsed by a client, or the raw reply of a bare connection)."""
    if isinstance(info, dict):
        return int(info["tcp_port"])
    line = next(line for line in info.decode().splitlines() if line.startswith("tcp_port:"))
    return int(line.partition(":")[2])


def bare_info(connection: Any) -> bytes:
    connection.send_command("INFO", "server")
    return connection.read_response()


def raising(replies: list[Any]) -> Any:
    """The one reply of ``redis_layer.exchange``, raised when it is an error reply (as a fetch does)."""
    (reply,) = replies
    if isinstance(reply, Exception):
        raise reply
    return reply


# --- the URL -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("url", "parsed"), [
    ("redis+sentinel://h1:26379,h2:26380/mymaster/0",
     SentinelUrl((("h1", 26379), ("h2", 26380)), "mymaster", 0)),
    ("redis+sentinel://:s3cret@h1:26379,h2:26379/mymaster/2",
     SentinelUrl((("h1", 26379), ("h2", 26379)), "mymaster", 2, None, "s3cret")),
    ("redis+sentinel://app:p%40ss@h1/jobs",
     SentinelUrl((("h1", 26379),), "jobs", 0, "app", "p@ss")),
    ("redis+sentinel://[::1]:5000,10.0.0.2/mymaster/1?sentinel_password=sp&socket_timeout=0.5"
     "&socket_connect_timeout=0.25&master_check_interval=2&sentinel_username=watcher",
     SentinelUrl((("::1", 5000), ("10.0.0.2", 26379)), "mymaster", 1, None, None,
                 {"sentinel_password": "sp", "socket_timeout": 0.5, "socket_connect_timeout": 0.25,
                  "master_check_interval": 2.0, "sentinel_username": "watcher"})),
    # An IPv6 host after another: Python 3.13's urlsplit raised "Invalid IPv6 URL" on this netloc.
    ("redis+sentinel://10.0.0.2,[::1]:5000/mymaster",
     SentinelUrl((("10.0.0.2", 26379), ("::1", 5000)), "mymaster", 0)),
])
def test_sentinel_url_parses(url, parsed):
    assert sentinel_url(url) == parsed
    with override_settings(DJWORK={**settings.DJWORK, "REDIS_URL": url}):
        assert check_settings() == []


@pytest.mark.parametrize(("url", "problem"), [
    ("redis+sentinel://", "at least one sentinel"),
    ("redis+sentinel:///mymaster/0", "at least one sentinel"),
    ("redis+sentinel://:pw@/mymaster/0", "at least one sentinel"),
    ("redis+sentinel://h1:26379,,h2:26379/mymaster/0", "empty host"),
    ("redis+sentinel://h1:26379", "service name"),
    ("redis+sentinel://h1:26379,h2:26379/", "service name"),
    ("redis+sentinel://h1:26379//0", "service name"),
    ("redis+sentinel://:26379/mymaster/0", "with a host"),
    ("redis+sentinel://h1:port/mymaster/0", "TCP port"),
    ("redis+sentinel://h1:70000/mymaster/0", "TCP port"),
    ("redis+sentinel://h1/mymaster/zero", "numeric db"),
    ("redis+sentinel://h1/mymaster/0/1", "numeric db"),
    ("redis+sentinel://h1/mymaster/0?sentinal_password=x", "'sentinal_password' is not"),
    ("redis+sentinel://h1/mymaster/0?socket_timeout=soon", "socket_timeout is a number"),
    ("redis+sentinel://h1/mymaster/0?master_check_interval=0", "master_check_interval is a number > 0"),
])
def test_bad_sentinel_url_is_a_check_error(url, problem):
    with override_settings(DJWORK={**settings.DJWORK, "REDIS_URL": url}):
        errors = check_settings()
    assert [error.id for error in errors] == ["djwork.E002"], [(error.id, error.msg) for error in errors]
    assert problem in errors[0].msg and "REDIS_URL" in errors[0].msg
    assert "redis+sentinel://" in errors[0].hint


# --- client, API, dashboard ----------------------------------------------------------------------------
def test_client_api_and_dashboard_go_to_the_master_sentinel_names(topology, raw_redis, admin_client):
    topology.flush_master()
    with override_settings(DJWORK={**settings.DJWORK, "REDIS_URL": topology.url(db=2)}):
        jid = worker_jobs.record.delay("via-sentinel").jid
        queued = redis_py.Redis.from_url(topology.server_url(topology.master_port, 2))
        assert [json.loads(raw)["jid"] for raw in queued.lrange(keys.queue("default"), 0, -1)] == [jid]
        assert raw_redis.llen(keys.queue("default")) == 0  # nothing went to the suite's own server
        assert api.Queue("default").size() == 1
        assert api.Stats.fetch().enqueued == 1
        assert api.redis_info()["redis_version"]
        page = admin_client.get(reverse("djwork_dashboard:queue", args=["default"]))
        assert page.status_code == 200 and b"via-sentinel" in page.content

        # A connection held outside the pool dials through Sentinel even when its first use is a send:
        # redis-py's own redial would go to localhost:6379, the machine's shared Redis.
        bare = redis_layer.dedicated_connection("fetch")
        try:
            assert tcp_port(bare_info(bare)) == topology.master_port
        finally:
            bare.disconnect()
        dedicated = DedicatedConnection("fetch")
        try:
            assert tcp_port(dedicated.run(bare_info)) == topology.master_port
        finally:
            dedicated.close()
    topology.flush_master()


# --- following a failover ------------------------------------------------------------------------------
def wait_for_switch(topology: SentinelTopology, old_port: int, timeout: float = 20.0) -> int:
    """Every sentinel names a master other than ``old_port`` (each has seen +switch-master); returns its port."""
    def new_port() -> int | None:
        port = topology.master_port_agreed()
        return None if port == old_port else port

    return wait_until(new_port, timeout, f"every sentinel to name a new master instead of {old_port}")


def test_connections_follow_a_failover_and_readonly_is_replayed(events):
    # With master_check_interval=3600 a layer never asks Sentinel again by itself: only a refusal can move it.
    # The settings' layer (what delay() uses) is one such; ``pinned`` another, with pools of its own.
    with started() as topology, override_settings(
            DJWORK={**settings.DJWORK, "REDIS_URL": topology.url(query="master_check_interval=3600")}):
        following = RedisLayer(build_config({"REDIS_URL": topology.url()}))
        pinned = RedisLayer(build_config())
        held = {name: DedicatedConnection("fetch", layer) for name, layer in (("following", following),
                                                                                  ("pinned", pinned))}
        bare = redis_layer.dedicated_connection("fetch", following)
        try:
            old = topology.master_port
            for layer in (following, pinned, redis_layer.get_layer()):
                assert tcp_port(layer.run(lambda conn: conn.info("server"), idempotent=True)) == old
            worker_jobs.record.delay("before")
            for connection in held.values():
                assert tcp_port(connection.run(bare_info)) == old
            assert tcp_port(bare_info(bare)) == old

            assert topology.failover() == old
            new = wait_for_switch(topology, old)

            # Pooled, dedicated and bare connections of a layer that re-asks Sentinel reach the new master even
            # with read-only commands, which the old one (master, or replica later) would go on answering.
            wait_until(lambda: tcp_port(following.run(lambda conn: conn.info("server"), idempotent=True)) == new,
                       10, "the pool to reach the new master")
            wait_until(lambda: tcp_port(held["following"].run(bare_info)) == new, 10,
                       "the dedicated connection to reach the new master")

            def bare_port() -> int | None:
                try:
                    return tcp_port(bare_info(bare))
                except ConnectPhaseError:  # it found the master moved before sending: the next send redials
                    return None

            wait_until(lambda: bare_port() == new, 10, "the bare connection to reach the new master")

            # Demote the old master now, as Sentinel does some seconds later: the pinned layers' connections
            # still talk to it, and get READONLY for a write. It is a refusal: replayed on the new master, for
            # delay()'s pipeline, a pooled command and a dedicated connection's exchange alike.
            demoted = topology.server(old)
            demoted.replicaof("127.0.0.1", new)
            wait_until(lambda: demoted.info("replication").get("master_link_status") == "up", 10,
                       "the old master to replicate the new one")
            events.clear()
            jid = worker_jobs.record.delay("after-readonly").jid
            assert pinned.run(lambda conn: conn.incr("written-after-readonly")) == 1
            assert held["pinned"].run(
                lambda conn: raising(redis_layer.exchange(conn, [("INCR", "written-after-readonly")]))) == 2
            new_master = topology.server(new)
            assert int(new_master.get("written-after-readonly")) == 2
            assert [json.loads(raw)["jid"] for raw in new_master.lrange(keys.queue("default"), 0, 0)] == [jid]
            readonly = [(event.kind, event.reason, event.purpose) for event in events
                        if isinstance(event.error, redis_py.exceptions.ReadOnlyError)]
            assert readonly == [("retry", "failover", "default")] * 2 + [("retry", "failover", "fetch")], events
            assert [event for event in events if event.kind != "retry"] == []
        finally:
            bare.disconnect()
            for connection in held.values():
                connection.close()
            following.close()
            pinned.close()


class Enqueuer:
    """``record.delay()`` from a thread of the test process, through the sentinel URL, one job every ``pace``
    seconds, noting for each key when its call started and returned (or that it raised)."""

    def __init__(self, pace: float) -> None:
        self.pace = pace
        self.acknowledged: dict[str, tuple[float, float]] = {}
        self.refused: dict[str, str] = {}
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="enqueuer", daemon=True)

    def enqueue(self) -> None:
        key = f"job-{self.count}"
        self.count += 1
        started_at = time.monotonic()
        try:
            worker_jobs.record.delay(key)
        except Exception as error:
            self.refused[key] = f"{type(error).__name__}: {error}"
        else:
            self.acknowledged[key] = (started_at, time.monotonic())

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        assert not self._thread.is_alive(), "the enqueuer did not stop"

    def _run(self) -> None:
        while not self._stop.wait(self.pace):
            self.enqueue()


class PromotionClock:
    """Polls the replica's role until it reports master: the promotion happened between the last "slave"
    and the first "master" it saw (a write the old master acknowledged just then may not have reached it)."""

    def __init__(self, replica: redis_py.Redis) -> None:
        self.replica = replica
        self.last_replica = 0.0
        self.first_master = 0.0
        self._thread = threading.Thread(target=self._run, name="promotion-clock", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        self._thread.join(20)

    def _run(self) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            before = time.monotonic()
            role = self.replica.execute_command("ROLE")[0]
            if role in (b"master", "master"):
                self.first_master = time.monotonic()
                return
            self.last_replica = before
            time.sleep(0.001)


BURST = 1000
AFTER_SWITCH = 500
RACE_MARGIN = 0.05  # seconds either side of the promotion within which a loss is asynchronous replication's


def test_failover_mid_drain_loses_no_acknowledged_job(workers, raw_redis):
    # min-replicas-to-write on the first master only (Sentinel copies no configuration): once its replica
    # is promoted it refuses writes, instead of acknowledging what the new master will never see.
    options = {"master_options": ["--min-replicas-to-write", "1", "--min-replicas-max-lag", "10"]}
    with started(**options) as topology, \
            override_settings(DJWORK={**settings.DJWORK, "REDIS_URL": topology.url()}):
        old = topology.master_port
        worker = workers.start("-c", "5", "-q", "default", overrides={"REDIS_URL": topology.url()})
        enqueuer = Enqueuer(pace=0.002)
        for _ in range(BURST):
            enqueuer.enqueue()
        assert not enqueuer.refused
        wait_until(lambda: int(raw_redis.get(worker_jobs.RUNS) or 0) >= 100, 30, "the worker to run 100 jobs")

        clock = PromotionClock(topology.server(topology.replica_ports[0]))
        clock.start()
        enqueuer.start()
        topology.failover()
        new = wait_for_switch(topology, old)
        clock.join()
        assert clock.first_master, "the replica never reported its promotion"
        switched_at = enqueuer.count
        wait_until(lambda: enqueuer.count >= switched_at + AFTER_SWITCH, 30, "enqueues after the switch")
        enqueuer.stop()
        new_master = topology.server(new)
        last = f"job-{enqueuer.count - 1}"
        assert last in enqueuer.acknowledged, enqueuer.refused.get(last)
        wait_until(lambda: counts(raw_redis).get(last), 30, "the last job, enqueued on the new master, to run")

        # Drained: nothing left queued, and the worker beat twice since (it would have taken anything left).
        wait_until(lambda: new_master.llen(keys.queue("default")) == 0, 30, "the new master's queue to empty")
        wait_beats(new_master, worker.identity(new_master), beats=2)
        # A graceful stop pushes back what its in-progress lists still hold: also jobs that ran, but whose ack
        # the old master took just before the promotion and never passed on (they will run again).
        worker.send(signal.SIGTERM)
        assert worker.wait_exit(20) == 0
        assert not any(in_progress_items(new_master).values())
        requeued = [json.loads(raw)["args"][0] for raw in new_master.lrange(keys.queue("default"), 0, -1)]

        ran = counts(raw_redis)
        lost = [key for key in enqueuer.acknowledged if not ran.get(key) and key not in requeued]
        promotion = (clock.last_replica, clock.first_master)

        def offset_ms(key: str) -> str:
            returned_at = enqueuer.acknowledged[key][1]
            return f"{key} returned {(returned_at - promotion[0]) * 1000:+.1f} ms after the last 'slave' role"

        in_race = [key for key in lost if enqueuer.acknowledged[key][1] >= promotion[0] - RACE_MARGIN
                   and enqueuer.acknowledged[key][0] <= promotion[1] + RACE_MARGIN]
        duplicates = sum(runs - 1 for runs in ran.values() if runs > 1)
        print(f"sentinel failover: {len(enqueuer.acknowledged)} acknowledged, {len(enqueuer.refused)} refused by"
              f" delay(), {len(lost)} lost ({len(in_race)} within {RACE_MARGIN * 1000:.0f} ms of the promotion:"
              f" {[offset_ms(key) for key in in_race]}), {duplicates} duplicate runs, {len(requeued)} requeued at"
              f" stop ({sum(1 for key in requeued if ran.get(key))} of them had run); promotion seen within"
              f" {(promotion[1] - promotion[0]) * 1000:.1f} ms")
        assert set(lost) == set(in_race), f"lost outside the promotion instant: {sorted(set(lost) - set(in_race))}"
        assert set(ran) <= set(enqueuer.acknowledged) | set(enqueuer.refused), "a job nobody enqueued ran"
