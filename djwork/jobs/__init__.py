"""``@djwork.job``: a plain function that can also be enqueued, Sidekiq- and Celery-style.

    @djwork.job(queue="mail", retry=5)
    def send_welcome(user_id): ...

    send_welcome.delay(42)                      # Celery
    send_welcome.apply_async(args=[42], countdown=60)
    send_welcome.perform_async(42)              # Sidekiq
    send_welcome.perform_in(60, 42)
    send_welcome.set(queue="low").delay(42)
    send_welcome.delay_many([(1,), (2,)])       # one round trip
    send_welcome.delay_on_commit(42)            # after the surrounding transaction commits
    send_welcome(42)                            # runs inline, now

    @djwork.job(soft_time_limit=50, time_limit=60)   # docs/celery.md, Time limits
    def export(report_id): ...

    @djwork.job(unique_for=600)                 # one copy at a time (docs/unique.md)
    def sync_account(account_id): ...
    sync_account.delay(42).duplicate_of         # None, or the jid already holding the lock

The payload's ``class`` is the job's name (its dotted path unless ``name=``
is given), which a worker resolves through the registry. The enqueue verbs
themselves, shared with ``job.set(...)``, are in djwork.jobs.enqueue.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import inspect
from collections.abc import Callable, Iterable
from typing import Any

from djwork import options as enqueue_options
from djwork import unique
from djwork.jobs import decorator_options as job_options
from djwork.jobs import priority as job_priority
from djwork.jobs import pydantic_models
from djwork.jobs.enqueue import ABSOLUTE_EPOCH_THRESHOLD, PAYLOAD_OPTIONS, Enqueueing, JobOptions, JobRef
from djwork.jobs.task_class import HOOKS, MaxRetriesExceededError, Request, Retry, Task
from djwork.limiter.job_limits import job_limits
from djwork.payload import build, check_arguments
from djwork.results import record as result_record
from djwork.results import revoke_events
from djwork.settings.conf import get_config

__all__ = ["ABSOLUTE_EPOCH_THRESHOLD", "Job", "JobRef",
           "MaxRetriesExceededError", "Request", "Retry", "Task", "UnknownJobClass", "job",
           "registry", "resolve", "shared_task"]

registry: dict[str, Job] = {}


class UnknownJobClass(LookupError):
    """A worker fetched a job whose ``class`` no djwork job, Django task or alias names."""


# Its one public name, whichever way the job goes (dead at once, or the retry
# way): error_class is built from __module__, and Sidekiq's pages show it.
UnknownJobClass.__module__ = "djwork"


class Job(Task, Enqueueing):
    """A function registered as a djwork job. Calling it runs it inline.

    The options are ``@djwork.job``'s (djwork/jobs/decorator_options.py; docs/api.md, docs/celery.md); a
    ``base=`` class's attributes are their defaults.
    """

    def __init__(self, func: Callable[..., Any], **given: Any) -> None:
        self.func = func
        # None: the RESULTS setting decides, at enqueue (docs/celery.md).
        self.ignore_result = job_options.check_ignore_result(given.get("ignore_result"), func)
        where = given.get("name") or getattr(type(self), "name", None) or f"{func.__module__}.{func.__qualname__}"
        option = job_options.collect(type(self), where, given)
        self.name = option["name"] or where
        if option.get("pydantic"):  # Celery 5.5's option (djwork/jobs/pydantic_models.py)
            self.func = func = pydantic_models.validating(
                func, self.name, strict=bool(option.get("pydantic_strict")), context=option.get("pydantic_context"),
                dump_kwargs=option.get("pydantic_dump_kwargs"))
        self.queue = enqueue_options.check_queue(option["queue"], self.name)
        # A job that names its queue keeps it; the others are routed at enqueue (ROUTES, DEFAULT_QUEUE), as
        # Celery's task_routes and task_default_queue route a task without a queue of its own.
        self.queue_given = "queue" in given or type(self).queue != Task.queue
        # Acquired by the worker before the body runs, released after (djwork/worker/limits.py).
        self.limits = job_limits(self.name, option.get("limits"), option["rate_limit"])
        self.uniqueness = unique.check(self.name, option.get("unique_for"), option.get("unique_until"),
                                       option.get("unique_args"))
        max_retries = option["max_retries"]
        retry_kwargs = option["retry_kwargs"]
        retry = option.get("retry")
        if retry is None:
            # Celery's limits, in the order Celery reads them, become the payload's Sidekiq `retry`.
            retry = next((value for value in (max_retries, retry_kwargs.get("max_retries")) if value is not None),
                         None)
        # None: the failure rules decide, at enqueue (payload_retry): the FAILURES setting may be changed later.
        self.declared_retry = None if retry is None else job_options.check_retry(retry, self.name)
        self.max_retries = max_retries if max_retries is not None else (
            None if retry in (None, True) else (0 if retry is False else retry))
        self.failures = option["failures"]
        bind = option.get("bind", False)
        self.bind = bind
        self.default_retry_delay = option["default_retry_delay"]
        self.autoretry_for = option["autoretry_for"]
        self.dont_autoretry_for = option["dont_autoretry_for"]
        self.retry_kwargs = retry_kwargs
        self.retry_backoff = option["retry_backoff"]
        self.retry_backoff_max = option["retry_backoff_max"]
        self.retry_jitter = option["retry_jitter"]
        self.expires = option["expires"]
        self.typing = option["typing"]
        for accepted in job_options.GUARANTEED:  # kept for code that reads them; djwork behaves so always
            setattr(self, accepted, option[accepted])
        # Read by the worker as the job starts (djwork/worker/job_start.py); None: TRACK_STARTED decides.
        self.track_started = option["track_started"]
        # Checked once here: the worker calls the hooks (and takes their cost) only for a class that has any.
        self.hooked = any(getattr(type(self), hook) is not getattr(Task, hook) for hook in HOOKS)
        backtrace, dead, tags = option.get("backtrace"), option.get("dead"), option.get("tags")
        retry_queue, retry_for = option.get("retry_queue"), option.get("retry_for")
        soft_time_limit, time_limit = option.get("soft_time_limit"), option.get("time_limit")
        self.options = {
            key: value for key, value in {
                "backtrace": backtrace, "dead": dead, "tags": tags,
                "retry_queue": retry_queue, "retry_for": retry_for,
                "soft_time_limit": soft_time_limit, "time_limit": time_limit,
            }.items() if value is not None
        }
        # A job's own priority (the decorator's or its class's) is each call's default (docs/priority.md).
        self.options.update(job_priority.celery_fields(option["priority"]))
        # Declared, not refused (manage.py check reports it, djwork.E075): every call of it raises, as Celery's.
        job_options.check_payload_options(self.options, self.name, order=False)
        self.is_async = inspect.iscoroutinefunction(func)
        signature = inspect.signature(func)  # a local: job.signature() is the canvas verb (djwork/canvas)
        parameters = list(signature.parameters.values())
        # A bound function without parameters imports, as under Celery, and fails each run with a
        # TypeError naming the job (an autoretry_for=(Exception,) retries it like any other error).
        self._takes_self = bool(parameters)
        if bind:
            parameters = parameters[1:]
        self.call_signature = signature.replace(parameters=parameters)
        self.positional_names = [
            p.name for p in parameters
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        # Fast arity check for the common signature (plain positional-or-keyword
        # parameters, required ones first): a dozen dict lookups instead of
        # Signature.bind; any other shape, or any refusal, goes through bind,
        # which raises Python's own message.
        self._plain_names: tuple[str, ...] | None = None
        if all(p.kind is p.POSITIONAL_OR_KEYWORD for p in parameters):
            self._plain_names = tuple(p.name for p in parameters)
            self._plain_index = {name: index for index, name in enumerate(self._plain_names)}
            self._plain_required = sum(1 for p in parameters if p.default is p.empty)
        self.__doc__ = func.__doc__
        self.__name__ = getattr(func, "__name__", self.name)
        self.__module__ = func.__module__
        self.__qualname__ = getattr(func, "__qualname__", self.name)
        self.__wrapped__ = func
        registry[self.name] = self

    def __repr__(self) -> str:
        return f"<djwork.Job {self.name}>"

    @property
    def payload_retry(self) -> bool | int:
        """The payload's ``retry`` field (not ``self.retry``: that is Celery's ``Task.retry()``).

        A job that gave no limit gets its failure rules' default: Celery's 3 retries asked for, or
        Sidekiq's ``True`` (``MAX_RETRIES``, 25).
        """
        if self.declared_retry is not None:
            return self.declared_retry
        return job_options.CELERY_MAX_RETRIES if self.fails_unless_retried else True

    # --- running -------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.run(Request(args=list(args), kwargs=dict(kwargs), task=self.name, called_directly=True))

    def run(self, request: Request) -> Any:
        """What a worker calls: the function with this execution's arguments, ``request`` as ``self.request``."""
        if self.is_async:
            return self._run_async(request)
        var = self.request_var()
        token = var.set(request)
        try:
            if self.bind:
                return self.func(*self._self_argument(), *request.args, **request.kwargs)
            return self.func(*request.args, **request.kwargs)
        finally:
            var.reset(token)

    async def _run_async(self, request: Request) -> Any:
        # Set around the await, not the call: the body of a coroutine runs only when awaited. Set in
        # the asyncio task's own context, so it holds across every await of this job alone.
        var = self.request_var()
        token = var.set(request)
        try:
            if self.bind:
                return await self.func(*self._self_argument(), *request.args, **request.kwargs)
            return await self.func(*request.args, **request.kwargs)
        finally:
            var.reset(token)

    def _self_argument(self) -> tuple[Any, ...]:
        if not self._takes_self:
            raise TypeError(f"{self.name}: bind=True passes the job as the first argument, and the function "
                            "takes no parameters (add `self`)")
        return (self,)

    def apply(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
              **options: Any) -> Any:
        """Run now, in this process, hooks and retries included; an ``EagerResult`` (djwork/jobs/eager.py).
        ``link=``/``link_error=`` run after it, in this process too (the canvas's eager run)."""
        from djwork.jobs.eager import apply

        links = {key: options.pop(key) for key in ("link", "link_error") if options.get(key) is not None}
        if links:
            if set(options) - {"task_id"}:
                raise TypeError(f"{self.name}.apply(): with link=/link_error=, only task_id= is supported, "
                                f"not {sorted(set(options) - {'task_id'})}")
            return self.signature(args, kwargs, **options, **links).apply()
        options.pop("link", None)
        options.pop("link_error", None)
        return apply(self, args, kwargs, **options)

    # --- enqueueing ---------------------------------------------------------
    def set(self, **options: Any) -> JobOptions:
        """A copy of the enqueue methods with these options (queue, retry, countdown, ...)."""
        return JobOptions(self, options)

    def build_payload(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None, *,
                      countdown: float | None = None, eta: dt.datetime | float | None = None,
                      expires: dt.datetime | float | None = None, queue: str | None = None,
                      retry: bool | int | None = None, jid: str | None = None,
                      unique_for: float | dt.timedelta | None = None, unique_until: str | None = None,
                      ignore_result: bool | None = None, **options: Any) -> tuple[dict[str, Any], float | None]:
        """The Sidekiq job hash for one call, and its run-at epoch (None = now)."""
        args = list(args) if args else []
        kwargs = dict(kwargs) if kwargs else {}
        if self.typing:  # Celery's typing=False: the arguments are not checked against the signature
            self.check_call(args, kwargs)
        elif get_config().strict_args:
            check_arguments(self.name, args, kwargs, self.positional_names)
        if options:
            jid, celery_fields = job_options.call_options(options, self.name, jid)
            unknown = set(options) - set(PAYLOAD_OPTIONS)
            if unknown:
                raise TypeError(f"{self.name}: unknown enqueue option(s) {sorted(unknown)}")
            chosen = {k: v for k, v in options.items() if k in PAYLOAD_OPTIONS}
            job_options.check_payload_options(chosen, self.name)
            extra = {**self.options, **chosen, **celery_fields}
        else:
            extra = dict(self.options)
        # A soft limit past the hard one (the call's against the decorator's, or the decorator's own): every
        # call raises, as Celery's does.
        enqueue_options.check_time_limit_order(extra, self.name)
        job_priority.settle_lane(extra)
        if retry is not None:
            retry = job_options.check_retry(retry, self.name)
        uniqueness = unique.for_call(self.uniqueness, self.name, unique_for, unique_until)
        at = enqueue_options.run_at(eta, countdown, self.name)
        expires = self.expires if expires is None else expires
        if expires is not None:
            extra["expires_at"] = enqueue_options.expires_at(expires, at, self.name)
        if queue is None:
            queue = self.queue if self.queue_given else routed_queue(self.name, get_config())
        else:
            queue = enqueue_options.check_queue(queue, self.name)
        if jid is not None:
            enqueue_options.check_jid(jid, self.name)
        ignore = job_options.check_ignore_result(ignore_result, self.name)
        if ignore is None:
            ignore = self.ignore_result if self.ignore_result is not None else not get_config().results
        if not ignore:
            extra[result_record.PAYLOAD_FIELD] = True
        payload = build(self.name, args, kwargs, queue=queue,
                        retry=self.payload_retry if retry is None else retry, jid=jid, extra=extra)
        if uniqueness is not None:
            unique.mark(payload, uniqueness, self.name)
        return payload, at

    def check_call(self, args: list[Any], kwargs: dict[str, Any]) -> None:
        """Refuse, at enqueue, a call the function can't take or arguments JSON can't carry."""
        if not self._plain_arity_ok(args, kwargs):
            try:
                self.call_signature.bind(*args, **kwargs)
            except TypeError as error:
                raise TypeError(f"{self.name}: {error}") from None
        if get_config().strict_args:
            check_arguments(self.name, args, kwargs, self.positional_names)

    def _plain_arity_ok(self, args: list[Any], kwargs: dict[str, Any]) -> bool:
        """True when the plain signature surely accepts the call; False means "ask Signature.bind"."""
        names = self._plain_names
        if names is None:
            return False
        given = len(args)
        if given > len(names):
            return False
        if kwargs:
            index = self._plain_index
            for key in kwargs:
                position = index.get(key)
                if position is None or position < given:
                    return False
            return all(names[position] in kwargs for position in range(given, self._plain_required))
        return given >= self._plain_required


def routed_queue(name: str, config: Any) -> str:
    """The queue of a job that names none: its ``ROUTES`` entry (exact name, then the first matching glob),
    else ``DEFAULT_QUEUE``."""
    routes = config.routes
    if not routes:
        return config.default_queue
    exact = routes.get(name)
    if exact is not None:
        return exact
    return next((queue for pattern, queue in routes.items() if fnmatch.fnmatchcase(name, pattern)),
                config.default_queue)


_classes: dict[type, type[Job]] = {}


def job_class(base: type | None) -> type[Job]:
    """The class of a job made with ``base=``: ``base``'s hooks and defaults over ``Job`` (made once per base)."""
    if base is None or base is Job:
        return Job
    if not (isinstance(base, type) and issubclass(base, Task)):
        raise TypeError(f"base= must be a djwork.Task subclass, got {base!r}")
    if issubclass(base, Job):
        return base
    made = _classes.get(base)
    if made is None:
        made = _classes[base] = type(base.__name__, (base, Job), {"__module__": base.__module__,
                                                                 "__qualname__": base.__qualname__})
    return made


def job(func: Callable[..., Any] | None = None, *, base: type | None = None, **options: Any) -> Any:
    """Decorator: ``@djwork.job`` or ``@djwork.job(queue=..., retry=..., bind=True, base=MyTask, ...)``.

    Sidekiq's failure rules (every exception retries) unless ``failures=``, a ``base=`` class or the
    ``FAILURES`` setting says Celery's (docs/celery.md, Failures).
    """
    return _decorator(func, base, options, celery=base is not None and base is not Job)


def shared_task(func: Callable[..., Any] | None = None, *, base: type | None = None, **options: Any) -> Any:
    """Celery's decorator: ``@djwork.job`` with Celery's failure rules (an exception fails the job unless it asks
    for a retry: ``self.retry()``, ``autoretry_for``), as code written for Celery expects."""
    return _decorator(func, base, options, celery=True)


def _decorator(func: Callable[..., Any] | None, base: type | None, options: dict[str, Any], *, celery: bool) -> Any:
    cls = job_class(base)
    if celery and "failures" not in options and cls.failures is None:
        options = {**options, "failures": "celery"}
    if func is not None and callable(func):
        return cls(func, **options)

    def decorate(inner: Callable[..., Any]) -> Job:
        return cls(inner, **options)

    return decorate


def resolve(name: str) -> Job | None:
    """The registered job called ``name`` (alias, registry, then importable dotted path)."""
    config = get_config()
    target = config.aliases.get(name, name)
    found = registry.get(target)
    if found is not None:
        return found
    from django.utils.module_loading import import_string

    try:
        obj = import_string(target)
    except ImportError:
        return None
    # A class that registers its instance on import (djwork.IterableJob) is found in the registry then.
    return obj if isinstance(obj, Job) else registry.get(target)


# task_revoked's sender, for the jobs djwork.revoke() removes (djwork/results/revoke_events.py).
revoke_events.resolve_job = resolve
