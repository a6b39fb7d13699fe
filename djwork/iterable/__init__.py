"""Iterable (resumable) jobs: ``djwork.IterableJob`` and the ready-made iterators of ``djwork.iterate``.

docs/iterable.md: the contract, the guarantees, and what a ``kill -9`` can repeat.
"""

from djwork.iterable import iterate
from djwork.iterable.job import IterableJob
from djwork.iterable.walk import Interrupted

__all__ = ["Interrupted", "IterableJob", "iterate"]
