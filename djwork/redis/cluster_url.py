"""The ``redis+cluster://`` URL: which Redis Cluster nodes to ask first, and how to log in.

``redis+cluster://[[user]:password@]host:port[,host:port...][/0][?option=...]`` names any subset of
the cluster's nodes: redis-py's ``RedisCluster`` asks them for the slot map and finds the others
itself. ``rediss+cluster://`` is the same over TLS. A cluster has one database, 0: a URL naming
another is refused here, not by every node at the first SELECT. Like a sentinel URL, a list of hosts
is no URL urllib can read, so it is parsed here by hand; like the rest of the settings' parsers this
module imports nothing of djwork but djwork.settings.kinds (djwork.settings.conf stands on them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from django.core.checks import CheckMessage, Error

from djwork.settings.kinds import Invalid, credentials_and_hosts, query_options, split_host_list_url

CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
DEFAULT_PORT = 6379
CLUSTER_HINT = ("Use redis+cluster://[[user]:password@]host:port[,host:port...][/0] (rediss+cluster:// for TLS),"
                " e.g. redis+cluster://h1:7000,h2:7000,h3:7000/0; any of the cluster's nodes will do.")
# Query options -> the parser of their value: they replace CONNECT_TIMEOUT / SOCKET_TIMEOUT for the cluster.
CLUSTER_OPTIONS: dict[str, Callable[[str], Any]] = {
    "socket_timeout": float,
    "socket_connect_timeout": float,
}


@dataclass(frozen=True)
class ClusterUrl:
    """A parsed ``redis+cluster://`` URL: the nodes to start from, TLS or not, and the credentials."""

    nodes: tuple[tuple[str, int], ...]
    tls: bool = False
    username: str | None = None
    password: str | None = None
    options: dict[str, Any] = field(default_factory=dict)  # CLUSTER_OPTIONS given in the query


def is_cluster_url(value: Any) -> bool:
    return isinstance(value, str) and value.lower().split("://", 1)[0] in CLUSTER_SCHEMES and "://" in value


def cluster_url(value: Any) -> ClusterUrl:
    """Parse ``value``, or raise ``Invalid`` whose message completes "must be ..."."""
    if not is_cluster_url(value):
        raise Invalid(f"a {' or '.join(scheme + '://' for scheme in CLUSTER_SCHEMES)} URL")
    parts = split_host_list_url(value)
    username, password, nodes = credentials_and_hosts(parts, DEFAULT_PORT, "cluster", "node")
    if parts.path.strip("/") not in ("", "0"):
        raise Invalid(f"a cluster URL with database 0 or none (a Redis Cluster has only 0), not {parts.path!r}")
    options = query_options(parts.query, CLUSTER_OPTIONS, "cluster")
    return ClusterUrl(nodes, parts.scheme.lower() == "rediss+cluster", unquote(username) or None,
                      unquote(password) or None, options)


def check_cluster_url(url: str, what: str = "DJWORK['REDIS_URL']") -> list[CheckMessage]:
    """The one error (djwork.E002) of a ``redis+cluster://`` URL that can't be used."""
    try:
        cluster_url(url)
    except Invalid as problem:
        return [Error(f"{what} must be {problem}, got {url!r}.", hint=CLUSTER_HINT, id="djwork.E002")]
    return []
