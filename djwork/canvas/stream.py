"""A chord whose header is a generator: each member is sent as the generator yields it (Celery's lazy header).

Celery consumes such a header while it applies the chord, so the first members run while the generator is
still producing the rest. Here the chord is written with its first member (every batch, the body's included,
and that first job, in one MULTI) and a *hold*: a pending member of the header's batch that no job ends, so
the header can't succeed while members are still coming. Each later member joins the header's batch as
``add_to_chord()`` adds one (djwork/canvas/replace.py, one MULTI each), and the hold is released when the
generator is done (lua/batch_release.lua, counted as an ack counts a member): the header's success, when its
last member ends, then pushes the body with every result in header order, once.

A generator that raises releases the hold as dead, so the chord fails as a header member's death fails it (its
errback runs once) and the error reaches the caller. A client killed while feeding leaves the hold: the chord
never completes, and its batches expire as any unfinished batch does (30 days). On a Redis Cluster each later
member joins in single-slot steps (djwork/canvas/cluster_plan.py) and the release is counted as a member's end
is there (djwork/batches/cluster_accounting.py). docs/canvas.md.
"""

from __future__ import annotations

from typing import Any

from djwork import redis as redis_layer
from djwork.batches import cluster_accounting
from djwork.canvas.apply import apply_chord
from djwork.canvas.refs import ChordRef
from djwork.canvas.replace import add_members
from djwork.canvas.shapes import chord
from djwork.canvas.signature import APPLY
from djwork.payload import new_jid
from djwork.redis import keys, scripts
from djwork.redis.cluster import is_cluster
from djwork.settings.conf import get_config

HOLD_PREFIX = "hold-"  # a hold's member name: never a jid (jids are hex), never a child batch (b-<bid>)


def apply_streamed(node: chord, options: dict[str, Any]) -> ChordRef:
    """Send the chord, consuming its generator header one member at a time; its ref once every member is sent."""
    members = iter(node["kwargs"]["header"])
    first = next(members, None)
    if first is None:  # an empty header: the body runs at once with [] (Celery's)
        return apply_chord(chord([], node.body, **node.options), options)
    hold = f"{HOLD_PREFIX}{new_jid()}"
    ref = apply_chord(chord([first], node.body, **node.options), options, hold)
    outcome = "died"
    try:
        for member in members:
            add_members(ref.header.bid, member, ref.root_id)
        outcome = "ok"
    finally:
        release(ref.header.bid, hold, outcome)
    return ref


def release(bid: str, hold: str, outcome: str) -> None:
    """End the hold of batch ``bid`` as ``ok`` (every member is in) or ``died`` (the generator failed).
    Replayed safely: the member leaves the pending set once, so a second release counts nothing. On a Redis
    Cluster it ends as a member's end does there (in the batch's slot, then what that fired, each step once)."""
    if is_cluster(get_config()):
        cluster_accounting.end_members([(bid, hold, outcome, "", "")])  # '': no task ended, as below
        return
    redis_layer.run(lambda conn: scripts.evaluate(conn, "batch_release", [keys.batch(bid)], [hold, outcome]),
                    idempotent=True)


APPLY["stream"] = apply_streamed
