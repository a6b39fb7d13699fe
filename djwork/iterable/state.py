"""An iterable job's saved progress in Redis: one JSON string per job, written once per checkpoint.

``djwork:iteration:<jid>`` (keys.iteration) holds ``cursor``, ``items``,
``checkpoints`` and ``segments``. A checkpoint is one ``SET ... EX``: the
value and its TTL in one command, so a checkpoint costs one round trip and
a crash between two commands can't leave a state that never expires.
"""

from __future__ import annotations

import contextvars
from dataclasses import asdict, dataclass
from typing import Any

import orjson

from djwork import redis as redis_layer
from djwork.redis import keys


@dataclass
class Progress:
    """Where an iteration stands: the cursor after the last item done, and its counts."""

    cursor: Any = None
    items: int = 0  # items done over every segment (those repeated after a kill -9 counted again)
    checkpoints: int = 0
    segments: int = 0  # runs of this iteration, the current one included

    @property
    def resumed(self) -> bool:
        return self.segments > 1

    @property
    def cursor_text(self) -> str:
        """The cursor as JSON, for a page (a dict shown as Python's repr would not be what is stored)."""
        return orjson.dumps(self.cursor).decode()


# The running iteration's progress, for its job's hooks (``IterableJob.progress``): per thread or task.
current: contextvars.ContextVar[Progress | None] = contextvars.ContextVar("djwork_iteration", default=None)


def load(jid: str) -> Progress:
    """The saved progress of ``jid``, or a fresh one; a state that isn't ours starts over rather than crash."""
    return peek(jid) or Progress()


def parse(jid: str, raw: bytes) -> Progress:
    """A saved state read back; ValueError naming the key when it is not djwork's."""
    try:
        saved = orjson.loads(raw)
        return Progress(cursor=saved.get("cursor"), items=int(saved.get("items", 0)),
                        checkpoints=int(saved.get("checkpoints", 0)), segments=int(saved.get("segments", 0)))
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError) as error:
        raise ValueError(f"djwork: the saved iteration state of job {jid} is not djwork's ({error}); "
                         f"delete {keys.iteration(jid)} to start it over") from None


def save(jid: str, progress: Progress, ttl: int) -> None:
    """One checkpoint: the whole state and its TTL in one SET (idempotent: a replay writes the same value)."""
    try:
        value = orjson.dumps(asdict(progress))
    except TypeError as error:
        raise TypeError(f"djwork: job {jid}'s cursor {progress.cursor!r} is not JSON: {error}") from None
    redis_layer.run(lambda conn: conn.set(keys.iteration(jid), value, ex=ttl), idempotent=True)


def delete(jid: str) -> None:
    """The iteration completed: nothing left to resume (a reused jid starts over)."""
    redis_layer.run(lambda conn: conn.delete(keys.iteration(jid)), idempotent=True)


def peek(jid: str) -> Progress | None:
    """The saved progress of ``jid`` for a reader (dashboard, tests); None when nothing is saved."""
    raw = redis_layer.run(lambda conn: conn.get(keys.iteration(jid)), idempotent=True)
    return None if raw is None else parse(jid, raw)
