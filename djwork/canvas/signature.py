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
from djwork.settings.conf import get_config
from djwork.testing import push_intercept

# Options a canvas signature may carry: the enqueue options, and the canvas's own links.
# ignore_result too: with results opt-in, apply_async(link=..., ignore_result=False) goes through a signature.
ENQUEUE_OPTIONS = ("queue", "countdown", "eta", "expires", "retry", "jid", "priority", "backtrace", "dead",
                   "tags", "retry_queue", "retry_for", "ignore_result", "soft_time_limit", "time_limit",
                   # Celery's argsrepr/kwargsrepr and message properties: djwork/jobs/argument_reprs.py,
                   # djwork/jobs/message_properties.py (names only here: the canvas imports no job module).
                   "argsrepr", "kwargsrepr", "app_id", "user_id", "correlation_id", "reply_to", "message_id",
                   "type", "cluster_id", "content_type", "content_encoding", "delivery_mode")
LINK_OPTIONS = ("link", "link_error")
# The jobs behind map, starmap and chunks (djwork/canvas/builtins.py), by name: a worker imports them.
XMAP = "djwork.canvas.builtins.xmap"
XSTARMAP = "djwork.canvas.builtins.xstarmap"
# Hands its argument on: the last job of a replacement that ends in a group, an empty group after a step.
HAND_ON = "djwork.canvas.builtins.hand_on"


# How each canvas is applied (djwork/canvas/plan.py fills this when djwork.canvas is imported, which
# importing this module always does first): the objects here stay free of Redis and of the job registry.
APPLY: dict[str, Callable[..., Any]] = {}
# How each canvas runs while jobs run at their push (ALWAYS_EAGER, inline()): in this thread, without Redis
# (djwork/canvas/always_eager.py fills it when djwork.testing.modes registers the eager runner).
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


def task_name(task: Any) -> str:
    name = getattr(task, "name", task)
    if not isinstance(name, str) or not name:
        raise CanvasError(f"a signature names a djwork job (or its dotted name), not {task!r}")
    return name


# What a chain, group or chord says it is (Celery's ``subtask_type``): they are Signatures too, dicts in
# Celery's shape with their members in ``kwargs``, so a canvas travels as JSON like a task's signature.
COMPOSITE = ("chain", "group", "chord")
# How each of them is rebuilt from its dict (djwork/canvas/shapes.py fills it: this module can't import it).
REBUILD: dict[str, Callable[[dict[str, Any]], Any]] = {}


def is_task(value: Any) -> bool:
    """A single task's signature, not a chain, group or chord (which are Signatures too, as in Celery)."""
    return isinstance(value, Signature) and value.get("subtask_type") not in COMPOSITE


def as_signature(value: Any, where: str) -> Signature:
    if is_task(value):
        return value
    if isinstance(value, dict) and "task" in value and value.get("subtask_type") not in COMPOSITE:
        return signature(value)
    raise CanvasError(f"{where}: expected a signature (task.s(...)), got {value!r}")


class Signature(dict):
    """One task call, not yet sent: ``add.s(2, 2)``; ``add.si(2, 2)`` ignores the previous result."""

    def __init__(self, task: Any, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
                 options: dict[str, Any] | None = None, immutable: bool = False,
                 subtask_type: str | None = None) -> None:
        super().__init__(task=task_name(task), args=list(args or ()), kwargs=dict(kwargs or {}), options={},
                         immutable=bool(immutable), subtask_type=subtask_type)
        self.set(**(options or {}))

    @classmethod
    def from_dict(cls, value: dict[str, Any], app: Any = None) -> Signature:
        """A signature, chain, group or chord back from its dict (as JSON gives it back), its nested members
        rebuilt too (Celery's ``Signature.from_dict``; ``app`` is accepted and unused)."""
        kind = value.get("subtask_type")
        if kind in COMPOSITE:
            return REBUILD[kind](value)
        return Signature(value["task"], value.get("args"), value.get("kwargs"), value.get("options"),
                         bool(value.get("immutable")))

    @property
    def task(self) -> str:
        return self["task"]

    @property
    def name(self) -> str:
        """The task's name, as a job's ``name`` (Celery's duck typing of a signature with its task)."""
        return self["task"]

    @property
    def args(self) -> list[Any]:
        return self["args"]

    @args.setter
    def args(self, value: Iterable[Any]) -> None:  # Celery's `sig.args = (...)`: kept a list, as JSON has it
        self["args"] = list(value)

    @property
    def kwargs(self) -> dict[str, Any]:
        return self["kwargs"]

    @kwargs.setter
    def kwargs(self, value: dict[str, Any]) -> None:
        self["kwargs"] = dict(value)

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
        if "immutable" in options:  # Celery's set(immutable=True): the flag, not an enqueue option
            self["immutable"] = bool(options.pop("immutable"))
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

    @property
    def id(self) -> str | None:
        """The jid it will run as, once ``freeze()`` (or ``set(task_id=)``) reserved one."""
        return self.options.get("jid")

    def freeze(self) -> Signature:
        """Reserve its id now (Celery's ``freeze().id``): the job, when sent, runs with that jid."""
        if not self.options.get("jid"):
            from djwork.payload import new_jid

            self.options["jid"] = new_jid()
        return self

    def apply(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
              **options: Any) -> Any:
        """Run it now, in this process (Celery's eager ``apply``): an ``EagerResult``."""
        return apply("eager", self.clone(args, kwargs, **options))  # link=, link_error= run after it

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
        return apply("pipe", self, other)  # a chain (djwork/canvas/shapes.py fills it)


def signature(value: Any, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
              immutable: bool = False, **options: Any) -> Signature:
    """``signature(d)``: back from its JSON dict (a chain, group or chord too); ``signature("tasks.add",
    args=(1, 2))``: by name."""
    if isinstance(value, dict) and "task" in value:
        return Signature.from_dict(value)
    return Signature(value, args, kwargs, options, immutable)
