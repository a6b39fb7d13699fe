"""Iterable (resumable) jobs: ``djwork.IterableJob``, the ready-made iterators of ``djwork.iterate``,
and ``djwork.resumable`` (the same walk inside a Django task).

docs/iterable.md: the contract, the guarantees, and what a ``kill -9`` can repeat.
"""

from djwork.iterable import iterate
from djwork.iterable.job import IterableJob
from djwork.iterable.task_form import resumable
from djwork.iterable.walk import Interrupted

__all__ = ["Interrupted", "IterableJob", "iterate", "resumable"]
