"""Celery's composite canvases: ``chain``, ``group``, ``chord`` (nested in any direction) and ``chunks``.

They are plain descriptions, free of Redis: applying one hands it to djwork/canvas/plan.py (through
``signature.APPLY``), which compiles it into batches (djwork/canvas/nest.py). docs/canvas.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from djwork.canvas.signature import (
    APPLY,
    LINK_OPTIONS,
    XSTARMAP,
    CanvasError,
    Signature,
    apply,
    as_signature,
    task_name,
)


def as_node(value: Any, where: str) -> Any:
    """A member of a chain, group or chord: a signature, or a nested chain, group or chord."""
    if isinstance(value, (chain, group, chord)):
        return value
    return as_signature(value, where)


def partial(node: Any, args: Iterable[Any] | None, kwargs: dict[str, Any] | None) -> Any:
    """``node`` with ``args`` before (and ``kwargs`` over) the arguments of the tasks it starts with (Celery's
    partial application of a canvas: every member of a group, the first step of a chain, a chord's header)."""
    if not args and not kwargs:
        return node
    if isinstance(node, Signature):
        return node.clone(args, kwargs)
    if isinstance(node, group):
        return group(*(partial(task, args, kwargs) for task in node.tasks))
    if isinstance(node, chord):
        return chord([partial(task, args, kwargs) for task in node.header], node.body, **node.options)
    return chain(partial(node.tasks[0], args, kwargs), *node.tasks[1:], **node.options)


def _steps(items: tuple[Any, ...]) -> list[Any]:
    if len(items) == 1 and not isinstance(items[0], dict) and isinstance(items[0], Iterable):
        items = tuple(items[0])
    return list(items)


def freeze(node: Any) -> Any:
    """Reserve the id of every task in ``node`` (Celery's ``freeze()``): each job runs with its id. Returns it."""
    if isinstance(node, Signature):
        node.freeze()
    elif isinstance(node, chord):
        for task in [*node.header, *([node.body] if node.body is not None else [])]:
            freeze(task)
    else:
        for task in node.tasks:
            freeze(task)
    return node


class chain:
    """``chain(a.s(1), b.s(), c.s())`` or ``a.s(1) | b.s() | c.s()``: each result is the next step's first
    argument. A step may be a group, a chord or a chain (nested canvases, docs/canvas.md)."""

    def __init__(self, *tasks: Any, **options: Any) -> None:
        self.tasks: list[Any] = []
        for task in _steps(tasks):
            if isinstance(task, chain) and not task.options:
                self.tasks.extend(task.tasks)
            else:
                self.tasks.append(as_node(task, "chain"))
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

    def freeze(self) -> chain:
        """Reserve every task's id now; ``.id`` is then the last task's (the chain's, as in Celery)."""
        return freeze(self)

    @property
    def id(self) -> str | None:
        last = self.tasks[-1] if self.tasks else None
        return last.id if isinstance(last, (Signature, chain)) else None

    def link(self, callback: Any) -> Any:
        """Run ``callback`` with the last step's result once the chain succeeded (Celery's ``chain.link``)."""
        self.set(link=callback)
        return callback

    def link_error(self, errback: Any) -> Any:
        """Run ``errback`` when a step dies (each step's errback; a step's own wins for that step)."""
        self.set(link_error=errback)
        return errback

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.tasks))

    def __or__(self, other: Any) -> Any:
        return chain(*self.tasks, other, **self.options)

    def apply_async(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
                    **options: Any) -> Any:
        if not self.tasks:
            raise CanvasError("an empty chain has nothing to run")
        return apply("chain", partial(self, args, kwargs), options)

    def apply(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None, **options: Any) -> Any:
        """Run it now, in this process, step by step (Celery's eager ``chain.apply``): an ``EagerResult``."""
        return apply("eager", partial(self, args, kwargs))

    def delay(self, *args: Any, **kwargs: Any) -> Any:
        return self.apply_async(args, kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Send it (Celery's ``chain(...)()``); arguments go before the first step's own (a partial chain)."""
        return self.apply_async(args, kwargs)


class group:
    """``group(add.s(1, 1), add.s(2, 2))``: a batch; ``.get()`` returns the results in order. A member may
    be a chain, a chord or a group (its value is its result in the list)."""

    def __init__(self, *tasks: Any) -> None:
        self.tasks = [as_node(task, "group") for task in _steps(tasks)]

    def __repr__(self) -> str:
        return f"group({self.tasks!r})"

    def freeze(self) -> group:
        """Reserve every member task's id now."""
        return freeze(self)

    def __or__(self, other: Any) -> Any:
        return chord(self.tasks, other)  # Celery upgrades group | task to a chord

    def apply_async(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
                    **options: Any) -> Any:
        if options:
            raise CanvasError(f"group options {sorted(options)}: set options on its signatures")
        return apply("group", partial(self, args, kwargs).tasks)

    def apply(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None, **options: Any) -> Any:
        """Run every member now, in this process (Celery's eager ``group.apply``)."""
        return apply("eager", partial(self, args, kwargs))

    def delay(self, *args: Any, **kwargs: Any) -> Any:
        return self.apply_async(args, kwargs)

    def __call__(self, *args: Any, **options: Any) -> Any:
        """Send it (Celery's ``group(...)()``); arguments go before each member's own."""
        return self.apply_async(args, **options)

    def skew(self, start: float = 1.0, stop: float | None = None, step: float = 1.0) -> group:
        """Member *i* gets ``countdown=start + i * step``, held at ``stop`` once it is reached (Celery's)."""
        countdown = float(start)
        for task in self.tasks:
            if not isinstance(task, Signature):
                raise CanvasError("group.skew() sets each member's countdown: its members must be signatures")
            task.set(countdown=countdown)
            if stop is None or countdown + step <= stop:
                countdown += step
        return self

    def link(self, callback: Any) -> Any:
        """Celery's ``group.link``: ``callback``, made immutable, runs after the *first* member succeeds (it
        can't be handed the other members' results; a callback after the whole group is a chord)."""
        if not self.tasks:
            raise CanvasError("an empty group has no member to link a callback to")
        return self.tasks[0].link(as_signature(callback, "group link").clone(immutable=True))

    def link_error(self, errback: Any) -> tuple[Any, ...]:
        """Celery's ``group.link_error``: ``errback`` on every member, so it runs once per member that dies."""
        errback = as_signature(errback, "group link_error")
        return tuple(task.link_error(errback.clone()) for task in self.tasks)


class chord:
    """``chord(header)(body)``: the body runs once, with every header result in order, when all succeeded.
    Header members and the body may be nested canvases (a chord is the chain ``group(header) | body``)."""

    def __init__(self, header: Any, body: Any = None, **options: Any) -> None:
        self.header = group(header).tasks if not isinstance(header, group) else header.tasks
        self.body = as_node(body, "chord body") if body is not None else None
        self.options: dict[str, Any] = {}
        self.set(**options)

    def set(self, **options: Any) -> chord:
        unknown = set(options) - set(LINK_OPTIONS)
        if unknown:
            raise CanvasError(f"chord options are link and link_error only, not {sorted(unknown)}")
        for key, value in options.items():
            if value is None:
                continue
            if self.body is None:  # chord(header, link_error=...)(body): linked when the body comes
                self.options[key] = as_signature(value, f"chord {key}")
            else:
                (self.link if key == "link" else self.link_error)(as_signature(value, f"chord {key}"))
        return self

    @property
    def tasks(self) -> list[Any]:
        """The header's members (Celery's ``chord.tasks``): linking an errback to one links that member."""
        return self.header

    def link(self, callback: Any) -> Any:
        """Celery's ``chord.link``: a callback of the body, run with the body's result."""
        self._needs_body("link")
        self.body.link(callback)
        return callback

    def link_error(self, errback: Any) -> Any:
        """Celery's ``chord.link_error``: ``errback`` on the body (called, with the body's id, once when the
        header fails: the body never runs), and on each chord nested in the header; with
        ``CHORD_HEADER_ERRBACKS`` (Celery's ``task_allow_error_cb_on_chord_header``) on every header member too."""
        from djwork.settings.conf import get_config

        self._needs_body("link_error")
        errback = as_signature(errback, "chord link_error")
        for task in self.header:
            if get_config().chord_header_errbacks:
                task.link_error(errback.clone())
            elif isinstance(task, chord):
                task.link_error(errback)
        self.body.link_error(errback)
        return errback

    def _needs_body(self, verb: str) -> None:
        if self.body is None:
            raise CanvasError(f"chord.{verb}(): give the chord its body first, chord(header, body)")

    def on_error(self, errback: Any) -> chord:
        self.link_error(errback)
        return self

    def freeze(self) -> chord:
        """Reserve every header task's id and the body's now."""
        return freeze(self)

    def __repr__(self) -> str:
        return f"chord({self.header!r}, {self.body!r})"

    def __or__(self, other: Any) -> Any:
        return chain(self, other)

    def __call__(self, body: Any = None, **options: Any) -> Any:
        return chord(self.header, body if body is not None else self.body, **self.options).apply_async(**options)

    def apply_async(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
                    **options: Any) -> Any:
        if self.body is None:
            raise CanvasError("a chord needs a body: chord(header)(body)")
        return apply("chord", partial(self, args, kwargs), options)

    def apply(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None, **options: Any) -> Any:
        """Run the header, then the body, now, in this process (Celery's eager ``chord.apply``)."""
        return apply("eager", partial(self, args, kwargs))

    def delay(self, *args: Any, **kwargs: Any) -> Any:
        return self.apply_async(args, kwargs)


class chunks:
    """``task.chunks(items, n)``: ``len(items)/n`` jobs, each calling the task on ``n`` argument tuples."""

    def __init__(self, task: Any, items: Iterable[Any], n: int) -> None:
        if not isinstance(n, int) or n < 1:
            raise CanvasError(f"chunks: n must be a positive integer, got {n!r}")
        self.task = task_name(task)
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


APPLY["pipe"] = chain  # ``sig | other``: Signature can't import this module (it is imported by it)
