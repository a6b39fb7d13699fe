"""The running lock of a no-overlap entry, as the worker's job state changes carry it.

A no-overlap entry's claim sets ``djwork:periodic-running:<id>`` to the jid it
pushes (PX ``lock_ttl``) and skips its slots while the key exists. The lock
lives with the job: the payload lists it in ``djwork_locks``
(djwork/job_locks.py), so the worker releases it in the same Lua step as the
ack or the death that ends the job, and keeps it while the job waits in
``retry`` or is pushed back to its queue. Every release compares the jid (a
lock that lapsed and went to the next run must survive the late release of
the run before it). The payload also says how long the lock is held::

    "djwork_periodic": {"entry": "<id>", "slot": 1767225600.0,
                        "lock": "djwork:periodic-running:<id>", "lock_ttl": 86400.0},
    "djwork_locks": ["djwork:periodic-running:<id>"]

This module reads that field, and ``retake`` renews the locks of jobs that go
on (``lua/periodic_retake.lua``: for a retry's wait, or after orphan
recovery). Releases ride the Lua steps that end a job; an operator's
release by hand (djwork.api.Periodic) runs ``lua/periodic_release.lua``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from djwork import keys, scripts
from djwork import redis as redis_layer
from djwork.payload import PayloadError, loads

logger = logging.getLogger("djwork.periodic")

MARKER = "djwork_periodic"
RELEASE_SCRIPT = "periodic_release"
RETAKE_SCRIPT = "periodic_retake"
DEFAULT_TTL_MS = 24 * 3600 * 1000


def _marker(payload: Mapping[str, Any] | str | bytes) -> Mapping[str, Any] | None:
    if isinstance(payload, (str, bytes)):
        # Only payloads that name a lock are parsed: every ack would pay for it otherwise.
        needle = keys.PERIODIC_LOCK_PREFIX
        if (needle.encode() if isinstance(payload, bytes) else needle) not in payload:
            return None
        try:
            payload = loads(payload)
        except PayloadError:
            return None
    marker = payload.get(MARKER)
    return marker if isinstance(marker, Mapping) else None


def running_lock_of(payload: Mapping[str, Any] | str | bytes) -> str | None:
    """The running-lock key a job holds (a no-overlap entry's run), or None; a raw payload is parsed only if needed."""
    marker = _marker(payload)
    lock = marker.get("lock") if marker else None
    return lock if isinstance(lock, str) and lock.startswith(keys.PERIODIC_LOCK_PREFIX) else None


def lock_ttl_ms_of(payload: Mapping[str, Any] | str | bytes) -> int:
    """The lock's TTL in ms, as the entry configured it when the job was pushed."""
    marker = _marker(payload)
    ttl = marker.get("lock_ttl") if marker else None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl <= 0:
        return DEFAULT_TTL_MS
    return int(ttl * 1000)


def jid_of(payload: Mapping[str, Any] | str | bytes) -> str:
    if isinstance(payload, (str, bytes)):
        try:
            payload = loads(payload)
        except PayloadError:
            return ""
    jid = payload.get("jid")
    return jid if isinstance(jid, str) else ""


def retake(payloads: Iterable[Mapping[str, Any] | str | bytes], extra_ms: int = 0) -> dict[str, str]:
    """Retake the lock of each payload that holds one, with its TTL plus ``extra_ms``; one script call.

    For a job pushed back (orphan recovery, shutdown requeue) ``extra_ms`` is 0;
    for one filed in ``retry`` it is the wait until the retry. Returns
    lock -> the jid holding it instead, for each lock another run holds (logged).
    Safe to replay: a lock retaken already is retaken again with the same jid.
    """
    script_keys: list[str] = []
    args: list[str] = []
    for payload in payloads:
        lock = running_lock_of(payload)
        jid = jid_of(payload) if lock else ""
        if lock and jid:
            script_keys.append(lock)
            args += [jid, str(lock_ttl_ms_of(payload) + max(0, int(extra_ms)))]
    if not script_keys:
        return {}
    replies = redis_layer.run(lambda conn: scripts.evaluate(conn, RETAKE_SCRIPT, script_keys, args), idempotent=True)
    taken_by_others = {}
    for lock, reply in zip(script_keys, replies, strict=True):
        if reply != 1:
            holder = reply.decode() if isinstance(reply, bytes) else str(reply)
            taken_by_others[lock] = holder
            logger.warning("djwork periodic: %s is held by %s, not by the run pushed back: the two may overlap "
                           "(the lock lapsed before its run came back: raise the entry's lock_ttl)", lock, holder)
    return taken_by_others
