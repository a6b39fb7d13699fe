"""A real Redis Cluster for tests: 3 primaries + 3 replicas on free loopback ports, in private directories.

Each node is a ``redis-server --cluster-enabled yes`` (djwork.testing.redis_server.RedisServer, so it is
never on 6379 and its port is retried if another process takes it first) with its cluster bus on a second
free port (``--cluster-port``: the default, port + 10000, may be above 65535 or taken). ``redis-cli
--cluster create`` assigns the slots and pairs each replica with a primary; ``start()`` returns only once
every node says ``cluster_state:ok`` and knows all the others, and rolls back (stops every node) when any
step fails, so a broken start never leaves servers behind. ``failover()`` runs ``CLUSTER FAILOVER`` on a
replica and waits until the roles have flipped on both sides.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis as redis_py
from redis.cluster import ClusterNode

from djwork.redis.cluster_url import cluster_url
from djwork.testing.redis_server import RedisServer, free_port

PRIMARIES = 3
REPLICAS_PER_PRIMARY = 1
SLOTS = 16384
NODE_TIMEOUT_MS = 2000  # how long a silent node takes to be marked failing: short, for failover tests


class ClusterDidNotForm(RuntimeError):
    """The nodes started but did not agree on one healthy cluster in time."""


def _bus_port(taken: set[int]) -> int:
    port = free_port()
    while port in taken or port == 6379:
        port = free_port()
    return port


class LoopbackCluster:
    """``PRIMARIES`` primaries with ``REPLICAS_PER_PRIMARY`` replicas each, all on 127.0.0.1."""

    def __init__(self, directory: str | None = None, *, primaries: int = PRIMARIES,
                 replicas_per_primary: int = REPLICAS_PER_PRIMARY) -> None:
        self.cli = shutil.which("redis-cli")
        if self.cli is None:
            raise RuntimeError("redis-cli was not found on PATH (Debian/Ubuntu: apt-get install redis-tools)")
        self.directory = Path(directory or tempfile.mkdtemp(prefix="djwork-cluster-"))
        self.primaries = primaries
        self.replicas_per_primary = replicas_per_primary
        self.nodes: list[RedisServer] = []

    # --- addresses ------------------------------------------------------------------------------
    @property
    def addresses(self) -> list[str]:
        return [f"127.0.0.1:{node.port}" for node in self.nodes]

    def url(self, nodes: int | None = None, *, scheme: str = "redis+cluster") -> str:
        """``redis+cluster://127.0.0.1:p1,127.0.0.1:p2,.../0``: the first ``nodes`` nodes (any subset will do)."""
        return f"{scheme}://{','.join(self.addresses[:nodes])}/0"

    def client(self, port: int) -> redis_py.Redis:
        """A plain connection to one node (not cluster-aware): for CLUSTER commands and node-local reads."""
        return redis_py.Redis(host="127.0.0.1", port=port, socket_timeout=5, decode_responses=True)

    def cluster_client(self) -> redis_py.RedisCluster:
        return cluster_client(self.url())

    # --- lifecycle ------------------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> LoopbackCluster:
        """Start every node, create the cluster, wait until it is whole; on any failure stop everything."""
        if self.nodes:
            return self
        try:
            self._start_nodes()
            self._create()
            self.wait_until(self.is_whole, timeout, "every node to say cluster_state:ok and know the others")
        except BaseException:
            self.stop()
            raise
        return self

    def _start_nodes(self) -> None:
        taken: set[int] = set()
        for index in range(self.primaries * (1 + self.replicas_per_primary)):
            bus = _bus_port(taken)
            taken.add(bus)
            node = RedisServer(directory=str(self.directory / f"node{index}"), extra_args=[
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(NODE_TIMEOUT_MS), "--cluster-port", str(bus)])
            self.nodes.append(node)  # before start(): stop() must reach a node that started halfway
            node.start()
            taken.add(node.port)

    def _create(self) -> None:
        result = subprocess.run(
            [self.cli, "--cluster", "create", *self.addresses, "--cluster-replicas", str(self.replicas_per_primary),
             "--cluster-yes"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        if result.returncode != 0 or "[OK] All 16384 slots covered" not in result.stdout:
            raise ClusterDidNotForm(f"redis-cli --cluster create failed ({result.returncode}):\n"
                                    f"{result.stdout}\n{result.stderr}")

    def stop(self) -> None:
        """Stop every node; safe at any point of ``start()`` and more than once."""
        nodes, self.nodes = self.nodes, []
        for node in nodes:
            node.stop()

    # --- state ----------------------------------------------------------------------------------
    def _info(self, port: int) -> dict[str, str]:
        with self.client(port) as conn:
            text = conn.execute_command("CLUSTER", "INFO")
        return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)

    def is_whole(self) -> bool:
        expected = str(len(self.nodes))
        for node in self.nodes:
            try:
                info = self._info(node.port)
            except (redis_py.RedisError, OSError):
                return False
            if info.get("cluster_state") != "ok" or info.get("cluster_known_nodes") != expected:
                return False
            if info.get("cluster_slots_ok") != str(SLOTS):
                return False
        # A failover needs a replica whose replication link is up: "ok" comes before the links are.
        try:
            return sorted(self._connected_replicas(port) for port in self.primary_ports()) == \
                [self.replicas_per_primary] * self.primaries
        except (redis_py.RedisError, OSError):
            return False

    def _connected_replicas(self, primary_port: int) -> int:
        with self.client(primary_port) as conn:
            info = conn.info("replication")
        return sum(1 for name, value in info.items()
                   if name.startswith("slave") and isinstance(value, dict) and value.get("state") == "online")

    def role(self, port: int) -> str:
        """``master`` or ``slave``, as the node itself says (ROLE)."""
        with self.client(port) as conn:
            return str(conn.execute_command("ROLE")[0])

    def primary_ports(self) -> list[int]:
        return [node.port for node in self.nodes if self.role(node.port) == "master"]

    def replica_of(self, primary_port: int) -> int:
        """The port of a replica that replicates the primary on ``primary_port``."""
        with self.client(primary_port) as conn:
            replicas = conn.execute_command("ROLE")[2]
        if not replicas:
            raise ClusterDidNotForm(f"the primary on {primary_port} has no replica")
        return int(replicas[0][1])

    def failover(self, primary_port: int, timeout: float = 30.0) -> int:
        """Promote a replica of ``primary_port`` with CLUSTER FAILOVER; returns the new primary's port.

        Waits until the promoted node says master, the old one says slave, and every node agrees
        the cluster is ok again: a caller's next command meets the settled topology.
        """
        replica = self.replica_of(primary_port)
        with self.client(replica) as conn:
            conn.execute_command("CLUSTER", "FAILOVER")
        self.wait_until(lambda: self.role(replica) == "master" and self.role(primary_port) == "slave",
                        timeout, f"the replica on {replica} to take over from {primary_port}")
        self.wait_until(self.is_whole, timeout, "the cluster to be ok again after the failover")
        return replica

    def flush(self, timeout: float = 30.0) -> None:
        """Empty every primary (FLUSHALL is node-local in a cluster; replicas follow their primary).

        Only the nodes this object started (``self.nodes``, filled by ``start()`` alone): a FLUSHALL here can
        never reach a Redis the test suite did not start.

        Until every primary has emptied and every node is empty: right after a failover a node that
        was a primary a moment ago may answer READONLY, so the flush is asked again until it holds.
        """
        self.wait_until(self._flushed, timeout, "every primary to be emptied")

    def _flushed(self) -> bool:
        try:
            for port in self.primary_ports():
                with self.client(port) as conn:
                    conn.flushall()
            return all(self._size(node.port) == 0 for node in self.nodes) and self.is_whole()
        except (redis_py.RedisError, OSError):
            return False

    def _size(self, port: int) -> int:
        with self.client(port) as conn:
            return int(conn.dbsize())

    @staticmethod
    def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(0.05)
        raise ClusterDidNotForm(f"timed out after {timeout}s waiting for {what}")


def cluster_client(url: str) -> redis_py.RedisCluster:
    """A plain redis-py cluster client (bytes replies, as ``raw_redis``'s) on a ``redis+cluster://`` URL's nodes."""
    return redis_py.RedisCluster(startup_nodes=[ClusterNode(host, port) for host, port in cluster_url(url).nodes])


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackCluster]:
    """One real 3+3 cluster per pytest process (each xdist worker has its own), emptied by ``cluster_redis``."""
    cluster = LoopbackCluster(str(tmp_path_factory.mktemp("redis-cluster"))).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster_redis(redis_cluster: LoopbackCluster) -> Iterator[LoopbackCluster]:
    """The session's cluster, every primary emptied before the test (the data-bearing counterpart of raw_redis)."""
    redis_cluster.flush()  # waits for the cluster to be whole, too
    yield redis_cluster


@pytest.fixture
def on_cluster(cluster_redis: LoopbackCluster) -> Iterator[LoopbackCluster]:
    """djwork's settings pointed at the emptied cluster through ONE node of it (any subset will do)."""
    from django.conf import settings
    from django.test import override_settings

    from djwork import redis as redis_layer

    with override_settings(DJWORK={**settings.DJWORK, "REDIS_URL": cluster_redis.url(nodes=1)}):
        redis_layer.reset()
        yield cluster_redis
    redis_layer.reset()


def client_for_url(url: str) -> redis_py.Redis:
    """A plain client on the suite's URL, whichever it is: a cluster client for ``redis+cluster://``, else a Redis.

    For jobs that count their runs in the suite's Redis, so they run the same under ``DJWORK_TEST_CLUSTER=1``.
    """
    from djwork.redis.cluster_url import is_cluster_url

    return cluster_client(url) if is_cluster_url(url) else redis_py.Redis.from_url(url)
