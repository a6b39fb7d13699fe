"""Filing a failed job on a Redis Cluster: into `retry` or `dead` first, off its in-progress list after.

On one server ``lua/fail.lua`` does both in one step. On a cluster `retry` and `dead` live in slots of
their own and the in-progress list in its queue's, so the filing is two single-slot steps in that
order (``lua/file_entry.lua``, then ``lua/drop_copy.lua``). A crash between leaves the job filed and
still in progress: orphan recovery pushes it back and it may run once more (a failing job is retried
anyway), and its entry in `retry` is then a second try of the same jid. Never lost: nothing leaves a
list before it is somewhere else. Each step repeats harmlessly (a ZADD of the same member, an LREM of
what is gone), so the whole filing runs under the replay policy as ``idempotent``, as on one server.

A job that stores a result has it written first, in the record's slot
(djwork/worker/cluster/results.py): a crash after it leaves the record written and the job still in
progress, to run again and rewrite it. A filing that ends the job (dead, drop) releases its locks last,
one owner-checked call per lock (djwork/worker/cluster/locks.py): a crash before leaves them to expire
by their TTL; a retry keeps them, as on one server. Its batch is told (retrying, or died for dead and a drop)
after the filing and before the job leaves its list (djwork/batches/cluster_accounting.py): a crash between runs it
again, and membership counts it once. The revoked check
(djwork:revoked, another slot) is left out: a revoked job that fails is filed for its retry, and dropped
when the retry is fetched (djwork/worker/cluster/revoked.py).
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from djwork import dead, job_locks
from djwork.batches import cluster_accounting
from djwork.payload import dumps
from djwork.redis import keys, scripts
from djwork.redis.key_layout import CLUSTER_PILL_BURIALS, PILL_BURIALS_HORIZON
from djwork.settings.conf import Config
from djwork.worker.cluster import locks as cluster_locks
from djwork.worker.cluster.results import store_on


class FilingSteps:
    """The two steps of one filing, run in order by ``evaluate(conn)`` (the interface of ``dead.ScriptCall``)."""

    def __init__(self, target_key: str | None, entry: list[Any], source_key: str, orphan_counts: str,
                 raw: Any, jid: str, from_in_progress: bool, result_spec: str = "", locks: str = "",
                 burial: str = "", batches: tuple[cluster_accounting.End, ...] = ()) -> None:
        self.target_key = target_key
        self.entry = entry
        self.source_key = source_key
        self.orphan_counts = orphan_counts
        self.raw = raw
        self.jid = jid
        self.from_in_progress = from_in_progress
        self.result_spec = result_spec
        self.locks = locks  # encoded; released after the job left its list ('' for a retry, which keeps them)
        self.burial = burial  # a poison pill's burial name: filed in dead once by it (lua/file_once.lua)
        self.batches = batches  # the job's batch ends, told between the filing and the drop

    def evaluate(self, conn: Any) -> int:
        if self.result_spec:
            store_on(conn, [(self.jid, self.result_spec)])
        if self.burial:
            scripts.evaluate(conn, "file_once", [keys.DEAD, keys.CLUSTER_DEAD_BYTES, CLUSTER_PILL_BURIALS],
                             [*self.entry, self.burial, repr(time.time()), PILL_BURIALS_HORIZON])
        elif self.target_key is not None:
            entry_keys = [self.target_key, keys.CLUSTER_DEAD_BYTES] if self.target_key == keys.DEAD else [
                self.target_key]
            scripts.evaluate(conn, "file_entry", entry_keys, self.entry)
        if self.batches:
            cluster_accounting.end_on(conn, self.batches)
        if self.from_in_progress:
            scripts.evaluate(conn, "drop_copy", [self.source_key, self.orphan_counts], [self.raw, self.jid])
        elif self.jid:
            conn.hdel(self.orphan_counts, self.jid)
        if self.locks:
            cluster_locks.release(conn, self.locks.split(job_locks.SEPARATOR), self.jid)
        return 1


def file_failure(source_key: str, raw: str | bytes, target: dead.FailureTarget, payload: dict[str, Any] | str,
                 score: float, jid: str = "", *, from_in_progress: bool = True, only_if_listed: bool = False,
                 config: Config | None = None, now: float | None = None, locks: str = "",
                 result: tuple[str, str] = ("", "")) -> FilingSteps:
    """``dead.file_failure`` for a cluster: the same arguments, the filing in two single-slot steps.

    ``only_if_listed`` (a poison pill's burial, which two reapers may both be handed) can't be checked
    against the list from dead's slot: the burial is named instead (the list and the copy on it), and filed
    in dead once by that name (lua/file_once.lua); each reaper still takes the copy off the list.
    """
    batches = tuple(cluster_accounting.batch_ends(locks, jid, "retrying" if target == "retry" else "died"))
    if target == "retry":
        locks = ""  # a job waiting for its retry keeps its locks, as fail.lua decides on one server
    result_spec = result[1] if result[0] and jid else ""
    parsed = keys.parse_in_progress(source_key)
    queue = parsed[1] if parsed else keys.queue_name(source_key)
    if target == "drop":
        return FilingSteps(None, [], source_key, keys.cluster_orphan_counts(queue), raw, jid, from_in_progress,
                           result_spec, locks, batches=batches)
    stored = payload if isinstance(payload, str) else dumps(payload)
    moment = time.time() if now is None else now
    trim = dead.dead_trim(config, moment) if target == "dead" else ["0", "0", "0"]
    target_key = keys.RETRY if target == "retry" else keys.DEAD
    burial = burial_name(source_key, raw) if only_if_listed and target == "dead" else ""
    return FilingSteps(target_key, [stored, repr(float(score)), *trim], source_key,
                       keys.cluster_orphan_counts(queue), raw, jid, from_in_progress, result_spec, locks, burial,
                       batches)


def burial_name(list_key: str, raw: str | bytes) -> str:
    """A poison pill's burial, named by its dead process's list and the copy on it: every reaper handed that
    copy names it alike, while a later burial of the same job (retried by hand, a pill again) comes from
    another process's list."""
    copy = raw.encode() if isinstance(raw, str) else bytes(raw)
    return hashlib.sha1(list_key.encode() + b"\n" + copy).hexdigest()


def reschedule(source_key: str, raw: str | bytes, payload: dict[str, Any], score: float, jid: str,
               from_in_progress: bool) -> FilingSteps:
    """``limits.reschedule_call`` on a cluster: a job a limiter refused, into `schedule` first, off its list after.

    The same two steps as a failure's filing (file_entry.lua in `schedule`'s slot, then drop_copy.lua in
    the queue's), so a crash between leaves the job both scheduled and in progress: orphan recovery pushes
    the in-progress copy back, and the job may run once more when the scheduled copy comes due (at least
    once); never lost. Its locks are kept, as a retry's are.
    """
    parsed = keys.parse_in_progress(source_key)
    queue = parsed[1] if parsed else keys.queue_name(source_key)
    return FilingSteps(keys.SCHEDULE, [dumps(payload), repr(float(score)), "0", "0", "0"], source_key,
                       keys.cluster_orphan_counts(queue), raw, jid, from_in_progress)
