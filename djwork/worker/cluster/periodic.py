"""The leader's periodic claims on a Redis Cluster: decide and record pending, push once, clear pending.

On one server ``lua/periodic_claim.lua`` decides a slot and pushes its job in one step. On a cluster the
entry's state and history share a slot (the history is tagged ``{djwork:periodic:state:<id>}``) and the
queue lives in another, so a fired slot is three single-slot steps:

1. ``lua/periodic_claim_pending.lua`` (the entry's slot): the same fence as on one server (the watermark
   is checked and advanced, a slot is decided once), the job recorded in the state as pending, a field
   of its own (a catch-up decides several slots in one tick);
2. ``lua/push_once.lua`` (the queue's slot): the job pushed, once by its jid however often repeated;
3. ``HDEL`` of its pending field (the entry's slot), then ``SADD queues``.

Every tick of the leader reads every entry's pending job and runs steps 2 and 3 for it, so a claim cut
short by a crash (after 1: decided, not pushed; after 2: pushed, not cleared) is completed by the next
tick of whichever process leads then, and pushed once (the push dedupe remembers a jid for an hour).
A no-overlap entry's running lock is named in the state's slot on a cluster
(``djwork:periodic-running:{djwork:periodic:state:<id>}``), so step 1 checks and takes it as one server's
claim does; the worker releases it after the step that ends the job, one owner-checked call
(djwork/worker/cluster/locks.py). Orphan recovery does not retake it (the lock keeps the TTL its claim gave).
"""

from __future__ import annotations

import time
from typing import Any

from djwork import redis as redis_layer
from djwork.batches import cluster_accounting
from djwork.periodic import claim as claims
from djwork.periodic.entries import Entry
from djwork.redis import keys
from djwork.worker.cluster.calls import evaluate_each
from djwork.worker.periodic import PeriodicTicker, logger

PENDING_PREFIX = "pending:"  # the state's field of a pending job: pending:<slot ms>:<jid> -> "<queue>\n<payload>"


class ClusterPeriodicTicker(PeriodicTicker):
    def run_once(self) -> float:
        wake_in = super().run_once()
        self.push_pending()
        self.sweep_batches()
        return wake_in

    def sweep_batches(self) -> None:
        """Callbacks a crash left pending in a batch (djwork/batches/cluster_accounting.py), pushed by the leader."""
        try:
            # Idempotent: each callback is pushed once by its name, each field cleared by its value.
            redis_layer.run(cluster_accounting.sweep, idempotent=True)
        except Exception as error:  # the next tick sweeps again; the periodic entries must not wait for it
            logger.error("djwork: the batch sweep failed: %s", error)

    def _claim(self, calls: list[tuple[Entry, claims.ClaimCall]]) -> None:
        # The running lock (the call's last key) is the cluster's, in the state's slot: taken in the same step.
        script_calls = [((call.keys[0], keys.cluster_periodic_history(entry.id), call.keys[4]), call.args)
                        for entry, call in calls]
        # Replayable: a claim that already landed answers "done" the second time.
        replies = redis_layer.run(lambda conn: evaluate_each(conn, "periodic_claim_pending", script_calls,
                                                             raise_on_error=False), idempotent=True)
        for (entry, call), reply in zip(calls, replies, strict=True):
            if isinstance(reply, Exception):
                logger.error("djwork periodic: claim of entry %s failed: %s", entry.id, reply)
                continue
            self._report(entry, call, *claims.status_of(reply))

    def push_pending(self) -> int:
        """Steps 2 and 3 for every entry's pending jobs (this tick's claims, or those a crash cut short)."""
        states = [keys.periodic_state(entry.id) for entry, _job in self.entries()]
        if not states:
            return 0

        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for state in states:
                pipe.hgetall(state)
            return pipe.execute(raise_on_error=False)

        pending = []  # (state, field, jid, queue, payload), oldest slot first: a catch-up's jobs in slot order
        for state, fields in zip(states, redis_layer.run(read, idempotent=True), strict=True):
            if isinstance(fields, Exception):
                continue
            for name, value in fields.items():
                name = _text(name)
                if name.startswith(PENDING_PREFIX):
                    _prefix, slot, jid = name.split(":", 2)
                    queue, _newline, payload = _text(value).partition("\n")
                    pending.append((int(slot), state, name, jid, queue, payload))
        if not pending:
            return 0
        pending.sort()
        now = repr(time.time())
        pushes = [((keys.pushed(queue), keys.queue(queue)), (periodic_move(jid), payload, now, keys.PUSHED_HORIZON))
                  for _slot, _state, _name, jid, queue, payload in pending]
        # Idempotent: push_once pushes a jid once; the HDEL and the SADD repeat harmlessly.
        replies = redis_layer.run(lambda conn: evaluate_each(conn, "push_once", pushes, raise_on_error=False),
                                  idempotent=True)
        pushed = []
        for (_slot, state, name, jid, queue, _payload), reply in zip(pending, replies, strict=True):
            if isinstance(reply, Exception):  # still pending: the next tick tries again
                logger.error("djwork periodic: could not push job %s onto queue %s: %s", jid, queue, reply)
            else:
                pushed.append((state, name, queue))

        def clear(conn: Any) -> None:
            pipe = conn.pipeline(transaction=False)
            for state, name, _queue in pushed:
                pipe.hdel(state, name)
            pipe.sadd(keys.QUEUES, *{queue for _state, _name, queue in pushed})
            pipe.execute()

        if pushed:
            redis_layer.run(clear, idempotent=True)
        return len(pushed)


def periodic_move(jid: str) -> str:
    """The push dedupe's name of a periodic run's push: the leader's tick and the API's run-now name it alike."""
    return f"periodic:{jid}"


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value
