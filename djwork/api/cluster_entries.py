"""The API's and dashboard's entry actions on a Redis Cluster, as single-slot steps (docs/cluster.md).

On one server "retry now" / "enqueue now" (``lua/promote.lua``), "kill" (``lua/move_entry.lua``) and
"delete" (``lua/remove_entry.lua``) are each one script over the entry's set, the queue or `dead`, and the
locks the job owns. On a cluster those keys are in different slots, so each action is steps, in the order
that loses nothing (what a crash between leaves is said at each). ``by_mode`` pairs one server's call with
the cluster's steps, and the mode of the client it is handed picks one: the callers build both, as they
built the one call before.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from djwork import dead, job_locks
from djwork.batches import cluster_accounting
from djwork.payload import dumps
from djwork.redis import keys, lanes, scripts
from djwork.redis.key_layout import CLUSTER, layout_of
from djwork.worker.cluster import locks as cluster_locks
from djwork.worker.cluster.promotion import move_name


@dataclass(frozen=True)
class ByMode:
    """One server's call and a cluster's steps for one action; ``evaluate(conn)`` runs the one ``conn`` needs."""

    single: Any
    cluster: Any

    def evaluate(self, conn: Any) -> Any:
        return (self.cluster if layout_of(conn).cluster else self.single).evaluate(conn)


def by_mode(single: Any, cluster: Any) -> ByMode:
    return ByMode(single, cluster)


def _present(conn: Any, key: str, kind: str, member: Any) -> bool:
    if kind == "zset":
        return conn.zscore(key, member) is not None
    return conn.lpos(key, member) is not None


def _remove(conn: Any, key: str, kind: str, member: Any) -> int:
    return int(conn.zrem(key, member) if kind == "zset" else conn.lrem(key, 1, member))


@dataclass(frozen=True)
class PromoteSteps:
    """``promote.lua`` on a cluster: 1. the unique lock taken again (its slot); 2. ``push_once`` onto the queue,
    the move named by the entry; 3. the entry removed and the queue listed.

    After 1 a crash leaves the lock held with no job: it expires by its TTL (a new copy is refused until
    then, never a duplicate let in). After 2 the job is queued and its entry still there: the action done
    again (or the poller, for a due `schedule`/`retry` entry) pushes nothing (the queue's dedupe names the
    move) and removes the entry. Returns as the script does: 1, 0 (the entry was gone) or the lock holder.
    """

    set_key: str
    member: Any
    payload: str
    queue: str
    lock: str | None = None
    jid: str = ""
    lock_ttl_ms: int = 0

    def evaluate(self, conn: Any) -> Any:
        if conn.zscore(self.set_key, self.member) is None:
            return 0
        if self.lock is not None:
            holder = conn.set(self.lock, self.jid, nx=True, px=self.lock_ttl_ms, get=True)
            if holder is not None and holder.decode() != self.jid:
                return holder
        member = self.member if isinstance(self.member, bytes) else self.member.encode()
        lane = lanes.lane_of_raw(self.payload)  # a prioritised job to its lane (docs/priority.md), in the slot
        scripts.evaluate(conn, "push_once", [keys.pushed(self.queue), lanes.list_key(self.queue, lane, CLUSTER),
                                             CLUSTER.lanes(self.queue)],
                         [move_name(self.set_key, member), self.payload, repr(time.time()), keys.PUSHED_HORIZON,
                          str(lane) if lane else ""])
        conn.zrem(self.set_key, self.member)
        conn.sadd(keys.QUEUES, self.queue)
        return 1


@dataclass(frozen=True)
class BurySteps:
    """``move_entry.lua`` on a cluster: 1. filed in `dead`, trimmed (``lua/file_entry.lua``, `dead`'s slot);
    2. its batch told it died (djwork/batches/cluster_accounting.py); 3. the entry removed (its slot); 4. the
    job's locks, one owner-checked call each.

    After 1 a crash leaves the job in `dead` and still in its set or list: killing it again files the same
    member (one entry) and removes it; a due `schedule`/`retry` entry may be promoted meanwhile and run
    (at least once). After 2 its locks expire by their TTL. Returns 1, or 0 when the entry was gone.
    """

    source_key: str
    kind: str
    member: Any
    buried: Any
    jid: str = ""
    locks: str = ""

    def evaluate(self, conn: Any) -> int:
        if not _present(conn, self.source_key, self.kind, self.member):
            return 0
        now = time.time()
        stored = self.buried if isinstance(self.buried, (str, bytes)) else dumps(self.buried)
        scripts.evaluate(conn, "file_entry", [keys.DEAD, keys.CLUSTER_DEAD_BYTES],
                         [stored, repr(now), *dead.dead_trim(None, now)])
        # Its batch told before the entry goes: a crash between leaves it where it may still run, and a success
        # then counts over the death (membership).
        cluster_accounting.end_on(conn, cluster_accounting.batch_ends(self.locks, self.jid, "died"))
        _remove(conn, self.source_key, self.kind, self.member)
        _release_locks(conn, self.locks, self.jid)
        return 1


@dataclass(frozen=True)
class RemoveSteps:
    """``remove_entry.lua`` on a cluster: 1. its batch told it died; 2. the entry removed (its slot); 3. its locks,
    one call each.

    The batch first, as a kill does: a crash after 1 leaves the entry where it may still run, and its success
    then counts over the death (membership); removed first, a crash left its batch waiting for it until the
    batch's keys expired. A crash after 2 leaves its locks held (they expire by their TTL). Returns 1, or 0 when
    it was gone.
    """

    key: str
    kind: str
    member: Any
    jid: str = ""
    locks: str = ""

    def evaluate(self, conn: Any) -> int:
        if not _present(conn, self.key, self.kind, self.member):
            return 0
        cluster_accounting.end_on(conn, cluster_accounting.batch_ends(self.locks, self.jid, "died"))
        if not _remove(conn, self.key, self.kind, self.member):
            return 0  # taken meanwhile (promoted, run): its own end counts over the death told above
        _release_locks(conn, self.locks, self.jid)
        return 1


def _release_locks(conn: Any, locks: str, jid: str) -> None:
    """The job's locks (encoded, as its payload names them), one owner-checked call each: the last step."""
    if locks:
        cluster_locks.release(conn, locks.split(job_locks.SEPARATOR), jid)
