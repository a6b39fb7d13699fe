"""The read/admin side of a djwork (or Ruby Sidekiq) cluster: what the dashboard and users' code call.

The worker never uses this package (Sidekiq's rule for its api.rb): it is a
read model over the keys in WIRE.md, plus the few admin writes Sidekiq's API
makes (signals, pause, retry/delete/kill). Reads tolerate bad data: wrong-type
keys read as empty, unreadable jobs come back as JobRecords with ``problems``.
One module per noun; import from here.
"""

from djwork.api.history import History, HistoryPage, Run
from djwork.api.processes import Process, ProcessSet, Work, WorkSet
from djwork.api.queues import Queue, QueueSummary
from djwork.api.records import (
    ApiError,
    EmbeddedProcess,
    JobRecord,
    NotRetryable,
    Page,
    StaleEntry,
    decode_backtrace,
    encode_backtrace,
)
from djwork.api.sorted_sets import DeadSet, JobSet, RetrySet, ScheduledSet, SortedEntry, parse_address
from djwork.api.stats import DayStat, Stats, redis_info

__all__ = [
    "ApiError", "DayStat", "DeadSet", "EmbeddedProcess", "History", "HistoryPage", "JobRecord", "JobSet",
    "NotRetryable", "Page", "Process", "ProcessSet", "Queue", "QueueSummary", "RetrySet", "Run",
    "ScheduledSet", "SortedEntry", "StaleEntry", "Stats", "Work", "WorkSet", "decode_backtrace",
    "encode_backtrace", "parse_address", "redis_info",
]
