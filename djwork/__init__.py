"""djwork: Redis-backed background jobs for Django, on Sidekiq's wire format."""

from djwork.batches import Batch, BatchError
from djwork.canvas import CanvasError, ChordError, Signature, chain, chord, chunks, group, signature
from djwork.client import EnqueueError
from djwork.cron.entries import periodic
from djwork.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded
from djwork.jobs import BoundJob, Job, JobRef, MaxRetriesExceededError, Retry, UnknownJobClass, job, shared_task
from djwork.key_types import WrongTypeKey
from djwork.payload import ArgumentError

__version__ = "0.1.0"


def mark_deploy(label: str | None = None) -> bool:
    """Mark a deploy on the Metrics charts (default label: the last git commit); docs/metrics.md."""
    from djwork.api.metrics import mark_deploy as mark

    return mark(label)


__all__ = [
    "ArgumentError",
    "Batch",
    "BatchError",
    "BoundJob",
    "CanvasError",
    "ChordError",
    "EnqueueError",
    "Job",
    "JobRef",
    "MaxRetriesExceededError",
    "Retry",
    "Signature",
    "SoftTimeLimitExceeded",
    "TimeLimitExceeded",
    "UnknownJobClass",
    "WrongTypeKey",
    "chain",
    "chord",
    "chunks",
    "group",
    "job",
    "mark_deploy",
    "periodic",
    "shared_task",
    "signature",
]
