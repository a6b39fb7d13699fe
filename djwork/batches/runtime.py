"""The worker's side of batches: skip the jobs of an invalidated batch, keep results for batches that do.

Both facts live in the batch's hash; they are read once per batch per
second per process (``FLAGS_TTL``), not once per job: a batch invalidated
now stops its jobs from starting within that second. A kept result rides
on the job's ack and is written by the ack's own Lua step before it counts
the job, so no ack counts a job as succeeded without its result, and by the
time the last ack fires ``success`` every result is in place
(lua/batch_lib.lua splices them into the callback).
"""

from __future__ import annotations

import logging
import threading
import time
from contextvars import ContextVar, Token
from typing import Any, NamedTuple

from djwork import job_locks
from djwork import redis as redis_layer
from djwork.redis import keys
from djwork.results import record as result_record

logger = logging.getLogger("djwork")

FLAGS_TTL = 1.0  # seconds a batch's flags are trusted in this process
MAX_CACHED = 4096


class Flags(NamedTuple):
    invalidated: bool
    keeps_results: bool


_cache: dict[str, tuple[float, Flags]] = {}
_lock = threading.Lock()
# The bid of the batch job this thread runs: a batch made inside it is its batch's child (batch.py).
_running: ContextVar[str | None] = ContextVar("djwork_running_batch", default=None)


def enter(payload: dict[str, Any]) -> Token[str | None]:
    """Before a job runs: remember its batch, so batches it opens become children of it."""
    return _running.set(bid_of(payload))


def leave(token: Token[str | None]) -> None:
    _running.reset(token)


def running_bid() -> str | None:
    """The batch of the job running in this thread or task, if it is in one."""
    return _running.get()


def bid_of(payload: dict[str, Any]) -> str | None:
    bid = payload.get("bid")
    return bid if isinstance(bid, str) and bid else None


def flags(bid: str) -> Flags:
    now = time.monotonic()
    cached = _cache.get(bid)
    if cached is not None and cached[0] > now:
        return cached[1]
    invalidated, keeps = redis_layer.run(
        lambda conn: conn.hmget(keys.batch(bid), "invalidated", "keep_results"), idempotent=True)
    found = Flags(invalidated is not None, keeps is not None)
    with _lock:
        if len(_cache) >= MAX_CACHED:
            _cache.clear()
        _cache[bid] = (now + FLAGS_TTL, found)
    return found


def invalidated(payload: dict[str, Any]) -> bool:
    """Whether this job's batch was invalidated (then the job is acked unrun). False when unknown."""
    bid = bid_of(payload)
    if bid is None:
        return False
    try:
        return flags(bid).invalidated
    except Exception as error:  # Redis away: run the job (at-least-once) rather than drop it
        logger.warning("djwork: could not read batch %s: %s", bid, error)
        return False


def keep_result(ties: str, payload: dict[str, Any], result: Any) -> str:
    """The job's ties (its ack's argument) carrying its return value, when its batch keeps results.

    Kept by the ack's own Lua step (lua/batch_lib.lua), not by a write of its own before it: that
    write failed while Redis was away, only logged, and the ack that followed counted the job as
    succeeded with no result, so the next step of a chain received ``null``.
    """
    bid = bid_of(payload)
    if bid is None or keys.batch(bid) not in ties.split(job_locks.SEPARATOR):
        return ties
    try:
        keeps = flags(bid).keeps_results
    except Exception:  # Redis away: carried anyway; the ack's step reads the flag itself
        keeps = True
    if not keeps:
        return ties
    try:
        # The JSON the job's own record would hold (a signature or a canvas returned as Celery's dict, a ref
        # as Celery's tuple form), so the next step gets what AsyncResult(id).get() would give.
        value = result_record.to_json(result)
    except TypeError:
        value = "null"
    return job_locks.with_result(ties, keys.batch(bid), value)
