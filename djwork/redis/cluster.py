"""Redis Cluster connections: redis-py's ``RedisCluster`` for a ``redis+cluster://`` URL, under djwork's rules.

What differs from one server lives here, so no caller asks "cluster or not": how the client is built,
how a failover refusal drops idle connections, how the client is closed, and how a key-space SCAN walks
every primary (``scan_page``). The nodes' connections are djwork's counting connections in a blocking
pool (djwork.redis.connections), so the replay policy sees the same facts as with one server: a failed
dial is a ``ConnectPhaseError``, no free connection a ``PoolExhaustedError``, replies are counted.

redis-py's cluster retry is switched off (``Retry(NoBackoff(), 0)``), as on every djwork pool: it
re-sends a command after a connection error, when the command may have run. Its MOVED and ASK
redirections stay on: a MOVED or ASK reply proves the node ran nothing, so following it is no replay.
"""

from __future__ import annotations

import logging
from typing import Any

import redis as redis_py
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode
from redis.exceptions import RedisClusterException, RedisError
from redis.retry import Retry

from djwork.redis.cluster_url import ClusterUrl, is_cluster_url
from djwork.redis.connections import (
    ConnectPhaseError,
    CountingConnection,
    CountingPool,
    CountingSSLConnection,
    pool_size,
    url_and_options,
)
from djwork.settings.conf import Config

logger = logging.getLogger("djwork.redis")
SCAN_CURSOR_SEPARATOR = ":"  # "<node index>:<that node's cursor>": a page of a scan over every primary


def make_cluster_client(url: ClusterUrl, options: dict[str, Any], config: Config,
                        purpose: str) -> redis_py.RedisCluster:
    """A ``RedisCluster`` starting from ``url``'s nodes, one blocking counting pool per node."""
    reply_timeout = url.options.get("socket_timeout", config.socket_timeout)
    kwargs: dict[str, Any] = {
        "socket_connect_timeout": url.options.get("socket_connect_timeout", config.connect_timeout),
        # Blocking fetches wait server-side up to FETCH_TIMEOUT; the socket must outlast that.
        "socket_timeout": reply_timeout + config.fetch_timeout if purpose == "fetch" else reply_timeout,
        "retry_on_timeout": False,
        "client_name": f"djwork-{purpose}",
        "username": url.username,
        "password": url.password,
        "connection_class": CountingSSLConnection if url.tls else CountingConnection,
        "connection_pool_class": CountingPool,
        "max_connections": pool_size(config, purpose),  # per node
        "timeout": config.pool_timeout,  # the blocking pool's wait for a free connection
        **options,
    }
    if url.tls:
        kwargs["ssl"] = True
    try:
        return redis_py.RedisCluster(startup_nodes=[ClusterNode(host, port) for host, port in url.nodes],
                                     retry=Retry(NoBackoff(), 0), **kwargs)
    except RedisClusterException as error:
        # The client reads the slot map as it is built: no node answering is a failed dial (nothing of the
        # caller's was sent), and must reach callers as the RedisError they handle, not as a bare Exception.
        raise ConnectPhaseError(f"no node of the cluster answered: {error}") from error


def drop_idle_connections(client: Any) -> None:
    """After a failover refusal: close idle connections so the next dial reaches the new primary.

    Idle ones only: closing sockets other threads are mid-command on would fail their commands
    after they may have applied. A cluster also reloads its slot map, which the failover changed.
    """
    if isinstance(client, redis_py.RedisCluster):
        for node in client.get_nodes():
            if node.redis_connection is not None:
                node.redis_connection.connection_pool.disconnect(inuse_connections=False)
        try:
            client.nodes_manager.initialize()
        except (RedisError, RedisClusterException, OSError) as error:
            # The retry's own command meets the same trouble and is judged by the policy; this one is advisory.
            logger.debug("djwork: reloading the cluster's slot map failed: %s", error)
        return
    client.connection_pool.disconnect(inuse_connections=False)


def close_client(client: Any) -> None:
    """Close every connection of ``client`` (every node's, for a cluster)."""
    if isinstance(client, redis_py.RedisCluster):
        client.close()
        return
    client.connection_pool.disconnect()


def scan_page(conn: Any, cursor: str, match: str, count: int) -> tuple[list[Any], str]:
    """One SCAN call's keys matching ``match``, and the cursor to go on from ("0": done).

    On one server this is SCAN itself. A cluster's key space is split over its primaries, each
    with a cursor of its own, so the cursor names the node too ("<node>:<cursor>", primaries in
    a stable order) and a page walks one node at a time; the last node's end is the scan's end.
    A failover between two pages may reorder the primaries: SCAN then repeats or skips keys, as a
    dashboard page may (it shows what is there now; nothing acts on a scan's completeness).
    """
    if not isinstance(conn, redis_py.RedisCluster):
        position, keys = conn.scan(cursor or "0", match=match, count=count)
        return list(keys), str(int(position))
    primaries = sorted(conn.get_primaries(), key=lambda node: node.name)
    index, _, node_cursor = (cursor or "0").partition(SCAN_CURSOR_SEPARATOR)
    node_index = int(index) if node_cursor else 0
    if node_index >= len(primaries):  # the cluster lost a primary since the last page: nothing left to walk
        return [], "0"
    node_client = conn.get_redis_connection(primaries[node_index])
    position, keys = node_client.scan(int(node_cursor or 0), match=match, count=count)
    if int(position) != 0:
        return list(keys), f"{node_index}{SCAN_CURSOR_SEPARATOR}{int(position)}"
    if node_index + 1 < len(primaries):
        return list(keys), f"{node_index + 1}{SCAN_CURSOR_SEPARATOR}0"
    return list(keys), "0"


def servers(conn: Any) -> list[tuple[str, Any]]:
    """The servers behind ``conn`` as (name, plain client): a cluster's primaries ("host:port"), else ("", conn).

    For what is per server and not per key (INFO, CONFIG GET): a cluster client would route such a
    command to one node it picks, or refuse it in a pipeline.
    """
    if not isinstance(conn, redis_py.RedisCluster):
        return [("", conn)]
    return [(node.name, conn.get_redis_connection(node))
            for node in sorted(conn.get_primaries(), key=lambda node: node.name)]


def pipeline_with_time(conn: Any) -> Any:
    """A non-transactional pipeline whose first reply is the server's TIME, whatever is queued after it.

    On one server TIME is queued first, so the clock and the reads come in one round trip. A
    cluster refuses TIME in a pipeline (it belongs to no slot): the pipeline asks one primary for it
    when it runs, before its own round trips, and puts the reply first.
    """
    if not isinstance(conn, redis_py.RedisCluster):
        pipe = conn.pipeline(transaction=False)
        pipe.time()
        return pipe
    return _TimedClusterPipeline(conn)


class _TimedClusterPipeline:
    def __init__(self, conn: redis_py.RedisCluster) -> None:
        self._conn = conn
        self._pipe = conn.pipeline(transaction=False)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pipe, name)

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        try:
            now: Any = self._conn.time(target_nodes=self._conn.get_default_node())
        except redis_py.ResponseError as error:
            if raise_on_error:
                raise
            now = error
        return [now, *self._pipe.execute(raise_on_error=raise_on_error)]


def node_connection(client: redis_py.RedisCluster, key: str) -> Any:
    """A connection of its own (outside the pool) to the primary that owns ``key``'s slot.

    For a caller that blocks on one key (a queue taker's BLMOVE) and is interrupted by CLIENT UNBLOCK,
    which needs the id of a connection nobody else uses, on the node that holds the key.
    """
    pool = client.get_redis_connection(client.get_node_from_key(key)).connection_pool
    return pool.connection_class(**pool.connection_kwargs)


def reload_slots(client: redis_py.RedisCluster) -> None:
    """Read the slot map again (after a MOVED or UNBLOCKED reply: a failover moved the slot's primary)."""
    try:
        client.nodes_manager.initialize()
    except (RedisError, RedisClusterException, OSError) as error:
        # The caller's next command meets the same trouble and reports it; this reload is advisory.
        logger.debug("djwork: reloading the cluster's slot map failed: %s", error)


def is_cluster(config: Config) -> bool:
    """Whether ``config`` reaches a Redis Cluster: the mode, decided once by whoever builds per-mode parts."""
    return is_cluster_url(url_and_options(config)[0])


def transaction(conn: Any) -> Any:
    """A MULTI pipeline on one server; on a cluster a plain pipeline, its commands sent per node.

    For writes that are each idempotent and only look tidier together (a process's presence, its clean
    stop): a cluster refuses a MULTI across slots, and each command standing alone is safe, since the
    next beat or stop writes them all again (docs/cluster.md, Pipelines).
    """
    return conn.pipeline(transaction=not isinstance(conn, redis_py.RedisCluster))

