"""Celery's ``ResultSet``: any refs with ``.get()`` (``JobRef``, ``AsyncResult``, canvas refs), read in order.

(``GroupResult``, what a group returns, is djwork/canvas/refs.py's ``GroupRef``, with ``save()``/``restore()``.)
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any


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
