"""What a push on a Redis Cluster refuses at once, instead of a CROSSSLOT later (docs/cluster.md, Refused).

A push whose payload asks for a feature ``REFUSED_FIELDS`` names raises ``ClusterUnsupported`` at the call,
naming the feature, before anything is written. None is refused today: a priority's lane carries its queue's
hash tag on a cluster (djwork/redis/key_layout.py), and a batch's steps are split
(djwork/batches/cluster_accounting.py). On one server the push hook takes part in no step.
"""

from __future__ import annotations

from typing import Any

from djwork.client.push_hooks import PushHook
from djwork.exceptions import ClusterUnsupported
from djwork.redis.cluster import is_cluster

# payload field -> the feature that field asks for
REFUSED_FIELDS: dict[str, str] = {}


class RefuseOnCluster(PushHook):
    """Its ``stamp`` step exists only on a cluster: one server's pushes never call it."""

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        if is_cluster(config):
            self.stamp = self._refuse

    @staticmethod
    def _refuse(payload: dict[str, Any]) -> None:
        for field, feature in REFUSED_FIELDS.items():
            if payload.get(field) not in (None, False, "", 0):
                raise ClusterUnsupported(
                    f"job {payload.get('jid')} ({payload.get('class')}) asks for {feature}, which djwork does "
                    f"not support on a Redis Cluster yet (docs/cluster.md, Refused on a cluster); nothing was "
                    f"written")

