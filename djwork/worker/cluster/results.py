"""Result records on a Redis Cluster: one ``lua/store_result.lua`` call per job, each in its record's slot.

On one server ``store_results.lua`` (and the ack inside ``fetch.lua``) writes many records in one step
with the shared waiters hash. On a cluster a job's record, its notify list and its waiter carry the tag
``{djwork:result:<jid>}`` (docs/cluster.md, Keys), so each job's write is a call of its own, the calls
sent together, one round trip per node. The write comes before the step that ends the job (the ack's
``LREM``, the failure's filing): a crash between leaves the job in progress, to run again and rewrite
the same record, never a job gone with no record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from djwork import redis as redis_layer
from djwork.redis import keys
from djwork.worker.cluster.calls import evaluate_each


def store_results(records: Sequence[tuple[str, str]]) -> None:
    """Write each (jid, result spec) under the replay policy; returns once every write has a reply."""
    records = [(jid, spec) for jid, spec in records if jid and spec]
    if records:
        # Idempotent: each call is an HSET of the same fields, and a waiter is woken at most once.
        redis_layer.run(lambda conn: store_on(conn, records), idempotent=True)


def store_on(conn: Any, records: Sequence[tuple[str, str]]) -> None:
    """Write each (jid, result spec) through the cluster client ``conn``, one round trip per node; an error raises."""
    evaluate_each(conn, "store_result", [((keys.result(jid), keys.cluster_result_waiters(jid)), (jid, spec))
                                         for jid, spec in records if jid and spec])
