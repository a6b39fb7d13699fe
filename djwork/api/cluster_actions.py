"""The API's and dashboard's clears, lock releases and periodic run-now on a Redis Cluster, as single-slot steps.

On one server a clear sets the key aside and drops the queue from `queues` in one script
(``lua/set_aside.lua``), then releases each cleared job's locks in one script per job
(``lua/release_locks.lua``, every lock a slot of its own on a cluster); the Locks page's release is that
same script; a run-now is one ``lua/periodic_claim.lua`` call over the entry's state, its history and the
queue. On a cluster those keys are in different slots, so each is steps, in the order that loses nothing
(what a crash between leaves is said at each). The callers pair one server's call with these through
``by_mode`` (djwork/api/cluster_entries.py), and the client's mode picks one (docs/cluster.md).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from djwork import job_locks
from djwork.api.cluster_entries import by_mode
from djwork.redis import keys, scripts
from djwork.redis.key_layout import CLUSTER
from djwork.worker.cluster import locks as cluster_locks
from djwork.worker.cluster.periodic import PENDING_PREFIX, periodic_move


@dataclass(frozen=True)
class SetAsideSteps:
    """``set_aside.lua`` on a cluster: 1. the key renamed to its copy (the copy carries the key as its hash
    tag, so both are in one slot); 2. the queue's name dropped from `queues` (its own slot).

    A crash between leaves an empty queue listed, which the next listing prunes (as a queue whose push
    failed). Returns how many entries were set aside.
    """

    key: str
    aside: str
    queue_name: str = ""

    def evaluate(self, conn: Any) -> int:
        # KEYS[3] (`queues`) is read only when ARGV[1] names a queue: the copy stands in, a key of this slot.
        size = int(scripts.evaluate(conn, "set_aside", [self.key, self.aside, self.aside], [""]))
        if self.queue_name:
            conn.srem(keys.QUEUES, self.queue_name)
        return size


@dataclass(frozen=True)
class ReleaseEachSteps:
    """``release_locks.lua`` for each of ``owned`` (jid, lock keys) on a cluster: one owner-checked
    ``lua/lock_release.lua`` call per lock, sent together (one round trip per node).

    Each call stands alone: a crash part way leaves the rest held, to expire by their TTL; a repeat releases
    nothing twice (owner-checked). A cleared job's batch tie is left out (a batch is refused on a cluster).
    Returns the number released.
    """

    owned: Sequence[tuple[str, Sequence[str]]]

    def evaluate(self, conn: Any) -> int:
        return sum(cluster_locks.release(conn, list(locks), jid) for jid, locks in self.owned)


def release_each(owned: Sequence[tuple[str, Sequence[str]]]) -> Any:
    """One server's pipeline of ``release_locks.lua`` calls; the same release on a cluster as steps."""
    return by_mode(_ReleaseEachScript(owned), ReleaseEachSteps(owned))


@dataclass(frozen=True)
class _ReleaseEachScript:
    owned: Sequence[tuple[str, Sequence[str]]]

    def evaluate(self, conn: Any) -> int:
        pipe = conn.pipeline(transaction=False)
        for jid, locks in self.owned:
            scripts.queue_evaluate(pipe, "release_locks", [], [jid, job_locks.encode(list(locks))])
        return sum(int(reply) for reply in scripts.execute(pipe))


@dataclass(frozen=True)
class RunNowSteps:
    """``periodic_claim.lua``'s run-now on a cluster: 1. ``lua/periodic_claim_pending.lua`` (the entry's slot:
    refused while a no-overlap run holds the lock, else the lock taken, the run counted and recorded as
    pending); 2. ``push_once`` of it onto its queue (the queue's slot), the move named by its jid as the
    leader names it; 3. ``HDEL`` of the pending field, ``SADD queues``.

    After 1 a crash leaves the run pending: the leader's next tick pushes it (it reads every configured
    entry's pending runs), once by its jid. After 2 the next tick's push is a no-op and it clears the field.
    Returns the claim's reply, as the script's.
    """

    entry_id: str
    args: Sequence[Any]
    jid: str

    def evaluate(self, conn: Any) -> Any:
        state = keys.periodic_state(self.entry_id)
        reply = scripts.evaluate(conn, "periodic_claim_pending",
                                 [state, CLUSTER.periodic_history(self.entry_id), CLUSTER.periodic_lock(self.entry_id)],
                                 list(self.args))
        status = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
        if status != "fired":
            return reply
        field = f"{PENDING_PREFIX}{self.args[1]}:{self.jid}"
        pending = conn.hget(state, field)
        if pending is None:  # the leader's tick pushed and cleared it already
            return reply
        queue, _newline, payload = pending.decode().partition("\n")
        scripts.evaluate(conn, "push_once", [keys.pushed(queue), keys.queue(queue)],
                         [periodic_move(self.jid), payload, repr(time.time()), keys.PUSHED_HORIZON])
        conn.hdel(state, field)
        conn.sadd(keys.QUEUES, queue)
        return reply
