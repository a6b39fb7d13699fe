"""The enqueue verbs of a job, written once for ``job`` and ``job.set(...)``.

Every verb (Celery's ``delay``/``apply_async``, Sidekiq's ``perform_async``/
``perform_in``/``perform_at``, ``delay_many``, ``delay_on_commit``) turns its
call into a payload through one ``build_payload``, so an option preset with
``job.set(queue=...)`` applies to every verb alike and no verb can drift from
the others.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from djwork import client, options
from djwork.canvas.verbs import CanvasVerbs
from djwork.jobs import argument_reprs, message_properties
from djwork.payload import ArgumentError
from djwork.results import ResultMethods
from djwork.results.record import PAYLOAD_FIELD

# Sidekiq: an interval this large is an absolute epoch, not a delay.
ABSOLUTE_EPOCH_THRESHOLD = 1_000_000_000

# The job options a call may set, copied into the payload as they are: Sidekiq's, and the time
# limits the worker enforces (djwork/worker/time_limits.py; Sidekiq ignores the fields).
PAYLOAD_OPTIONS = ("backtrace", "dead", "tags", "retry_queue", "retry_for", "soft_time_limit", "time_limit")


@dataclass(frozen=True)
class JobRef(ResultMethods):
    """What enqueueing returns: the job's id (``.id`` as Celery's AsyncResult, ``.jid`` as Sidekiq),
    and Celery's AsyncResult verbs (``state``, ``get()``, ``revoke()``...; djwork/results/__init__.py).

    A unique job refused as a duplicate (docs/unique.md) was not written: ``duplicate_of``
    and ``jid`` are then the jid of the job already holding its lock, the one that will
    do the work (so ``get()`` follows its result), and ``enqueued`` is False. None when
    client middleware stopped the push. ``queue`` narrows a revoke's search to that queue.
    """

    jid: str | None
    duplicate_of: str | None = None
    queue: str | None = field(default=None, compare=False)  # a hint for revoke(), not the job's identity
    # Results off for this job (ignore_result, RESULTS=False): get() and state raise ResultsOff at once,
    # saying how to turn results on, instead of waiting for a record nothing will write.
    ignored: bool = field(default=False, compare=False)
    # The call or the job asked for no result (ignore_result=True: Celery's AsyncResult.ignored): get()
    # returns None at once and the state reads PENDING, as in Celery. ResultsOff stays for results off by
    # the setting alone (RESULTS=False), Celery's "no result backend configured".
    ignore_result: bool = field(default=False, compare=False)

    @property
    def id(self) -> str | None:
        return self.jid

    @property
    def root_id(self) -> str | None:
        """Celery's: a job sent on its own is its own root."""
        return self.jid

    @property
    def parent_id(self) -> None:
        """Celery's: a job sent on its own has no parent (a chain's steps: ``ChainRef.parent_id``)."""
        return None

    @property
    def enqueued(self) -> bool:
        """True when this call wrote the job (False: a duplicate, or stopped by middleware)."""
        return self.jid is not None and self.duplicate_of is None

    def __str__(self) -> str:
        return self.jid or ""

    def revoke(self, terminate: bool = False, signal: Any = None) -> bool:
        """``djwork.revoke(self.id)``, searching only this job's queue (plus `schedule` and `retry`)."""
        from djwork.results.revoke import revoke

        return revoke(self._jid(), terminate=terminate, signal=signal, queue=self.queue)


def _split_call(item: Any) -> tuple[list[Any], dict[str, Any]]:
    if isinstance(item, dict):
        return [], item
    if (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], (list, tuple))
            and isinstance(item[1], dict)):
        return list(item[0]), item[1]
    if isinstance(item, (list, tuple)):
        return list(item), {}
    raise ArgumentError(f"delay_many items must be tuples of arguments or dicts, got {type(item).__name__}")


class Enqueueing(CanvasVerbs):
    """The enqueue verbs (the canvas's ``s``/``si``/``map``... too); a subclass supplies ``name``, ``build_payload``."""

    name: str  # the job's registered name: the payload's ``class``

    def build_payload(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
                      **options: Any) -> tuple[dict[str, Any], float | None]:
        """The Sidekiq job hash for one call, and its run-at epoch (None = now)."""
        raise NotImplementedError

    def delay(self, *args: Any, **kwargs: Any) -> JobRef:
        return self.apply_async(args, kwargs)

    def perform_async(self, *args: Any, **kwargs: Any) -> JobRef:
        return self.apply_async(args, kwargs)

    def perform_in(self, interval: dt.timedelta | float, *args: Any, **kwargs: Any) -> JobRef:
        seconds = options.seconds(interval, self.name, "perform_in")
        if seconds >= ABSOLUTE_EPOCH_THRESHOLD:
            at = options.within_horizon(seconds, self.name, "perform_in", interval)
        else:
            at = options.after(seconds, self.name, "perform_in", interval)
        return self.apply_async(args, kwargs, eta=at)

    def perform_at(self, when: dt.datetime | float, *args: Any, **kwargs: Any) -> JobRef:
        return self.apply_async(args, kwargs, eta=options.moment(when, self.name, "perform_at"))

    def apply_async(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
                    **options: Any) -> JobRef:
        """Celery's ``apply_async``: ``countdown``, ``eta``, ``expires``, ``queue``, ``retry``, ``jid``,
        the Sidekiq options (``backtrace``, ``dead``, ``tags``, ``retry_queue``, ``retry_for``) and
        ``unique_for``/``unique_until`` (docs/unique.md); ``link``/``link_error`` (docs/canvas.md);
        ``ignore_result``, ``soft_time_limit``/``time_limit``, ``throw=True`` (docs/celery.md)."""
        # Celery's option for a run at the push (task_always_eager hands it to apply()): a djwork job run at
        # its push always raises its exception, which is throw=True; only throw=False asks for what isn't.
        if options.pop("throw", True) is not True:
            raise TypeError(f"{getattr(self, 'name', self)}: throw=False is not supported: a job run at its push "
                            "raises its exception (docs/celery.md, Options)")
        if options.get("link") is not None or options.get("link_error") is not None:
            return self.signature(args, kwargs, **options).apply_async()  # a one-job batch (djwork/canvas)
        options.pop("link", None)
        options.pop("link_error", None)
        payload, at = self.build_payload(args, kwargs, **options)
        return JobRef(*client.push_reporting(payload, at=at), queue=payload.get("queue"),
                      ignored=not payload.get(PAYLOAD_FIELD), ignore_result=self.asks_no_result(options))

    def asks_no_result(self, options: dict[str, Any]) -> bool:
        """Whether ``ignore_result=True`` was asked, by the call or else by the job (not by ``RESULTS``)."""
        given = options.get("ignore_result")
        return given is True or (given is None and getattr(self, "ignore_result", None) is True)

    def delay_many(self, calls: Iterable[Any], **options: Any) -> list[JobRef]:
        """Enqueue one job per item in one pipelined round trip.

        Each item is a tuple/list of positional arguments, a dict of keyword
        arguments, or an ``(args, kwargs)`` pair written as ``(tuple, dict)``.
        """
        payloads = []
        at = None
        for item in calls:
            args, kwargs = _split_call(item)
            payload, at = self.build_payload(args, kwargs, **options)
            payloads.append(payload)
        return [JobRef(*pushed, queue=payload.get("queue"), ignored=not payload.get(PAYLOAD_FIELD))
                for pushed, payload in zip(client.push_bulk_reporting(payloads, at=at), payloads, strict=True)]

    def delay_on_commit(self, *args: Any, **kwargs: Any) -> JobRef:
        """Enqueue once the current transaction commits (at once outside one); the jid is known now.

        For a unique job, whether it was a duplicate is only known at the commit: the ref can't say.
        """
        payload, at = self.build_payload(args, kwargs)
        transaction.on_commit(lambda: client.push(payload, at=at))
        return JobRef(payload["jid"], queue=payload.get("queue"), ignored=not payload.get(PAYLOAD_FIELD))


class JobOptions(Enqueueing):
    """``job.set(...)``: the enqueue verbs with preset options (a call's own options win)."""

    ENQUEUE_KEYS = ("countdown", "eta", "expires", "queue", "retry", "jid", *PAYLOAD_OPTIONS, "priority",
                    "unique_for", "unique_until", "task_id", "serializer", "retry_policy", "headers", "ignore_result",
                    *message_properties.NAMES, *argument_reprs.NAMES)

    def __init__(self, job: Enqueueing, options: dict[str, Any]) -> None:
        unknown = set(options) - set(self.ENQUEUE_KEYS)
        if unknown:
            raise TypeError(f"{job.name}.set(): unknown option(s) {sorted(unknown)}")
        self.job = job
        self.name = job.name
        self.options = options

    def set(self, **options: Any) -> JobOptions:
        return JobOptions(self.job, {**self.options, **options})

    def signature_options(self) -> dict[str, Any]:
        return dict(self.options)  # job.set(queue="low").s(...) keeps the preset

    def build_payload(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
                      **options: Any) -> tuple[dict[str, Any], float | None]:
        return self.job.build_payload(args, kwargs, **{**self.options, **options})

    def asks_no_result(self, options: dict[str, Any]) -> bool:
        return self.job.asks_no_result({**self.options, **options})
