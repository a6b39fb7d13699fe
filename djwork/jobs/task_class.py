"""``djwork.Task``: Celery's task base class — option defaults, hooks, ``self.request``, ``self.retry``.

Every ``@djwork.job`` is an instance of a ``Task`` subclass (``djwork.Job``, or
a class built from ``base=MyTask`` and ``Job``), so a bound job's ``self`` is
the job itself, as in Celery: ``self.request`` is this run's ``Request`` (a
stack kept in a ``ContextVar``: one worker process runs a job on many threads at
once, and many coroutine jobs at once on its event loop's one thread, each
asyncio task in a context of its own), ``self.retry()`` raises ``Retry``. A subclass's class attributes are the
defaults of the decorator's options (``max_retries = 5``), and its hooks run
in the worker around each run (djwork/worker/task_events.py). docs/celery.md.

Not Django's ``django.tasks.Task`` (djwork/tasks_compat.py), which djwork
runs too: that one is never exported from ``djwork``.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import time
import traceback as traceback_module
from dataclasses import dataclass, field
from typing import Any

from djwork import options as enqueue_options
from djwork.jobs import message_properties


class Retry(Exception):
    """Raised by ``self.retry()`` inside a bound job: schedule another attempt."""

    def __init__(self, exc: BaseException | None = None, countdown: float | None = None,
                 max_retries: int | None = None, expires: float | dt.datetime | None = None) -> None:
        super().__init__(str(exc) if exc else "retry requested")
        self.exc = exc
        self.countdown = countdown
        self.max_retries = max_retries
        self.expires = expires  # the retried run's expiry: seconds from when it is due, or a datetime


class MaxRetriesExceededError(Exception):
    """``self.retry()`` was called once the job had used up its retries."""


class Replaced(Exception):
    """Raised by ``self.replace(sig)`` once the replacement is sent (Celery raises ``Ignore`` there): the run
    ends as a success with no result of its own, since the replacement, which took its id, writes it."""


# Their names as stored in a failed job's error_class (and shown by the dashboard) since before they
# moved here: djwork.jobs still exports both.
Retry.__module__ = MaxRetriesExceededError.__module__ = "djwork.jobs"


@dataclass
class Request:
    """``self.request``: what this execution is (Celery's request context)."""

    id: str | None = None
    retries: int = 0
    queue: str = "default"
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    payload: dict[str, Any] = field(default_factory=dict)
    hostname: str | None = None  # the worker's identity
    task: str | None = None  # the job's name
    is_eager: bool = False  # run by task.apply(), in the caller's process
    called_directly: bool = False  # the job was called as a function: no worker, no id

    @property
    def jid(self) -> str | None:
        return self.id

    def is_revoked(self) -> bool:
        """Whether this job was revoked while it runs (``djwork.revoke``): return early if so."""
        from djwork.results.revoke_flag import revoked

        return bool(self.id) and revoked(self.id)

    @property
    def delivery_info(self) -> dict[str, Any]:
        # The Celery priority the job was sent with (docs/priority.md), None when it was sent without one.
        priority = self.payload.get("priority")
        if isinstance(priority, bool) or not isinstance(priority, int):
            priority = None
        return {"routing_key": self.queue, "exchange": "", "priority": priority, "is_eager": self.is_eager,
                "redelivered": None}

    @property
    def headers(self) -> dict[str, Any] | None:
        headers = self.payload.get("headers")
        return headers if isinstance(headers, dict) else None

    @property
    def properties(self) -> dict[str, Any]:
        """Celery's message properties: those the call gave (``app_id``, ...), ``correlation_id`` and ``priority``."""
        return message_properties.of_payload(self.payload, self.id)

    @property
    def eta(self) -> None:
        """Always None: Sidekiq's payload drops the run-at once the job is due (docs/celery.md)."""
        return None

    @property
    def expires(self) -> str | None:
        return _iso(self.payload.get("expires_at"))

    @property
    def root_id(self) -> str | None:
        root = self.payload.get("root_id")
        return root if isinstance(root, str) else self.id

    @property
    def replaced_task_nesting(self) -> int:
        """How many ``replace()`` deep this job is: 0 unless a replacement made it (Celery's)."""
        nesting = self.payload.get("replaced_task_nesting")
        return nesting if isinstance(nesting, int) and not isinstance(nesting, bool) else 0

    @property
    def parent_id(self) -> str | None:
        parent = self.payload.get("parent_id")
        return parent if isinstance(parent, str) else None

    @property
    def batch(self) -> Any:
        """The ``djwork.Batch`` this job belongs to (``with self.request.batch.jobs():`` adds to it), or None."""
        bid = self.payload.get("bid")
        if not isinstance(bid, str) or not bid:
            return None
        from djwork.batches import Batch

        return Batch(bid=bid)


def _iso(epoch: Any) -> str | None:
    if isinstance(epoch, (int, float)) and not isinstance(epoch, bool):
        return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat()
    return None


class ExceptionInfo:
    """The ``einfo`` hooks and signals receive (Celery's): the exception, its type and traceback."""

    def __init__(self, exception: BaseException) -> None:
        self.exception = exception
        self.type = type(exception)
        self.tb = exception.__traceback__

    @property
    def traceback(self) -> str:
        return "".join(traceback_module.format_exception(self.type, self.exception, self.tb))

    def __str__(self) -> str:
        return self.traceback

    def __repr__(self) -> str:
        return f"<ExceptionInfo: {self.exception!r}>"


HOOKS = ("before_start", "on_success", "on_retry", "on_failure", "after_return")


class Task:
    """Celery's ``Task`` base: subclass it, override hooks and option defaults, pass it as ``base=``."""

    # Option defaults (Celery's names); a decorator option wins over a class attribute.
    # `max_retries = None` means "from `retry`": Sidekiq's 25, not Celery's 3 (docs/celery.md).
    name: str | None = None
    queue: str = "default"
    max_retries: int | None = None
    default_retry_delay: float = 180
    autoretry_for: tuple[type[BaseException], ...] = ()
    dont_autoretry_for: tuple[type[BaseException], ...] = ()
    retry_kwargs: dict[str, Any] | None = None
    retry_backoff: bool | float = False
    retry_backoff_max: float = 600
    retry_jitter: bool = True
    rate_limit: Any = None
    expires: float | dt.timedelta | None = None
    serializer: str = "json"
    typing: bool = True
    priority: int | None = None
    acks_late: bool = True
    acks_on_failure_or_timeout: bool = True
    reject_on_worker_lost: bool = True
    track_started: bool | None = None  # None: the TRACK_STARTED setting decides (Celery's task_track_started)
    # What an exception does: "celery" fails the job unless it asked for a retry, "sidekiq" retries it; None: the
    # FAILURES setting decides. A subclass passed as base= is "celery" unless it says otherwise (docs/celery.md).
    failures: str | None = None

    @property
    def fails_unless_retried(self) -> bool:
        """Celery's rule: an exception fails the job unless it asked for a retry (``self.retry``, ``autoretry_for``)."""
        from djwork.settings.conf import get_config

        return (self.failures or get_config().failures) == "celery"

    # --- hooks: called in the worker (and by apply()), each guarded: one that raises is logged ---
    def before_start(self, task_id: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        """Before the body runs."""

    def on_success(self, retval: Any, task_id: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        """The body returned ``retval``."""

    def on_retry(self, exc: BaseException, task_id: str, args: list[Any], kwargs: dict[str, Any],
                 einfo: ExceptionInfo) -> None:
        """The body raised and the job will run again (it went to the retry set)."""

    def on_failure(self, exc: BaseException, task_id: str, args: list[Any], kwargs: dict[str, Any],
                   einfo: ExceptionInfo) -> None:
        """The body raised and the job will not run again (dead set, or dropped)."""

    def after_return(self, status: str, retval: Any, task_id: str, args: list[Any], kwargs: dict[str, Any],
                     einfo: ExceptionInfo | None) -> None:
        """After ``on_success`` or ``on_failure``, not after a retry (Celery's): ``"SUCCESS"`` or ``"FAILURE"``."""

    @property
    def app(self) -> Any:
        """Celery's ``task.app``: djwork's one app, whose ``conf`` reads and sets the settings it has by Celery's
        names (``self.app.conf.task_always_eager``; djwork/settings/app_conf.py)."""
        from djwork.settings.app_conf import current_app

        return current_app

    @property
    def job(self) -> Task:
        """The job itself: ``self.job`` from when a bound job's ``self`` was a wrapper around it."""
        return self

    # --- the request of the run in progress in this thread or asyncio task ----------------------
    @property
    def request(self) -> Request:
        current = self.request_var().get()
        if current is not None:
            return current
        # Outside any run (Celery's default context): called directly, no id.
        return Request(task=getattr(self, "name", None), called_directly=True)

    def request_var(self) -> contextvars.ContextVar[Request | None]:
        """This job's current request, per context: a run sets it and resets its token after (a stack).

        A ContextVar, not a thread-local: the coroutine jobs on the worker's event loop share its
        thread, and with a per-thread stack one job's await let another's push and pop land in
        between, so a job read (and popped) its neighbour's request. Each asyncio task runs in a
        context of its own; each thread too.
        """
        try:  # the per-job path: one dict read
            return self.__dict__["_request_var"]
        except KeyError:
            var: contextvars.ContextVar[Request | None] = contextvars.ContextVar(
                f"djwork.request:{getattr(self, 'name', type(self).__name__)}", default=None)
            return self.__dict__.setdefault("_request_var", var)

    def _pushed_tokens(self) -> contextvars.ContextVar[tuple[contextvars.Token[Request | None], ...]]:
        try:
            return self.__dict__["_pushed_token_var"]
        except KeyError:
            var: contextvars.ContextVar[tuple[contextvars.Token[Request | None], ...]] = contextvars.ContextVar(
                f"djwork.pushed:{getattr(self, 'name', type(self).__name__)}", default=())
            return self.__dict__.setdefault("_pushed_token_var", var)

    def push_request(self, request: Request | None = None, **fields: Any) -> Request:
        """Make ``request`` (or a new one from ``fields``) ``self.request`` here until ``pop_request``."""
        if request is None:
            request = Request(task=getattr(self, "name", None), **fields)
        tokens = self._pushed_tokens()
        # A tuple, never mutated: a context copied from this one can't see later pushes here.
        tokens.set((*tokens.get(), self.request_var().set(request)))
        return request

    def pop_request(self) -> None:
        tokens = self._pushed_tokens()
        pushed = tokens.get()
        if pushed:
            tokens.set(pushed[:-1])
            self.request_var().reset(pushed[-1])

    # --- retrying from the body --------------------------------------------------------------
    def retry(self, exc: BaseException | None = None, countdown: float | None = None,
              eta: dt.datetime | float | None = None, max_retries: int | None = None,
              expires: float | dt.timedelta | dt.datetime | None = None, **options: Any) -> Retry:
        """Raise ``Retry`` so the worker schedules another attempt (Celery's ``Task.retry``).

        Past the limit the original ``exc`` is re-raised (or MaxRetriesExceededError),
        so the job fails for good as Celery's does.
        """
        name = getattr(self, "name", type(self).__name__)
        if options:
            raise TypeError(f"{name}.retry(): unsupported option(s) {sorted(options)} "
                            "(exc, countdown, eta, max_retries and expires are; docs/celery.md)")
        request = self.request
        limit = max_retries if max_retries is not None else self.max_retries
        if limit is not None and request.retries >= limit:
            if exc is not None:
                raise exc
            raise MaxRetriesExceededError(f"{name} {request.id} exceeded max_retries={limit}")
        if eta is not None:
            countdown = max(0.0, enqueue_options.moment(eta, name, "eta") - time.time())
        elif countdown is not None:
            # Checked here, inside the job: a NaN countdown stored as the retry's score never comes due.
            countdown = enqueue_options.seconds(countdown, name, "countdown")
        if countdown is None:
            countdown = self.default_retry_delay
        if expires is not None and not isinstance(expires, dt.datetime):
            # Checked here, inside the job, as the countdown is: a bad value fails this run, not the filing.
            expires = enqueue_options.seconds(expires, name, "expires")
        raise Retry(exc=exc, countdown=countdown, max_retries=limit, expires=expires)


    # --- canvas (djwork/canvas/replace.py fills CANVAS_VERBS) ---------------------------------
    def replace(self, sig: Any) -> Any:
        """Replace this job by ``sig`` (a task or a canvas), which takes over its id: its value is this job's
        result, and what its canvas hands on (Celery's ``Task.replace``). In a worker it raises ``Replaced``,
        so ``return self.replace(sig)`` and ``raise self.replace(sig)`` both end the run there; in an eager
        run (``apply()``) it returns the replacement's value, as Celery's does."""
        outcome = CANVAS_VERBS["replace"](self, sig)
        if isinstance(outcome, Replaced):
            raise outcome
        return outcome

    def add_to_chord(self, sig: Any, lazy: bool = False) -> Any:
        """Add ``sig`` to the chord header this job is a member of; the body gets its result last (Celery's)."""
        return CANVAS_VERBS["add_to_chord"](self, sig)


# The canvas's verbs of a running job, filled by djwork/canvas/replace.py when djwork.canvas is imported
# (``import djwork`` does): this module can't import the canvas, which imports it (an import cycle).
CANVAS_VERBS: dict[str, Any] = {}

