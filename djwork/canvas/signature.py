"""Celery's canvas objects: ``Signature`` (``task.s()``, ``.si()``), ``chain``, ``group``, ``chord``, ``chunks``.

A signature is a dict (Celery's own shape: ``task``, ``args``, ``kwargs``,
``options``, ``immutable``, ``subtask_type``), so it travels in a payload as
JSON and comes back with ``signature(d)``. Applying a canvas writes batches
(djwork/canvas/plan.py): each chain step and each chord body waits as the
pre-made member of a batch whose ``success`` callback it is, so every next
step is pushed exactly once by the Lua step that acks the previous one.
docs/canvas.md.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from typing import Any

from djwork import options as enqueue_options
from djwork import push_intercept
from djwork.conf import get_config

# Options a canvas signature may carry: the enqueue options, and the canvas's own links.
# ignore_result too: with results opt-in, apply_async(link=..., ignore_result=False) goes through a signature.
ENQUEUE_OPTIONS = ("queue", "countdown", "eta", "expires", "retry", "jid", "priority", "backtrace", "dead",
                   "tags", "retry_queue", "retry_for", "ignore_result")
LINK_OPTIONS = ("link", "link_error")
# The jobs behind map, starmap and chunks (djwork/canvas/builtins.py), by name: a worker imports them.
XMAP = "djwork.canvas.builtins.xmap"
XSTARMAP = "djwork.canvas.builtins.xstarmap"


# How each canvas is applied (djwork/canvas/plan.py fills this when djwork.canvas is imported, which
# importing this module always does first): the objects here stay free of Redis and of the job registry.
APPLY: dict[str, Callable[..., Any]] = {}
# How each canvas runs while jobs run at their push (ALWAYS_EAGER, inline()): in this thread, without Redis
# (djwork/eager_canvas.py fills it when djwork.testing.modes registers the eager runner).
EAGER_APPLY: dict[str, Callable[..., Any]] = {}


def apply(kind: str, *args: Any) -> Any:
    runner = EAGER_APPLY.get(kind)
    if runner is not None and push_intercept.runs_at_push(get_config().always_eager):
        return runner(*args)
    return APPLY[kind](*args)


class CanvasError(RuntimeError):
    """A canvas can't be built (a shape djwork refuses), or ``.get()`` found a member dead."""


class ChordError(CanvasError):
    """A chord's header lost a member (it died): the body did not run (Celery's ChordError)."""


def _name(task: Any) -> str:
    name = getattr(task, "name", task)
    if not isinstance(name, str) or not name:
        raise CanvasError(f"a signature names a djwork job (or its dotted name), not {task!r}")
    return name


def as_signature(value: Any, where: str) -> Signature:
    if isinstance(value, Signature):
        return value
    if isinstance(value, dict) and "task" in value:
        return signature(value)
    raise CanvasError(f"{where}: expected a signature (task.s(...)), got {value!r}")


class Signature(dict):
    """One task call, not yet sent: ``add.s(2, 2)``; ``add.si(2, 2)`` ignores the previous result."""

    def __init__(self, task: Any, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
                 options: dict[str, Any] | None = None, immutable: bool = False,
                 subtask_type: str | None = None) -> None:
        super().__init__(task=_name(task), args=list(args or ()), kwargs=dict(kwargs or {}), options={},
                         immutable=bool(immutable), subtask_type=subtask_type)
        self.set(**(options or {}))

    @property
    def task(self) -> str:
        return self["task"]

    @property
    def args(self) -> list[Any]:
        return self["args"]

    @property
    def kwargs(self) -> dict[str, Any]:
        return self["kwargs"]

    @property
    def options(self) -> dict[str, Any]:
        return self["options"]

    @property
    def immutable(self) -> bool:
        return bool(self["immutable"])

    def __repr__(self) -> str:
        call = ", ".join([*map(repr, self.args), *(f"{k}={v!r}" for k, v in self.kwargs.items())])
        return f"{self.task}{'!' if self.immutable else ''}({call})"

    def set(self, **options: Any) -> Signature:
        """Set enqueue options (``queue``, ``countdown``, ...) or links; returns the signature (Celery's)."""
        if "task_id" in options:  # Celery's name for the job's id
            options["jid"] = options.pop("task_id")
        unknown = set(options) - set(ENQUEUE_OPTIONS) - set(LINK_OPTIONS)
        if unknown:
            raise CanvasError(f"{self.task}: unknown signature option(s) {sorted(unknown)}")
        for key, value in options.items():
            if key == "eta" and isinstance(value, dt.datetime):
                value = enqueue_options.moment(value, self.task, "eta")  # an epoch: JSON carries it
            elif key in LINK_OPTIONS and value is not None:
                value = as_signature(value, f"{self.task} {key}")
            elif isinstance(value, dt.timedelta):
                value = value.total_seconds()
            self.options[key] = value
        return self

    def link(self, callback: Any) -> Any:
        """Run ``callback`` with this task's return value once it succeeds (one per signature)."""
        self._one("link", callback)
        return callback

    def link_error(self, errback: Any) -> Any:
        """Run ``errback`` (with the batch status of the failure) once this task dies (one per signature)."""
        self._one("link_error", errback)
        return errback

    def _one(self, key: str, value: Any) -> None:
        # Celery appends a second link; replacing the first without a word would drop a callback.
        if self.options.get(key) is not None and self.options[key] != value:
            raise CanvasError(f"{self.task}: one {key} per signature is supported; it already has "
                              f"{self.options[key]!r} (chain the callbacks instead)")
        self.set(**{key: value})

    def on_error(self, errback: Any) -> Signature:
        self.set(link_error=errback)
        return self

    def clone(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
              **options: Any) -> Signature:
        """A copy; ``args`` go before its own and ``kwargs`` over its own (a partial), unless it is
        immutable: then both are ignored (Celery's), and only options change."""
        extra = [] if self.immutable else list(args or ())
        merged = self.kwargs if self.immutable else {**self.kwargs, **(kwargs or {})}
        copy = Signature(self.task, [*extra, *self.args], merged, dict(self.options), self.immutable,
                         self["subtask_type"])
        return copy.set(**options)

    def freeze(self) -> Signature:
        return self

    def apply_async(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
                    **options: Any) -> Any:
        """Send it; with ``link=``/``link_error=`` it runs in a one-job batch whose callbacks they are."""
        return apply("signature", self.clone(args, kwargs, **options))

    def delay(self, *args: Any, **kwargs: Any) -> Any:
        return self.apply_async(args, kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the task here and now, as a function call (Celery's ``sig()``): nothing is sent."""
        if self.immutable:
            return apply("call", self.task, self.args, self.kwargs)
        return apply("call", self.task, [*args, *self.args], {**self.kwargs, **kwargs})

    def __invert__(self) -> Any:
        """``~sig``: send it and wait for its result (Celery's shell shortcut)."""
        return self.apply_async().get()

    def __or__(self, other: Any) -> Any:
        return chain(self, other)


def signature(value: Any, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
              immutable: bool = False, **options: Any) -> Signature:
    """``signature(d)``: back from its JSON dict; ``signature("tasks.add", args=(1, 2))``: by name."""
    if isinstance(value, dict) and "task" in value:
        if value.get("subtask_type") in ("chain", "group", "chord"):
            raise CanvasError("a serialized chain, group or chord can't be rebuilt with signature(); "
                              "only single task signatures travel as JSON")
        return Signature(value["task"], value.get("args"), value.get("kwargs"), value.get("options"),
                         bool(value.get("immutable")))
    return Signature(value, args, kwargs, options, immutable)


def _steps(items: tuple[Any, ...]) -> list[Any]:
    if len(items) == 1 and not isinstance(items[0], dict) and isinstance(items[0], Iterable):
        items = tuple(items[0])
    return list(items)


class chain:
    """``chain(a.s(1), b.s(), c.s())`` or ``a.s(1) | b.s() | c.s()``: each result is the next step's first argument."""

    def __init__(self, *tasks: Any, **options: Any) -> None:
        self.tasks: list[Signature] = []
        for task in _steps(tasks):
            if isinstance(task, chain):
                self.tasks.extend(task.tasks)
            else:
                self.tasks.append(as_signature(task, "chain"))
        self.options: dict[str, Any] = {}
        self.set(**options)

    def set(self, **options: Any) -> chain:
        unknown = set(options) - set(LINK_OPTIONS)
        if unknown:
            raise CanvasError(f"chain options are link and link_error only; set {sorted(unknown)} on its steps")
        self.options.update({key: as_signature(value, f"chain {key}") for key, value in options.items()})
        return self

    def on_error(self, errback: Any) -> chain:
        return self.set(link_error=errback)

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.tasks))

    def __or__(self, other: Any) -> Any:
        if isinstance(other, group):
            raise CanvasError("a group after a chain is not supported; chord(header)(body) is")
        return chain(*self.tasks, other, **self.options)

    def apply_async(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
                    **options: Any) -> Any:
        if not self.tasks:
            raise CanvasError("an empty chain has nothing to run")
        first = self.tasks[0].clone(args, kwargs)
        return apply("chain", [first, *self.tasks[1:]], {**self.options, **options})

    def delay(self, *args: Any, **kwargs: Any) -> Any:
        return self.apply_async(args, kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Send it (Celery's ``chain(...)()``); arguments go before the first step's own (a partial chain)."""
        return self.apply_async(args, kwargs)


class group:
    """``group(add.s(1, 1), add.s(2, 2))``: a batch; ``.get()`` returns the results in order."""

    def __init__(self, *tasks: Any) -> None:
        self.tasks = [as_signature(task, "group") for task in _steps(tasks)]

    def __repr__(self) -> str:
        return f"group({self.tasks!r})"

    def __or__(self, other: Any) -> Any:
        return chord(self.tasks, other)  # Celery upgrades group | task to a chord

    def apply_async(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
                    **options: Any) -> Any:
        if options:
            raise CanvasError(f"group options {sorted(options)}: set options on its signatures")
        return apply("group", [task.clone(args, kwargs) for task in self.tasks])

    def delay(self, *args: Any, **kwargs: Any) -> Any:
        return self.apply_async(args, kwargs)

    def __call__(self, *args: Any, **options: Any) -> Any:
        """Send it (Celery's ``group(...)()``); arguments go before each member's own."""
        return self.apply_async(args, **options)

    def skew(self, start: float = 1.0, stop: float | None = None, step: float = 1.0) -> group:
        """Member *i* gets ``countdown=start + i * step``, held at ``stop`` once it is reached (Celery's)."""
        countdown = float(start)
        for task in self.tasks:
            task.set(countdown=countdown)
            if stop is None or countdown + step <= stop:
                countdown += step
        return self

    def link(self, callback: Any) -> Any:
        raise CanvasError("a callback after a whole group is a chord: chord(group)(callback), or group | callback")

    def link_error(self, errback: Any) -> Any:
        raise CanvasError("a group takes no errback of its own: set link_error on each member's signature, "
                          "or use a chord and its on_error()")


class chord:
    """``chord(header)(body)``: the body runs once, with every header result in order, when all succeeded."""

    def __init__(self, header: Any, body: Any = None, **options: Any) -> None:
        self.header = group(header).tasks if not isinstance(header, group) else header.tasks
        self.body = as_signature(body, "chord body") if body is not None else None
        self.options: dict[str, Any] = {}
        self.set(**options)

    def set(self, **options: Any) -> chord:
        unknown = set(options) - set(LINK_OPTIONS)
        if unknown:
            raise CanvasError(f"chord options are link and link_error only, not {sorted(unknown)}")
        self.options.update({key: as_signature(value, f"chord {key}") for key, value in options.items()})
        return self

    def on_error(self, errback: Any) -> chord:
        return self.set(link_error=errback)

    def __call__(self, body: Any = None, **options: Any) -> Any:
        return chord(self.header, body if body is not None else self.body, **self.options).apply_async(**options)

    def apply_async(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
                    **options: Any) -> Any:
        if self.body is None:
            raise CanvasError("a chord needs a body: chord(header)(body)")
        return apply("chord", [task.clone(args, kwargs) for task in self.header], self.body,
                     {**self.options, **options})

    def delay(self, *args: Any, **kwargs: Any) -> Any:
        return self.apply_async(args, kwargs)


class chunks:
    """``task.chunks(items, n)``: ``len(items)/n`` jobs, each calling the task on ``n`` argument tuples."""

    def __init__(self, task: Any, items: Iterable[Any], n: int) -> None:
        if not isinstance(n, int) or n < 1:
            raise CanvasError(f"chunks: n must be a positive integer, got {n!r}")
        self.task = _name(task)
        self.items = [list(item) for item in items]
        self.n = n

    def group(self) -> group:
        return group(*(Signature(XSTARMAP, [self.task, self.items[start:start + self.n]])
                       for start in range(0, len(self.items), self.n)))

    def apply_async(self, **options: Any) -> Any:
        return self.group().apply_async(**options)

    def delay(self) -> Any:
        return self.apply_async()

    def __call__(self) -> Any:
        return self.apply_async()
