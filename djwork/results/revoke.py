"""``djwork.revoke(jid)``: stop a job that has not run, and ask a running one to stop (docs/celery.md).

One Lua step (lua/revoke.lua) flags the jid in ``djwork:revoked`` for
RESULT_TTL seconds, removes the job from `schedule`, `retry` and its queue
(the queue named by ``queue=``, else every queue in `queues`; a bounded
search), releases its unique lock, counts it as died in its batch and records
REVOKED. A job fetched despite the flag (the revoke landed while it was on its
way to a worker) is dropped by the fetch, not run; a running job is not
stopped: it can look at ``self.request.is_revoked()`` (or ``djwork.revoked(jid)``)
and return early. ``terminate=True`` is refused: see ``TerminateNotSupported``.
Each job removed sends ``task_revoked`` here, in the caller (djwork/results/revoke_events.py).
"""

from __future__ import annotations

from typing import Any

from djwork import redis as redis_layer
from djwork.options import check_jid
from djwork.redis import keys, lanes, scripts
from djwork.redis.cluster import is_cluster
from djwork.results import record as result_record
from djwork.results import revoke_events
from djwork.results.cluster_revoke import revoke_steps
from djwork.results.revoke_flag import revoked
from djwork.settings.conf import Config, get_config

# Entries looked at per sorted set or queue list: a revoke blocks Redis while it searches
# (about 0.1-0.3 s for 100,000 entries); a job beyond the bound is still stopped at fetch.
SCAN_BOUND = 100_000

__all__ = ["SCAN_BOUND", "TerminateNotSupported", "revoke", "revoked"]


class TerminateNotSupported(NotImplementedError):
    """``revoke(terminate=True)``: djwork runs jobs on threads, and Python cannot kill a thread."""


TerminateNotSupported.__module__ = "djwork"


def revoke(jid: str, terminate: bool = False, signal: Any = None, queue: str | None = None) -> bool:
    """Revoke ``jid``; True when it was found waiting (queue, schedule, retry) and removed.

    False means it was not waiting there: it runs now (its flag asks it to stop), already ran, or is
    beyond the search bound or in a queue not searched (its flag stops it when fetched).
    """
    check_jid(jid, "revoke")
    if terminate or signal is not None:
        raise TerminateNotSupported(
            "djwork.revoke(terminate=True) is not supported: djwork runs jobs on threads, and a thread "
            "cannot be killed safely (it may hold locks, a database transaction or a Redis connection). "
            "Revoke without terminate, and have the job check self.request.is_revoked() (bind=True) "
            "or djwork.revoked(jid) and return early.")
    config = get_config()
    # A cluster splits the one step into single-slot ones (djwork/results/cluster_revoke.py).
    steps = revoke_steps if is_cluster(config) else _revoke_step

    def run(conn: Any) -> list[Any]:
        return steps(conn, jid, queue, config, SCAN_BOUND)

    # Replay-safe: a second run finds the job gone and the flag set, and REVOKED is kept.
    removed = redis_layer.run(run, idempotent=True)
    # Key, payload pairs. Sent after the step: a receiver sees the job gone and its record REVOKED.
    revoke_events.removed(removed[1::2])
    return bool(removed)


def _revoke_step(conn: Any, jid: str, queue: str | None, config: Config, bound: int) -> list[Any]:
    """lua/revoke.lua: the whole revoke in one step, on one server."""
    if queue is not None:
        names = [queue]
    else:
        names = sorted(name.decode() if isinstance(name, bytes) else name for name in conn.smembers(keys.QUEUES))
    # A job with a priority waits in one of its queue's registered lanes (docs/priority.md).
    pipe = conn.pipeline(transaction=False)
    for name in names:
        pipe.smembers(keys.lanes(name))
    registered = pipe.execute(raise_on_error=False)
    lane_keys = [lanes.list_key(name, lane) for name, members in zip(names, registered, strict=True)
                 for lane in lanes.registered(members)]
    script_keys = [keys.REVOKED, keys.result(jid), keys.SCHEDULE, keys.RETRY, keys.ORPHAN_COUNTS,
                   keys.RESULT_WAITERS, *(keys.queue(name) for name in names), *lane_keys]
    spec = result_record.revoked_spec(f"job {jid} was revoked", config)
    return scripts.evaluate(conn, "revoke", script_keys, [jid, config.result_ttl, spec, bound])
