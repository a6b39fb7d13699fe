"""Testing modes: collect pushed jobs instead of writing them (``fake``), or run each at push (``inline``).

    with djwork.testing.fake() as jobs:
        signup(user)                       # code under test calls send_welcome.delay(user.id)
        assert len(jobs.for_job(send_welcome)) == 1
        jobs.drain()                       # runs them, and whatever they enqueue, retries included

    with djwork.testing.inline():
        signup(user)                       # send_welcome ran inside the .delay() call

Sidekiq's ``Sidekiq::Testing.fake!``/``inline!`` and Celery's ``task_always_eager``
(``DJWORK["ALWAYS_EAGER"]`` runs the same inline runner, registered below).
Pushes are intercepted by a push hook (djwork.testing.push_intercept, listed in
djwork/client/push_hooks.py) after the argument checks and the client middleware,
where the Redis write would be: a call refused for real
is refused here too. What differs from a real worker: docs/testing.md.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from djwork.canvas import always_eager  # noqa: F401 - canvases run eagerly wherever jobs run at their push
from djwork.jobs import (
    Job,
    Request,
    UnknownJobClass,
    resolve,
)
from djwork.payload import dumps, loads
from djwork.results import eager_records as eager_results
from djwork.settings.conf import get_config
from djwork.testing import push_intercept
from djwork.worker.retry import decide


@dataclass
class FakeJob:
    """One pushed job as fake mode keeps it: its payload (as it would be written) and its run-at epoch."""

    payload: dict[str, Any]
    at: float | None = None  # None: pushed to run now; else scheduled for this epoch

    @property
    def jid(self) -> str:
        return self.payload["jid"]

    @property
    def name(self) -> str:
        return self.payload["class"]

    @property
    def args(self) -> list[Any]:
        return list(self.payload.get("args") or [])

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.payload.get("kwargs") or {})

    @property
    def queue(self) -> str:
        return self.payload.get("queue") or "default"

    def __repr__(self) -> str:
        when = "" if self.at is None else f" at={self.at:.3f}"
        return f"<FakeJob {self.name} {self.jid} args={self.args!r} kwargs={self.kwargs!r}{when}>"


def _name_of(job: Any) -> str:
    name = job if isinstance(job, str) else getattr(job, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"expected a djwork job or a job name, got {job!r}")
    return name


class FakeJobs:
    """The jobs pushed inside a ``fake()`` block, oldest first."""

    def __init__(self) -> None:
        self.jobs: list[FakeJob] = []
        self.failed: list[tuple[FakeJob, BaseException]] = []  # out of retries while draining

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self) -> Iterator[FakeJob]:
        return iter(list(self.jobs))

    def __getitem__(self, index: int) -> FakeJob:
        return self.jobs[index]

    def for_job(self, job: Any) -> list[FakeJob]:
        """The pushed jobs of ``job`` (a djwork job, ``job.set(...)``, or its registered name)."""
        name = _name_of(job)
        return [pushed for pushed in self.jobs if pushed.name == name]

    def for_queue(self, queue: str) -> list[FakeJob]:
        return [pushed for pushed in self.jobs if pushed.queue == queue]

    def clear(self) -> None:
        self.jobs.clear()
        self.failed.clear()

    def collect(self, payload: dict[str, Any], at: float | None) -> str:
        # Through JSON, as Redis would store it: the job later sees lists, not tuples.
        self.jobs.append(FakeJob(loads(dumps(payload)), at))
        return payload["jid"]

    def drain(self, *, raise_errors: bool = True) -> int:
        """Run every collected job, oldest first, until none is left; returns how many runs there were.

        Jobs they push while the ``fake()`` block is open are collected and run too;
        scheduled jobs run regardless of their time. A job that raises goes
        through its retry options (``retry``, ``autoretry_for``, ``self.retry()``) and
        runs again at the end of the line, without waiting; once it is out of
        retries its error is raised (``raise_errors=False``: kept in ``failed``).
        """
        runs = 0
        while self.jobs:
            pushed = self.jobs.pop(0)
            runs += 1
            try:
                run_payload(pushed.payload)
            except Exception as error:
                target = resolve(pushed.name)
                decision = decide(pushed.payload, error, target if isinstance(target, Job) else None,
                                  pushed.queue, get_config().max_retries)
                if decision.target == "retry":
                    self.jobs.append(FakeJob(decision.payload, decision.score))
                    continue
                self.failed.append((FakeJob(decision.payload, pushed.at), error))
                if raise_errors:
                    raise
        return runs


def run_payload(payload: dict[str, Any]) -> Any:
    """Run one job payload in this thread, as a worker would call it (no middleware, limits or limiters)."""
    target = resolve(payload["class"])
    args = list(payload.get("args") or [])
    kwargs = payload.get("kwargs") or {}
    if target is not None:
        retry_count = payload.get("retry_count")
        request = Request(id=payload.get("jid"), retries=(retry_count + 1) if isinstance(retry_count, int) else 0,
                          queue=payload.get("queue") or "default", args=args, kwargs=dict(kwargs), payload=payload)
        result = target.run(request)
    else:
        task = _django_task(payload["class"])
        result = task.func(*args, **kwargs)
    if asyncio.iscoroutine(result):
        # A loop of its own: the caller's thread may have none (and must not have one running).
        loop = asyncio.new_event_loop()
        try:
            result = loop.run_until_complete(result)
        finally:
            loop.close()
    return result


def _django_task(name: str) -> Any:
    from django.utils.module_loading import import_string

    from djwork.tasks_compat import DjangoTask

    target = get_config().aliases.get(name, name)
    try:
        found = import_string(target)
    except ImportError:
        found = None
    if not isinstance(found, DjangoTask):
        raise UnknownJobClass(f"no djwork job, Django task or alias named {name!r} is registered in this process")
    if found.takes_context:
        raise NotImplementedError(f"{name}: a Django task with takes_context=True can't run in djwork's testing "
                                  "modes (its context is a result record in Redis); run it with a worker")
    return found


def run_now(payload: dict[str, Any], at: float | None) -> str:
    """``inline()`` and ``ALWAYS_EAGER``: run the job at its push (scheduled or not); its error propagates."""
    eager_results.remember(payload["jid"], run_payload(loads(dumps(payload))))
    return payload["jid"]


@contextlib.contextmanager
def fake() -> Iterator[FakeJobs]:
    """Collect every job pushed in the block instead of writing it to Redis (``jobs.drain()`` runs them)."""
    jobs = FakeJobs()
    with _diverted(jobs.collect):
        yield jobs


@contextlib.contextmanager
def inline() -> Iterator[None]:
    """Run every job pushed in the block at once, in the pushing thread; its exception reaches the caller."""
    with _diverted(run_now):
        yield


@contextlib.contextmanager
def _diverted(divert: push_intercept.Divert) -> Iterator[None]:
    push_intercept.active.append(divert)
    try:
        yield
    finally:
        push_intercept.active.remove(divert)


push_intercept.eager = run_now
