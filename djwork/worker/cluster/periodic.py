"""The leader's periodic claims on a Redis Cluster: decide and record pending, push once, clear pending.

On one server ``lua/periodic_claim.lua`` decides a slot and pushes its job in one step. On a cluster the
entry's state and history share a slot (the history is tagged ``{djwork:periodic:state:<id>}``) and the
queue lives in another, so a fired slot is three single-slot steps:

1. ``lua/periodic_claim_pending.lua`` (the entry's slot): the same fence as on one server (the watermark
   is checked and advanced, a slot is decided once), the job recorded in the state as pending;
2. ``lua/push_once.lua`` (the queue's slot): the job pushed, once by its jid however often repeated;
3. ``lua/periodic_pending_clear.lua`` (the entry's slot): the pending job cleared if still the one pushed;
   then ``SADD queues``.

Every tick of the leader reads every entry's pending job and runs steps 2 and 3 for it, so a claim cut
short by a crash (after 1: decided, not pushed; after 2: pushed, not cleared) is completed by the next
tick of whichever process leads then, and pushed once (the push dedupe remembers a jid for an hour).
A no-overlap entry (a running lock in its own step) is refused on a cluster (refusals.py).
"""

from __future__ import annotations

import time
from typing import Any

from djwork import redis as redis_layer
from djwork.periodic import claim as claims
from djwork.periodic.entries import Entry
from djwork.redis import keys
from djwork.worker.cluster.calls import evaluate_each
from djwork.worker.periodic import PeriodicTicker, logger

PENDING_FIELDS = ("pending_jid", "pending_payload", "pending_queue")


class ClusterPeriodicTicker(PeriodicTicker):
    def run_once(self) -> float:
        wake_in = super().run_once()
        self.push_pending()
        return wake_in

    def _claim(self, calls: list[tuple[Entry, claims.ClaimCall]]) -> None:
        script_calls = [((call.keys[0], keys.cluster_periodic_history(entry.id)), call.args) for entry, call in calls]
        # Replayable: a claim that already landed answers "done" the second time.
        replies = redis_layer.run(lambda conn: evaluate_each(conn, "periodic_claim_pending", script_calls,
                                                             raise_on_error=False), idempotent=True)
        for (entry, call), reply in zip(calls, replies, strict=True):
            if isinstance(reply, Exception):
                logger.error("djwork periodic: claim of entry %s failed: %s", entry.id, reply)
                continue
            self._report(entry, call, *claims.status_of(reply))

    def push_pending(self) -> int:
        """Steps 2 and 3 for every entry's pending job (this tick's claims, or one a crash cut short)."""
        states = [keys.periodic_state(entry.id) for entry, _job in self.entries()]
        if not states:
            return 0

        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for state in states:
                pipe.hmget(state, *PENDING_FIELDS)
            return pipe.execute(raise_on_error=False)

        pending = [(state, *(_text(value) for value in reply)) for state, reply in
                   zip(states, redis_layer.run(read, idempotent=True), strict=True)
                   if not isinstance(reply, Exception) and all(reply)]
        if not pending:
            return 0
        now = repr(time.time())
        pushes = [((keys.pushed(queue), keys.queue(queue)), (f"periodic:{jid}", payload, now, keys.PUSHED_HORIZON))
                  for _state, jid, payload, queue in pending]
        # Idempotent: push_once pushes a jid once; the clear is owner-checked; SADD repeats harmlessly.
        replies = redis_layer.run(lambda conn: evaluate_each(conn, "push_once", pushes, raise_on_error=False),
                                  idempotent=True)
        pushed = [entry for entry, reply in zip(pending, replies, strict=True) if not isinstance(reply, Exception)]
        for (_state, jid, _payload, queue), reply in zip(pending, replies, strict=True):
            if isinstance(reply, Exception):  # still pending: the next tick tries again
                logger.error("djwork periodic: could not push job %s onto queue %s: %s", jid, queue, reply)
        if pushed:
            redis_layer.run(lambda conn: evaluate_each(conn, "periodic_pending_clear",
                                                       [((state,), (jid,)) for state, jid, _payload, _queue in pushed]),
                            idempotent=True)
            redis_layer.run(lambda conn: conn.sadd(keys.QUEUES, *{queue for *_rest, queue in pushed}),
                            idempotent=True)
        return len(pushed)


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value
