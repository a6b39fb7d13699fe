"""djwork: Redis-backed background jobs for Django, on Sidekiq's wire format."""

from djwork.batches import Batch, BatchError
from djwork.canvas import (
    CanvasError,
    ChordError,
    GroupResult,
    ResultSet,
    Signature,
    chain,
    chord,
    chunks,
    group,
    signature,
)
from djwork.client import EnqueueError
from djwork.exceptions import ClusterUnsupported, RedisUnavailable, SoftTimeLimitExceeded, TimeLimitExceeded
from djwork.iterable import IterableJob, iterate, resumable
from djwork.jobs import Job, JobRef, MaxRetriesExceededError, Retry, UnknownJobClass, job, shared_task
from djwork.jobs.class_based import register_task
from djwork.jobs.send_task import send_task
from djwork.jobs.task_class import Task
from djwork.payload import ArgumentError
from djwork.periodic.entries import periodic
from djwork.redis.key_types import WrongTypeKey
from djwork.results import AsyncResult, JobError, JobRevoked, ResultNotStored, ResultsOff, ResultTimeout, states
from djwork.results.revoke import TerminateNotSupported, revoke, revoked

__version__ = "0.1.0"


# Celery names with no djwork object: importing one says what to write instead (docs/celery.md), rather than
# a bare "cannot import name" after the import swap.
NOT_IN_DJWORK = {
    "Celery": "djwork has no app object: delete the project's celery.py (app = Celery(...), "
              "config_from_object, autodiscover_tasks). djwork reads the CELERY_* settings itself, and runworkers "
              "imports each app's tasks.py; declare tasks with @djwork.shared_task (docs/celery.md, Settings)",
    "current_app": "djwork has no app object: use djwork.send_task(name, ...) and djwork.AsyncResult(id), and "
                   "djwork.jobs.registry for the registered jobs (docs/celery.md)",
}


def __getattr__(name: str) -> object:
    if name in NOT_IN_DJWORK:
        raise ImportError(f"djwork.{name}: {NOT_IN_DJWORK[name]}", name="djwork")
    raise AttributeError(f"module 'djwork' has no attribute {name!r}")


def mark_deploy(label: str | None = None) -> bool:
    """Mark a deploy on the Metrics charts (default label: the last git commit); docs/metrics.md."""
    from djwork.api.metrics import mark_deploy as mark

    return mark(label)


__all__ = [
    "ArgumentError",
    "AsyncResult",
    "Batch",
    "BatchError",
    "CanvasError",
    "ChordError",
    "ClusterUnsupported",
    "EnqueueError",
    "GroupResult",
    "IterableJob",
    "Job",
    "JobError",
    "JobRef",
    "JobRevoked",
    "MaxRetriesExceededError",
    "RedisUnavailable",
    "ResultNotStored",
    "ResultSet",
    "ResultTimeout",
    "ResultsOff",
    "Retry",
    "Signature",
    "SoftTimeLimitExceeded",
    "Task",
    "TerminateNotSupported",
    "TimeLimitExceeded",
    "UnknownJobClass",
    "WrongTypeKey",
    "chain",
    "chord",
    "chunks",
    "group",
    "iterate",
    "job",
    "mark_deploy",
    "periodic",
    "register_task",
    "resumable",
    "revoke",
    "revoked",
    "send_task",
    "shared_task",
    "signature",
    "states",
]
