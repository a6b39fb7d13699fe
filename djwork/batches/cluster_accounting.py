"""A batch's accounting on a Redis Cluster: single-slot steps in an order that loses nothing (docs/cluster.md).

On one server a job's end counts it in its batch, fires the batch's callbacks and tells its parent batch in
the same Lua step (lua/batch_lib.lua). On a cluster the batch's keys share its slot (``{b-<bid>}``), while
the callback's queue and the parent batch lie in others, so a member's end is these steps:

0. the batch marked in ``djwork:batch-sweep`` (its own slot), before anything can be left pending;
1. ``lua/batch_account.lua`` in the batch's slot: the membership accounting and the once-only claim of each
   event (``HSETNX <event>_at``), the fired callback kept in the hash as a pending field, and a child's
   outcome for its parent likewise;
2. each pending callback pushed with ``lua/push_once.lua`` in its queue's slot, the move named by the batch
   and the field, or added to ``schedule`` (a ZADD of the same member);
3. the pushed callbacks' fields cleared (``lua/batch_clear.lua``, compare-and-delete);
4. the parent told, which is steps 1 to 5 for the parent's batch with the member ``b-<bid>``;
5. the told outcome's field cleared.

A crash after 1 leaves the fields pending: the next step 1 on that batch returns them (any member's end),
or the leader's sweep (``sweep``, every tick) does, and they are pushed then, once, since the queue's dedupe
remembers the move for an hour. After 2 the push is a no-op; after 4 the parent counts the child once
(membership). A mark is removed by the sweep only when its batch has nothing pending and nobody marked it
again since (lua/batch_unmark.lua compares the score).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from djwork import job_locks
from djwork import redis as redis_layer
from djwork.redis import keys
from djwork.redis.key_layout import CLUSTER_BATCH_SWEEP
from djwork.worker.cluster.calls import evaluate_each

logger = logging.getLogger("djwork.worker")  # a member's end is the worker's step (the API's kill aside)

CALLBACK_FIELD = "pcb-"  # a fired callback not yet pushed (lua/batch_account.lua)
TELL_FIELD = "tell-"  # a child's outcome not yet told to its parent
SWEEP_AGE = 30.0  # seconds a mark waits before the sweep looks: the job end that made it finishes its steps first
SWEEP_PAGE = 500  # marks a sweep reads per tick
MARK_TTL = 31 * 86400  # seconds: a mark no member's end renewed for longer names expired keys (30 days' TTL)
MAX_DEPTH = 64  # parents followed up from one end (nesting deeper than this is a cycle, not a design)

End = tuple[str, str, str, str, str]  # (bid, member, outcome ok|retrying|died, who ended ('=': member), value)


def batch_ends(encoded_ties: str, jid: str, outcome: str) -> list[End]:
    """The batch ends of one job's ties (``job_locks.encode``d, a batch's line maybe carrying the kept result)."""
    ends = []
    for line in encoded_ties.split(job_locks.SEPARATOR) if encoded_ties and jid else ():
        key, _mark, value = line.partition(job_locks.RESULT_MARK)
        if job_locks.is_batch(key):
            ends.append((key[len(keys.BATCH_PREFIX):], jid, outcome, "=", value if outcome == "ok" else ""))
    return ends


def end_members(ends: Sequence[End]) -> None:
    """Count ``ends`` in their batches and carry out what that fired (steps 0 to 5). Replayable: every step is."""
    if ends:
        redis_layer.run(lambda conn: end_on(conn, ends), idempotent=True)


def end_on(conn: Any, ends: Sequence[End], depth: int = 0) -> bool:
    """Steps 0 to 5 for ``ends``; whether every batch counted its end and nothing was left pending."""
    if not ends or depth > MAX_DEPTH:
        return not ends
    mark(conn, {bid for bid, *_rest in ends})
    replies = evaluate_each(conn, "batch_account", [((keys.batch(bid),), ("end", member, outcome, by, value))
                                                    for bid, member, outcome, by, value in ends], raise_on_error=False)
    whole = True
    for (bid, member, _outcome, _by, _value), reply in zip(ends, replies, strict=True):
        if isinstance(reply, Exception):
            # Not counted: a batch whose keys are broken must not fail the steps of the jobs beside it.
            logger.warning("djwork: batch b-%s not told of %s: %s", bid, member, reply)
            whole = False
            continue
        whole = settle(conn, bid, reply, depth) and whole
    return whole


def check(conn: Any, bid: str) -> None:
    """A batch's events decided now (a batch just made with no member), and what they fired carried out."""
    mark(conn, {bid})
    settle(conn, bid, evaluate_each(conn, "batch_account", [((keys.batch(bid),), ("check",))])[0])


def settle_now(conn: Any, bid: str) -> None:
    """What batch ``bid`` holds pending carried out now (a canvas's join just kept its new first jobs there)."""
    settle(conn, bid, evaluate_each(conn, "batch_account", [((keys.batch(bid),), ("pending",))])[0])


def mark(conn: Any, bids: set[str]) -> None:
    """Step 0, one round trip in the mark's slot: a batch left with no leader for a month is forgotten."""
    now = time.time()
    pipe = conn.pipeline(transaction=False)
    pipe.zadd(CLUSTER_BATCH_SWEEP, dict.fromkeys(bids, now))
    pipe.zremrangebyscore(CLUSTER_BATCH_SWEEP, "-inf", now - MARK_TTL)
    pipe.execute()


def settle(conn: Any, bid: str, pending: Sequence[Any], depth: int = 0) -> bool:
    """Steps 2 to 5 for ``pending`` (batch_account's reply); whether nothing is left pending."""
    fields = [(_text(pending[index]), _text(pending[index + 1])) for index in range(0, len(pending), 2)]
    # In the order they fired (the field's last part counts them): a hash's fields come in no order, and one
    # server pushes complete before success before settled when one end fires them all.
    callbacks = sorted(((name, value) for name, value in fields if name.startswith(CALLBACK_FIELD)),
                       key=lambda field: int(field[0].rsplit("-", 1)[1]))
    tells = [(name, value) for name, value in fields if name.startswith(TELL_FIELD)]
    done = _push(conn, bid, callbacks)  # every one: pushed, or refused by Redis and its error kept
    if done:
        evaluate_each(conn, "batch_clear", [((keys.batch(bid),), [part for field in done for part in field])])
    if tells:
        parents = []
        for name, value in tells:
            parent, _tab, kept = value.partition("\t")
            parents.append((parent, keys.batch(bid), name[len(TELL_FIELD):], "=", kept))
        if not end_on(conn, parents, depth + 1):
            return False  # the tells stay: the next check or sweep tells the parent again (counted once)
        evaluate_each(conn, "batch_clear", [((keys.batch(bid),), [part for field in tells for part in field])])
    return True


def _push(conn: Any, bid: str, callbacks: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Step 2: each pending callback pushed once; the fields done with (pushed, or refused by Redis for good)."""
    queued = [(name, value, *value.split("\t", 2)[1:]) for name, value in callbacks if value.startswith("q\t")]
    scheduled = [(name, value, *value.split("\t", 2)[1:]) for name, value in callbacks if value.startswith("s\t")]
    now = repr(time.time())
    replies = evaluate_each(conn, "push_once", [
        ((keys.pushed(queue), keys.queue(queue)), (f"batch:{bid}:{name}", payload, now, keys.PUSHED_HORIZON))
        for name, _value, queue, payload in queued], raise_on_error=False)
    done = []
    for (name, value, _queue, _payload), reply in zip(queued, replies, strict=True):
        if isinstance(reply, Exception):
            # Refused by Redis (the queue of the wrong type): kept where the status shows it, as one server does;
            # the claim stands (a second push could run it twice).
            conn.hset(keys.batch(bid), f"{name[len(CALLBACK_FIELD):].rsplit('-', 1)[0]}_error", str(reply))
        done.append((name, value))
    if queued:
        conn.sadd(keys.QUEUES, *{queue for _name, _value, queue, _payload in queued})
    for name, value, score, payload in scheduled:
        conn.zadd(keys.SCHEDULE, {payload: float(score)})  # the same member again: one entry
        done.append((name, value))
    return done


def sweep(conn: Any, older_than: float = SWEEP_AGE) -> int:
    """The leader's pass: callbacks and parents' tells a crash left pending, carried out; marks of settled
    batches removed. Returns the batches that had something pending."""
    marks = conn.zrangebyscore(CLUSTER_BATCH_SWEEP, "-inf", time.time() - older_than, start=0, num=SWEEP_PAGE,
                               withscores=True)
    if not marks:
        return 0
    bids = [_text(bid) for bid, _score in marks]
    replies = evaluate_each(conn, "batch_account", [((keys.batch(bid),), ("pending",)) for bid in bids],
                            raise_on_error=False)
    found = 0
    settled = []
    for (bid, score), reply in zip(zip(bids, (score for _bid, score in marks), strict=True), replies, strict=True):
        if isinstance(reply, Exception):
            logger.warning("djwork: batch b-%s not swept: %s", bid, reply)
            continue
        found += bool(reply)
        if settle(conn, bid, reply):
            settled.extend((bid, repr(score)))
    if settled:
        evaluate_each(conn, "batch_unmark", [((CLUSTER_BATCH_SWEEP,), settled)])
    return found


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
