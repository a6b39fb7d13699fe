"""The worker's parts that differ on a Redis Cluster, chosen once at start (docs/cluster.md).

One server keeps its one-script atomic steps; a cluster runs the same steps split into single-slot
ones (djwork/worker/cluster/). The Launcher asks this module once which to build and never asks
again: no component tests the mode at run time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from djwork import dead, job_locks
from djwork.redis.cluster import is_cluster
from djwork.settings.conf import Config
from djwork.worker import fetch
from djwork.worker.cluster import filing, locks, results
from djwork.worker.cluster.fetch import ClusterFetcher
from djwork.worker.cluster.periodic import ClusterPeriodicTicker
from djwork.worker.cluster.promotion import ClusterScheduledPoller
from djwork.worker.cluster.recovery import ClusterReaper
from djwork.worker.fetch import Fetcher
from djwork.worker.limits import reschedule_call
from djwork.worker.periodic import PeriodicTicker
from djwork.worker.reaper import Reaper
from djwork.worker.scheduled import ScheduledPoller


@dataclass(frozen=True)
class WorkerMode:
    """The classes and the filing step of one mode."""

    cluster: bool
    fetcher: Callable[..., Fetcher]
    reaper: Callable[..., Reaper]
    poller: Callable[..., ScheduledPoller]
    file_failure: Callable[..., Any]  # dead.file_failure's arguments -> an object with evaluate(conn)
    store_results: Callable[[Sequence[tuple[str, str]]], None]  # (jid, result spec) written outside an ack
    release_locks: Callable[[Any, list[str], str], int]  # (conn, lock keys, owner jid) -> released: job_locks.release
    periodic_ticker: Callable[..., PeriodicTicker]
    reschedule: Callable[..., Any]  # limits.reschedule_call's arguments -> an object with evaluate(conn)


SINGLE_SERVER = WorkerMode(False, Fetcher, Reaper, ScheduledPoller, dead.file_failure, fetch.store_results,
                           job_locks.release, PeriodicTicker, reschedule_call)
CLUSTER = WorkerMode(True, ClusterFetcher, ClusterReaper, ClusterScheduledPoller, filing.file_failure,
                     results.store_results, locks.release, ClusterPeriodicTicker, filing.reschedule)


def mode_for(config: Config) -> WorkerMode:
    """The mode of ``config``'s Redis."""
    return CLUSTER if is_cluster(config) else SINGLE_SERVER
