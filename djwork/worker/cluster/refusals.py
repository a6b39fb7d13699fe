"""What a worker refuses to start with on a Redis Cluster (docs/cluster.md, Refused on a cluster).

A no-overlap periodic entry (its running lock is taken in the claim's step, in a slot of its own) needs
steps not split yet. A worker configured with one stops at start with ``ClusterUnsupported``, naming
the entries, rather than meeting CROSSSLOT when the first one fires. A single job's features (a batch, a
unique lock) are refused at its push (djwork/client/cluster_refusals.py).
"""

from __future__ import annotations

from djwork.exceptions import ClusterUnsupported
from djwork.periodic.entries import configured
from djwork.settings.conf import Config


def check_worker(config: Config) -> None:
    """Raise ``ClusterUnsupported`` naming each setting a worker cannot honour on a cluster."""
    refused = []
    parsed, _problems = configured(config.periodic, "UTC")  # the problems are the ticker's to log
    no_overlap = [entry.id for entry in parsed if not entry.overlap]
    if no_overlap:
        refused.append(f"periodic entries with overlap=False ({', '.join(no_overlap)})")
    if refused:
        raise ClusterUnsupported(f"djwork cannot run {' and '.join(refused)} on a Redis Cluster yet "
                                 f"(docs/cluster.md, Refused on a cluster): remove it, or use one Redis server")
