"""The seam where features attach to a job's run: ``RunHook``, the ``JobRun`` it sees, and a class's plan.

The Executor parses, resolves, runs the chain and settles; every feature's
part in a run (expiry, lock ties, batches, limiters, time limits, Celery's
hooks and signals, results, Django Tasks, history, metrics, the user's
``SERVER_MIDDLEWARE``) is a ``RunHook`` registered in installed_hooks.py.
docs/hooks.md describes the phases, their order and what a hook may add to
the settlement (the ``UnitOfWork``'s ``locks``, ``result`` and ``expired``,
written by the one Lua step that ends the job).

A hook costs a job nothing unless it joins its run: which hooks join, and in
which phases, is worked out once per job class (``HookPlan``), and per job
only when the payload carries one of the fields a keyed hook waits for.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from djwork.jobs.task_class import Request

if TYPE_CHECKING:
    from djwork.settings.conf import Config
    from djwork.worker.acks import AckBuffer
    from djwork.worker.fetch import UnitOfWork
    from djwork.worker.retry import Decision

# A run's status once it ended: the history's statuses. RAN: the body ran (or was filed as if it had).
OK, RETRY, DEAD, FAILED, RESCHEDULED = "ok", "retry", "dead", "failed", "rescheduled"
FAILED_STATUSES = (RETRY, DEAD, FAILED)
RAN = (OK, *FAILED_STATUSES)


class RunHook:
    """One feature's part in a job's run. Override only the phases the feature needs (docs/hooks.md).

    A phase a hook does not override costs nothing: the plan leaves the hook out of it.
    """

    # Whether its ``before``/``after`` may wait (a Redis round trip, user code): for a coroutine job
    # they then run on a finisher thread, so one slow call never stalls every job on the event loop.
    blocking = False

    def attach(self, executor: Any) -> None:
        """Once, when the Executor is built: for a hook that settles a run itself (``executor.abandon``)."""

    def joins(self, target: Any, config: Config) -> bool | tuple[str, ...]:
        """Once per job class (``target`` None: the class is unknown): False, True, or the payload
        fields of which one must be present for the hook to join a run."""
        return True

    def wraps(self, target: Any) -> bool:
        """Once per job class: whether ``around`` wraps its runs (default: whenever the hook joins)."""
        return True

    def admit(self, run: JobRun) -> str | None:
        """Before the job starts (resolved, or ``run.target`` None): a status string drops it unrun.

        A dropped job is acknowledged; the ``after`` phase sees the status, ``run.error`` None.
        """
        return None

    def around(self, run: JobRun, call_next: Callable[[], Any]) -> Any:
        """Wraps the body on a processor thread (the first registered is the outermost)."""
        return call_next()

    def allows_loop(self, run: JobRun) -> bool:
        """Whether a coroutine job this hook wraps may still run on the event loop (then ``around_async``)."""
        return False

    async def around_async(self, run: JobRun, call_next: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        """``around`` for a coroutine job on the event loop, in the job's own asyncio context."""
        return await call_next()

    def before(self, run: JobRun) -> None:
        """Just before the body, inside every ``around``."""

    def take_failure(self, run: JobRun, error: BaseException) -> bool:
        """The body raised: True when the hook files the job itself (setting ``run.status``), not the retry rules."""
        return False

    def after(self, run: JobRun, error: BaseException | None) -> None:
        """The run ended (``run.status``): before the settlement is written, so the hook may add to it."""


class Phases(NamedTuple):
    """The hooks of one kind of run, per phase, in registration order."""

    admit: tuple[RunHook, ...]
    around: tuple[RunHook, ...]
    before: tuple[RunHook, ...]
    failure: tuple[RunHook, ...]
    after: tuple[RunHook, ...]
    blocking: bool  # an ``after`` hook may wait: a coroutine job settles on a finisher thread


def _overrides(hook: RunHook, name: str) -> bool:
    return getattr(type(hook), name) is not getattr(RunHook, name)


class HookPlan:
    """The hooks that join one job class's runs, computed once; ``phases`` picks those of one payload."""

    __slots__ = ("_keyed", "_order", "_variants", "plain", "target", "triggers")

    def __init__(self, hooks: Sequence[RunHook], target: Any, config: Config) -> None:
        self.target = target
        self._order: list[tuple[RunHook, bool, frozenset[str]]] = []  # (hook, always, trigger fields)
        for hook in hooks:
            joined = hook.joins(target, config)
            if joined is False:
                continue
            fields = frozenset(() if joined is True else joined)
            self._order.append((hook, joined is True, fields))
        self._keyed = tuple(sorted({field for _, _, fields in self._order for field in fields}))
        self.triggers = frozenset(self._keyed)
        self._variants: dict[tuple[str, ...], Phases] = {}
        self.plain = self._phases(())

    def phases(self, payload: dict[str, Any]) -> Phases:
        """The phases of this payload's run: the plain ones unless it carries a keyed hook's field."""
        if self.triggers.isdisjoint(payload):  # one C-level check for the common job
            return self.plain
        present = tuple(field for field in self._keyed if field in payload)
        found = self._variants.get(present)
        if found is None:
            found = self._variants[present] = self._phases(present)
        return found

    def _phases(self, present: tuple[str, ...]) -> Phases:
        hooks = [hook for hook, always, fields in self._order if always or not fields.isdisjoint(present)]
        around = tuple(hook for hook in hooks if _overrides(hook, "around") and hook.wraps(self.target))
        after = tuple(hook for hook in hooks if _overrides(hook, "after"))
        return Phases(admit=tuple(hook for hook in hooks if _overrides(hook, "admit")), around=around,
                      before=tuple(hook for hook in hooks if _overrides(hook, "before")),
                      failure=tuple(hook for hook in hooks if _overrides(hook, "take_failure")), after=after,
                      blocking=any(hook.blocking for hook in after))


class JobRun:
    """One run of one job, as the hooks see it. The settlement is ``unit``'s ``locks``/``result``/``expired``."""

    __slots__ = ("acks", "class_name", "clock", "decision", "elapsed_ms", "error_class", "error_message", "jid",
                 "leading_args", "notes", "off_loop", "payload", "phases", "request", "result", "resumed", "started",
                 "status", "target", "tid", "unit", "wrap_awaitable")

    def __init__(self, unit: UnitOfWork, acks: AckBuffer, payload: dict[str, Any], jid: str, class_name: str,
                 target: Any, phases: Phases) -> None:
        self.unit = unit
        self.acks = acks
        self.payload = payload
        self.jid = jid
        self.class_name = class_name
        self.target = target  # the resolved job or Django task; None for an unknown class
        self.phases = phases
        self.request: Request | None = None  # a djwork job's ``self.request`` (its body's argument)
        self.started = 0.0  # wall clock at the start
        self.clock = 0.0  # perf_counter at the start
        self.tid = ""
        self.elapsed_ms = 0.0
        self.status = ""
        self.result: Any = None
        self.decision: Decision | None = None  # where the retry rules filed a failure
        self.error_class = ""
        self.error_message = ""
        # The run continued saved work (an iterable job's segment that started from a saved cursor): history.
        self.resumed = False
        self.leading_args: tuple[Any, ...] = ()  # passed before a Django task's own arguments (its context)
        self.wrap_awaitable: Callable[[Any], Any] | None = None  # around a coroutine awaited on a thread
        self.off_loop = phases.blocking  # a coroutine job's settling runs on a finisher thread
        self.notes: dict[RunHook, Any] | None = None

    def note(self, hook: RunHook, value: Any) -> None:
        """Keep ``value`` for ``hook`` until the run ends (read back with ``noted``)."""
        if self.notes is None:
            self.notes = {}
        self.notes[hook] = value

    def noted(self, hook: RunHook) -> Any:
        notes = self.notes
        return None if notes is None else notes.get(hook)


def build_request(payload: dict[str, Any], queue: str, jid: str, identity: str) -> Request:
    """A djwork job's ``self.request`` for this run (Celery's ``retries``: 0 on the first run)."""
    retry_count = payload.get("retry_count")
    args = payload.get("args") or []
    kwargs = payload.get("kwargs")
    return Request(id=jid, retries=(retry_count + 1) if isinstance(retry_count, int) else 0, queue=queue,
                   args=list(args), kwargs=dict(kwargs) if isinstance(kwargs, dict) else {}, payload=payload,
                   hostname=identity, task=payload["class"])
