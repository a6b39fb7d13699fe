"""Celery's ``ResultSet`` (results read together) and ``GroupResult.save()`` / ``restore()``.

A ``ResultSet`` holds any refs with ``.get()`` (``JobRef``, ``AsyncResult``, canvas refs) and reads
them in order. ``GroupResult`` is the ref a group returns (djwork/canvas/refs.py ``GroupRef``);
``save()`` keeps its batch id and jids under ``djwork:saved-group:<id>`` for the results' TTL, so
another process can ``GroupResult.restore(id)`` it: the results themselves are the batch's.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from djwork import keys
from djwork import redis as redis_layer
from djwork.canvas.refs import GroupRef


class ResultSet:
    """Several results read as one: ``.get()`` / ``.join()`` is every ``.get()``, in order (Celery's)."""

    def __init__(self, results: Iterable[Any]) -> None:
        self.results = list(results)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, index: int) -> Any:
        return self.results[index]

    def __repr__(self) -> str:
        return f"<ResultSet of {len(self.results)}>"

    def add(self, result: Any) -> None:
        if result not in self.results:
            self.results.append(result)

    def discard(self, result: Any) -> None:
        if result in self.results:
            self.results.remove(result)

    remove = discard

    def get(self, timeout: float | None = None, propagate: bool = True) -> list[Any]:
        """Every result in order; ``timeout`` bounds the whole wait, not each one (Celery's join)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        found = []
        for result in self.results:
            left = None if deadline is None else max(0.001, deadline - time.monotonic())
            found.append(result.get(timeout=left, propagate=propagate))
        return found

    join = get

    def ready(self) -> bool:
        return all(result.ready() for result in self.results)

    def successful(self) -> bool:
        return all(result.successful() for result in self.results)

    def failed(self) -> bool:
        return any(result.failed() for result in self.results)

    def waiting(self) -> bool:
        return not self.ready()

    def completed_count(self) -> int:
        return sum(1 for result in self.results if result.successful())

    def revoke(self, **options: Any) -> None:
        for result in self.results:
            result.revoke(**options)


def save(ref: GroupRef) -> GroupRef:
    """Keep the group's ids for ``restore()`` (for RESULT_TTL); returns the ref."""
    from djwork.conf import get_config

    value = orjson.dumps({"bid": ref.bid, "jids": ref.jids})
    ttl = get_config().result_ttl
    redis_layer.run(lambda conn: conn.set(keys.saved_group(ref.id), value, ex=ttl), idempotent=True)
    return ref


def restore(group_id: str) -> GroupRef | None:
    """The group saved under ``group_id`` (None when never saved, or expired)."""
    raw = redis_layer.run(lambda conn: conn.get(keys.saved_group(group_id)), idempotent=True)
    if raw is None:
        return None
    found = orjson.loads(raw)
    return GroupRef(found["bid"], list(found["jids"]))


def forget(group_id: str) -> None:
    redis_layer.run(lambda conn: conn.delete(keys.saved_group(group_id)), idempotent=True)
