"""The read/admin side of a djwork (or Ruby Sidekiq) cluster: what the dashboard and users' code call.

The worker never uses this package (Sidekiq's rule for its api.rb): it is a
read model over the keys described in docs/wire.md, plus the few admin writes
Sidekiq's API makes (signals, pause, retry/delete/kill). Reads tolerate bad
data: wrong-type keys read as empty, unreadable jobs come back as JobRecords
with ``problems``. Every Redis call goes through ``access`` (the admin pool,
each write's replay rule) and every failure is raised as an ``ApiError``
(``RedisUnavailable`` when Redis itself failed), so callers need nothing from
redis-py. One module per noun; import from here.
"""

from djwork.api.errors import ApiError, EmbeddedProcess, NotRetryable, RedisUnavailable, StaleEntry
from djwork.api.history import History, HistoryPage, Run
from djwork.api.processes import Process, ProcessSet, Work, WorkSet
from djwork.api.queues import Queue, QueueSummary
from djwork.api.records import JobRecord, Page, decode_backtrace, encode_backtrace
from djwork.api.sorted_sets import DeadSet, JobSet, RetrySet, ScheduledSet, SortedEntry, parse_address
from djwork.api.stats import DayStat, Stats, redis_info, redis_settings_risks

__all__ = [
    "ApiError", "DayStat", "DeadSet", "EmbeddedProcess", "History", "HistoryPage", "JobRecord", "JobSet",
    "NotRetryable", "Page", "Process", "ProcessSet", "Queue", "QueueSummary", "RedisUnavailable", "RetrySet", "Run",
    "ScheduledSet", "SortedEntry", "StaleEntry", "Stats", "Work", "WorkSet", "decode_backtrace",
    "encode_backtrace", "parse_address", "redis_info", "redis_settings_risks",
]

# Rate limiters (docs/limiters.md).
from djwork.api.limiters import (
    Limiter,
    LimiterDetail,
    LimiterHolder,
    Limiters,
    LimiterSummary,
    LimiterWaiter,
)

__all__ += ["Limiter", "LimiterDetail", "LimiterHolder", "LimiterSummary", "LimiterWaiter", "Limiters"]

# Periodic entries (docs/periodic.md).
from djwork.api.periodic import Periodic, PeriodicEntry, PeriodicRun  # noqa: E402
from djwork.periodic.entries import ENTRY_ID as PERIODIC_ENTRY_ID  # noqa: E402

__all__ += ["PERIODIC_ENTRY_ID", "Periodic", "PeriodicEntry", "PeriodicRun"]

# Keys the key guard moved aside (docs/wire.md, Key guard).
from djwork.api.quarantine import Quarantine, QuarantinedKey  # noqa: E402

__all__ += ["Quarantine", "QuarantinedKey"]

# Iterable jobs' saved progress (docs/iterable.md).
from djwork.api.iterations import Iterations  # noqa: E402

__all__ += ["Iterations"]

# Unique jobs' locks (docs/unique.md).
from djwork.api.unique_locks import LockPage, UniqueLock, UniqueLocks  # noqa: E402

__all__ += ["LockPage", "UniqueLock", "UniqueLocks"]

# Execution metrics, queue samples, deploy marks (docs/metrics.md).
from djwork.api.metrics import ClassMetrics, Mark, Metrics, MetricsResult, mark_deploy  # noqa: E402
from djwork.api.metrics_queues import QueuePoint, QueueSeries  # noqa: E402
from djwork.metrics.layout import BUCKET_LABELS  # noqa: E402

__all__ += ["BUCKET_LABELS", "ClassMetrics", "Mark", "Metrics", "MetricsResult", "QueuePoint", "QueueSeries",
            "mark_deploy"]
# Batches (docs/batches.md).
from djwork.api.batches import Batch, Batches  # noqa: E402
from djwork.batches.status import EVENTS as BATCH_EVENTS  # noqa: E402
from djwork.batches.status import BatchStatus  # noqa: E402

__all__ += ["BATCH_EVENTS", "Batch", "BatchStatus", "Batches"]

# Revoked jobs (docs/celery.md).
from djwork.api.revoked import Revoked, RevokedJob  # noqa: E402

__all__ += ["Revoked", "RevokedJob"]

# One job by jid, and bulk actions on a chosen part of a set (manage.py djwork, docs/cli.md).
from djwork.api.job_lookup import JobWhereabouts, find_job  # noqa: E402
from djwork.api.selection import BulkOutcome, act_on, select_entries, select_queue_jobs  # noqa: E402
from djwork.api.sorted_sets import SearchResult  # noqa: E402

__all__ += ["BulkOutcome", "JobWhereabouts", "SearchResult", "act_on", "find_job", "select_entries",
            "select_queue_jobs"]

# The Redis the calls above go to, and the dashboard's health strip (docs/dashboard.md).
from djwork.api.access import redis_location  # noqa: E402
from djwork.api.health import Health  # noqa: E402

__all__ += ["Health", "redis_location"]
