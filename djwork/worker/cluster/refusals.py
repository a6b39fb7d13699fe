"""What a worker refuses to start with on a Redis Cluster (docs/cluster.md, Refused on a cluster).

Periodic entries (their claim writes an entry's state and pushes its job in one step) need steps not
split yet. A worker configured with them stops at start with ``ClusterUnsupported``, naming the
setting, rather than meeting CROSSSLOT when the first entry fires. A single job's features (a batch, a
unique lock) are refused at its push (djwork/client/cluster_refusals.py).
"""

from __future__ import annotations

from djwork.exceptions import ClusterUnsupported
from djwork.settings.conf import Config


def check_worker(config: Config) -> None:
    """Raise ``ClusterUnsupported`` naming each setting a worker cannot honour on a cluster."""
    refused = []
    if config.periodic:
        refused.append("PERIODIC (periodic entries, or Celery's beat_schedule)")
    if refused:
        raise ClusterUnsupported(f"djwork cannot run {' and '.join(refused)} on a Redis Cluster yet "
                                 f"(docs/cluster.md, Refused on a cluster): remove it, or use one Redis server")
