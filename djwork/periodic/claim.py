"""The calls of ``lua/periodic_claim.lua``: one slot of one entry, decided and (when it fires) pushed.

A fired slot's job gets a jid derived from (entry id, slot), so the same
slot is the same job wherever and however often it is computed. The payload
is built here, once per claim, as ``push`` would build it (the job's options,
client middleware); the script adds ``enqueued_at`` on Redis's clock. Every
periodic job carries ``djwork_periodic``: its entry and slot, and on a
no-overlap entry its running lock and the lock's TTL. That lock is also
listed in the job's ``djwork_locks`` (djwork/job_locks.py), which the worker
releases, owner-checked, in the Lua step of the ack or the death that ends
the job (``djwork.periodic.locks`` has the retake).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from djwork import client, job_locks
from djwork.middleware import run_client_chain
from djwork.payload import dumps, new_jid
from djwork.periodic.clock import Clock
from djwork.periodic.entries import Entry
from djwork.periodic.plan import Claim
from djwork.redis import key_layout, keys, scripts
from djwork.redis.cluster import is_cluster
from djwork.settings.conf import Config

SCRIPT = "periodic_claim"
HISTORY_KEPT = 100
MARKER = "djwork_periodic"  # the payload field: {"entry", "slot"[, "lock", "lock_ttl"]}


@dataclass(frozen=True)
class ClaimCall:
    """One script call: the claim it carries out, its keys and arguments, and the jid it would push."""

    claim: Claim
    keys: list[str]
    args: list[Any]
    jid: str


def slot_jid(entry_id: str, slot_ms: int) -> str:
    """24 hex characters, like any jid, the same for the same (entry, slot) everywhere."""
    return hashlib.sha1(f"djwork-periodic\n{entry_id}\n{slot_ms}".encode()).hexdigest()[:24]


def job_queue(entry: Entry, job: Any) -> str:
    return entry.queue or getattr(job, "queue", None) or "default"


def lock_ttl_ms(entry: Entry, clock: Clock) -> int:
    return max(1, int(clock.real_duration(entry.lock_ttl) * 1000))


def payload_json(entry: Entry, job: Any, jid: str, slot_ms: int | None, config: Config,
                 clock: Clock) -> str | None:
    """The job's JSON without ``enqueued_at``; None when client middleware stopped the push."""
    queue = job_queue(entry, job)
    payload, _at = job.build_payload(list(entry.args), dict(entry.kwargs), queue=queue, jid=jid)
    marker: dict[str, Any] = {"entry": entry.id}
    if slot_ms is not None:
        marker["slot"] = slot_ms / 1000
    if not entry.overlap:
        lock = key_layout.layout(is_cluster(config)).periodic_lock(entry.id)
        marker["lock"] = lock
        marker["lock_ttl"] = lock_ttl_ms(entry, clock) / 1000
        # Named among the job's locks, the lock is released by the worker in the step that ends the job.
        owned = payload.get(job_locks.FIELD)
        payload[job_locks.FIELD] = [*(owned if isinstance(owned, list) else []), lock]
    payload[MARKER] = marker
    chain = client.client_chain(config)
    if chain:
        payload = run_client_chain(chain, payload, queue)
        if payload is None:
            return None
    payload.pop("enqueued_at", None)  # stamped by the script, on Redis's clock
    payload.pop("at", None)
    return dumps(payload)


def call(entry: Entry, job: Any, claim: Claim, config: Config, clock: Clock) -> ClaimCall:
    """The script call for ``claim``; a slot whose push client middleware stopped is skipped instead."""
    jid = slot_jid(entry.id, claim.slot) if claim.mode == "fire" else ""
    payload = ""
    if claim.mode == "fire":
        built = payload_json(entry, job, jid, claim.slot, config, clock)
        if built is None:
            # Decided all the same: left undecided, the slot would be asked about on every tick.
            return _call(entry, job, Claim("skip", claim.slot, claim.skipped, claim.first_skipped, "middleware"),
                         "", "", config, clock)
        payload = built
    return _call(entry, job, claim, payload, jid, config, clock)


def run_now_call(entry: Entry, job: Any, config: Config, clock: Clock) -> ClaimCall | None:
    """A run outside the schedule: a fresh jid, no slot, no watermark; refused while a no-overlap run holds."""
    jid = new_jid()
    payload = payload_json(entry, job, jid, None, config, clock)
    if payload is None:
        return None
    return _call(entry, job, Claim("now", 0), payload, jid, config, clock)


def _call(entry: Entry, job: Any, claim: Claim, payload: str, jid: str, config: Config, clock: Clock) -> ClaimCall:
    queue = job_queue(entry, job)
    script_keys = [keys.periodic_state(entry.id), keys.periodic_history(entry.id), keys.queue(queue), keys.QUEUES,
                   key_layout.layout(is_cluster(config)).periodic_lock(entry.id)]
    args = [claim.mode, str(claim.slot), str(claim.skipped), str(claim.first_skipped), claim.reason or "missed",
            payload, jid, queue, "" if entry.overlap else str(lock_ttl_ms(entry, clock)), *clock.lua_args(),
            str(HISTORY_KEPT)]
    return ClaimCall(claim, script_keys, args, jid)


def queue_call(pipe: Any, claim_call: ClaimCall) -> None:
    scripts.queue_evaluate(pipe, SCRIPT, claim_call.keys, claim_call.args)


def status_of(reply: Any) -> tuple[str, str]:
    """(status, watermark or holder) from a script reply."""
    status, value = reply[0], reply[1]
    return (status.decode() if isinstance(status, bytes) else str(status),
            value.decode() if isinstance(value, bytes) else str(value))
