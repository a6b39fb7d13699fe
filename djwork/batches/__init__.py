"""Batches: jobs tracked as one group, with callbacks exactly once (docs/batches.md)."""

from djwork.batches.batch import Batch, BatchError
from djwork.batches.status import BatchStatus

__all__ = ["Batch", "BatchError", "BatchStatus"]
