"""djwork: Redis-backed background jobs for Django, on Sidekiq's wire format."""

from djwork.batches import Batch, BatchError
from djwork.client import EnqueueError
from djwork.cron.entries import periodic
from djwork.jobs import BoundJob, Job, JobRef, MaxRetriesExceededError, Retry, UnknownJobClass, job, shared_task
from djwork.key_types import WrongTypeKey
from djwork.payload import ArgumentError

__version__ = "0.1.0"

__all__ = [
    "ArgumentError",
    "Batch",
    "BatchError",
    "BoundJob",
    "EnqueueError",
    "Job",
    "JobRef",
    "MaxRetriesExceededError",
    "Retry",
    "UnknownJobClass",
    "WrongTypeKey",
    "job",
    "periodic",
    "shared_task",
]
