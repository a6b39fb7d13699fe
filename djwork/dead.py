"""Burying a job in `dead` (and filing a failed one), written once.

The worker's processor, scheduled poller and reaper and the admin API all
move entries into `dead`. Each used to assemble fail.lua's or
move_entry.lua's eight ARGV slots by hand, so a slot added to a script (or a
trim rule changed) had to be found in four places; a missed one would file
jobs without trimming `dead`, or remove from the wrong list. They all build
their calls here instead, and take the trim rules (DEAD_TIMEOUT,
DEAD_MAX_JOBS, DEAD_MAX_BYTES) from the same config.

A payload that is not a job still has to be seen by a person: it goes to
`dead` inside a readable wrapper (class ``djwork.InvalidPayload``) that keeps
the raw text, so a bad push never wedges a queue and nothing is lost.
"""

from __future__ import annotations

import time
from typing import Any, Literal, NamedTuple

from djwork.payload import dumps, new_jid, readable
from djwork.redis import keys, scripts
from djwork.settings.conf import Config, get_config

INVALID_PAYLOAD_CLASS = "djwork.InvalidPayload"
INVALID_PAYLOAD_KEPT = 64 * 1024  # characters of an unreadable payload a `dead` entry keeps

FailureTarget = Literal["retry", "dead", "drop"]


class ScriptCall(NamedTuple):
    """One Lua script call, ready to run now or to queue on a pipeline."""

    name: str
    keys: list[str]
    args: list[Any]

    def evaluate(self, conn: Any) -> Any:
        return scripts.evaluate(conn, self.name, self.keys, self.args)


def invalid_payload(raw: str | bytes, queue: str, error_message: str, now: float | None = None) -> dict[str, Any]:
    """The job-shaped wrapper that carries unreadable ``raw`` text into `dead`.

    The raw text is kept twice: in args[0], which any Sidekiq UI shows, and in
    raw_payload, which says what it is. Bytes that are not UTF-8 are kept
    escaped (``\\xff``): JSON can't hold them as they are. Only its first
    ``INVALID_PAYLOAD_KEPT`` characters are kept, with its size in bytes
    (``raw_payload_bytes``): kept whole, twice and escaped, a 20 MB push became a
    42 MB `dead` entry, and a payload nobody can read is no job to retry.
    """
    now = time.time() if now is None else now
    size = len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))
    text = readable(raw)
    kept = text[:INVALID_PAYLOAD_KEPT]
    wrapper: dict[str, Any] = {
        "class": INVALID_PAYLOAD_CLASS, "args": [kept], "queue": queue, "jid": new_jid(), "retry": False,
        "created_at": now, "enqueued_at": now, "failed_at": now, "retry_count": 0,
        "error_class": INVALID_PAYLOAD_CLASS, "error_message": error_message, "raw_payload": kept,
        "raw_payload_bytes": size,
    }
    if len(kept) < len(text):
        wrapper["raw_payload_truncated"] = True
        wrapper["error_message"] = f"{error_message} (its first {len(kept):,} characters of {size:,} bytes)"
    return wrapper


def dead_trim(config: Config | None, now: float) -> list[Any]:
    """fail.lua's and move_entry.lua's trim slots: the byte cap (trim on), cutoff score, max size."""
    config = get_config() if config is None else config
    return [config.dead_max_bytes, repr(now - config.dead_timeout), config.dead_max_jobs]


def file_failure(source_key: str, raw: str | bytes, target: FailureTarget, payload: dict[str, Any] | str,
                 score: float, jid: str = "", *, from_in_progress: bool = True, only_if_listed: bool = False,
                 config: Config | None = None, now: float | None = None, locks: str = "",
                 result: tuple[str, str] = ("", "")) -> ScriptCall:
    """fail.lua: file a failed job in `retry` or `dead` (or nowhere, for "drop") and take ``raw`` off its list.

    ``source_key`` is the in-progress list the job was fetched into; with
    ``from_in_progress=False`` (basic fetch, where the job already left its
    queue) nothing is removed; with ``only_if_listed`` nothing is filed either unless ``raw`` is still on
    the list (a burial two reapers may both attempt, or a replay of one). ``jid`` clears the job's orphan
    count. ``locks``
    (djwork/job_locks.py, encoded) are released when the filing ends the job
    (dead or drop) and the jid still owns them; a retry keeps them (fail.lua
    decides). A batch line among them is told "retry" or "dead" (docs/batches.md). ``result`` is the
    job's result key and spec (djwork/worker/outcome.py), written in the same step; a job
    revoked meanwhile (docs/celery.md) is not filed in `retry`.
    """
    now = time.time() if now is None else now
    stored = "" if target == "drop" else (payload if isinstance(payload, str) else dumps(payload))
    trim = dead_trim(config, now) if target == "dead" else ["0", "0", "0"]
    return ScriptCall("fail", [source_key, keys.RETRY if target == "retry" else keys.DEAD, keys.DEAD,
                               keys.ORPHAN_COUNTS, keys.REVOKED, keys.RESULT_WAITERS, keys.DEAD_BYTES],
                      [raw, stored, repr(float(score)), *trim,
                       ("2" if only_if_listed else "1") if from_in_progress else "0", jid,
                       locks, *result])


def move_to_dead(source_key: str, source_type: Literal["zset", "list"], member: str | bytes,
                 buried: dict[str, Any] | str | bytes, jid: str = "", *, config: Config | None = None,
                 now: float | None = None, locks: str = "") -> ScriptCall:
    """move_entry.lua: move ``member`` of ``source_key`` into `dead` as ``buried``, scored now, `dead` trimmed.

    The script adds before it removes and returns 0 (doing nothing) when a
    ZSET member is already gone, so replaying the call is harmless.
    """
    now = time.time() if now is None else now
    stored = buried if isinstance(buried, (str, bytes)) else dumps(buried)
    return ScriptCall("move_entry", [source_key, keys.DEAD, keys.ORPHAN_COUNTS, keys.DEAD_BYTES],
                      [source_type, member, stored, repr(now), *dead_trim(config, now), jid, locks])
