"""Locks bound to a job's life: released in the same Lua step as the state change that ends the job.

A job carries the keys of the locks it owns in its payload (``djwork_locks``,
each key's value is the owning jid): a unique job's ``unique:<digest>``, a
no-overlap periodic entry's running lock. The worker releases them with the
ack that ends a successful or expired run (fetch.lua), with the filing that
sends the job to `dead` or drops it (fail.lua), or at start where the job
asks (``unique_until="start"``). Every release compares the owner first, so
it never deletes a lock another jid holds now, and there is nothing to reap:
a lock lives exactly as long as its job (or its TTL, whichever ends first).
"""

from __future__ import annotations

import re
from typing import Any

from djwork import keys, scripts

FIELD = "djwork_locks"
# Only these keys can be named by a payload (keys.py says why); lua/locks_lib.lua checks the same list.
PREFIXES = keys.JOB_LOCK_PREFIXES
SEPARATOR = "\n"  # between keys in a script argument; no lock key contains one
RESULT_MARK = "\t"  # between a batch's key and the job's kept result (with_result); no key contains one
BID = re.compile(r"\A[A-Za-z0-9_-]{1,64}\Z")  # a payload's bid: nothing that could name another key


def locks_of(payload: dict[str, Any]) -> list[str]:
    """The job's ties: the lock keys it says it owns (well-formed, allowed ones), then its batch's ``b-<bid>``.

    A batch membership ends with the job exactly as a lock does, so it travels the same way (the
    ack, fail.lua, move_entry.lua, settle_late.lua, remove_entry.lua); lua/ties_lib.lua tells
    the batch the outcome instead of deleting the key (docs/batches.md, docs/lua.md).
    """
    value = payload.get(FIELD)
    found = [key for key in value
             if isinstance(key, str) and key.startswith(PREFIXES) and SEPARATOR not in key and len(key) < 512
             ] if isinstance(value, list) else []
    bid = payload.get("bid")
    if isinstance(bid, str) and BID.match(bid):
        found.append(keys.batch(bid))
    return found


def is_batch(tie: str) -> bool:
    """Whether a tie is a batch membership (``b-<bid>``), not a lock."""
    return tie.startswith(keys.BATCH_PREFIX)


def with_result(ties: str, batch_key: str, value: str) -> str:
    """``ties`` (encoded) with ``value``, a JSON text, riding on the line of the batch ``batch_key``.

    The ack's Lua step keeps it as the job's batch result before it counts the job (lua/ties_lib.lua),
    so a job is never acked as succeeded without its result. JSON text holds no raw tab or newline.
    """
    return SEPARATOR.join(f"{line}{RESULT_MARK}{value}" if line == batch_key else line
                          for line in ties.split(SEPARATOR))


def encode(locks: list[str]) -> str:
    """The script argument for ``locks``: '' when there are none (the scripts then skip the release)."""
    return SEPARATOR.join(locks)


def release(conn: Any, locks: list[str], jid: str) -> int:
    """Compare-and-delete ``locks`` owned by ``jid`` now, in one step; the number released.

    Batch ties are left out: releasing a job's locks early (``unique_until="start"``) does not end it.
    """
    locks = [key for key in locks if not is_batch(key)]
    if not locks or not jid:
        return 0
    return int(scripts.evaluate(conn, "release_locks", [], [jid, encode(locks)]))
