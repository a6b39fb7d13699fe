"""Celery's ``task.chunks(items, n)``: a group of jobs, each calling the task on ``n`` argument tuples
(the built-in ``xstarmap`` job, djwork/canvas/builtins.py). docs/canvas.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from djwork.canvas.shapes import group
from djwork.canvas.signature import XSTARMAP, CanvasError, Signature, task_name


class chunks:
    """``task.chunks(items, n)``: ``len(items)/n`` jobs, each calling the task on ``n`` argument tuples."""

    def __init__(self, task: Any, items: Iterable[Any], n: int) -> None:
        if not isinstance(n, int) or n < 1:
            raise CanvasError(f"chunks: n must be a positive integer, got {n!r}")
        self.task = task_name(task)
        self.items = [list(item) for item in items]
        self.n = n

    def group(self) -> group:
        return group(*(Signature(XSTARMAP, [self.task, self.items[start:start + self.n]])
                       for start in range(0, len(self.items), self.n)))

    def apply_async(self, **options: Any) -> Any:
        return self.group().apply_async(**options)

    def delay(self) -> Any:
        return self.apply_async()

    def __call__(self) -> Any:
        return self.apply_async()
