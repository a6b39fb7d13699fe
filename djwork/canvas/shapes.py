"""Celery's composite canvases: ``chain``, ``group`` and ``chord`` (nested in any direction).

They are plain descriptions, free of Redis: applying one hands it to djwork/canvas/plan.py (through
``signature.APPLY``), which compiles it into batches (djwork/canvas/nest.py). As in Celery, a chain, group
or chord is a ``Signature``: a dict in Celery's shape (``task`` ``celery.chain``, its members in
``kwargs``), so a job can return one or take one as an argument, and ``Signature.from_dict`` rebuilds it
with its members. docs/canvas.md.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from typing import Any

from djwork.canvas.signature import (
    APPLY,
    COMPOSITE,
    LINK_OPTIONS,
    REBUILD,
    CanvasError,
    Signature,
    apply,
    as_signature,
    is_task,
)


def as_node(value: Any, where: str) -> Any:
    """A member of a chain, group or chord: a signature, or a nested chain, group or chord (or its dict)."""
    if isinstance(value, Canvas):
        return value
    if isinstance(value, dict) and value.get("subtask_type") in COMPOSITE:
        return Signature.from_dict(value)
    if not isinstance(value, dict) and callable(getattr(value, "s", None)):
        return value.s()  # a task itself, as Celery's signature(task) takes it: no arguments of its own
    return as_signature(value, where)


def partial(node: Any, args: Iterable[Any] | None, kwargs: dict[str, Any] | None) -> Any:
    """``node`` with ``args`` before (and ``kwargs`` over) the arguments of the tasks it starts with (Celery's
    partial application of a canvas: every member of a group, the first step of a chain, a chord's header)."""
    if not args and not kwargs:
        return node
    if is_task(node):
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
    if is_task(node):
        node.freeze()
    elif isinstance(node, chord):
        for task in [*node.header, *([node.body] if node.body is not None else [])]:
            freeze(task)
    else:
        for task in node.tasks:
            freeze(task)
    return node


class Canvas(Signature):
    """What a chain, a group and a chord share: a Signature whose members live in its ``kwargs``."""

    kind = ""
    OPTIONS: tuple[str, ...] = LINK_OPTIONS

    def __init__(self, members: dict[str, Any], options: dict[str, Any]) -> None:
        dict.__init__(self, task=f"celery.{self.kind}", args=[], kwargs=members, options={}, immutable=False,
                      subtask_type=self.kind)
        self.set(**options)

    def set(self, **options: Any) -> Canvas:
        if "task_id" in options:  # Celery's name for the id
            options["jid"] = options.pop("task_id")
        unknown = set(options) - set(self.OPTIONS)
        if unknown:
            raise CanvasError(f"{self.kind} options are {', '.join(self.OPTIONS) or 'none'} only, "
                              f"not {sorted(unknown)}: set them on its signatures")
        for key, value in options.items():
            if value is None:
                self.options.pop(key, None)
            else:
                self.options[key] = as_signature(value, f"{self.kind} {key}") if key in LINK_OPTIONS else value
        return self

    def clone(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
              **options: Any) -> Any:
        """A deep copy (its members copied too), ``args``/``kwargs`` applied to the tasks it starts with."""
        return partial(copy.deepcopy(self), args, kwargs).set(**options)

    def freeze(self) -> Any:
        """Reserve every task's id now."""
        return freeze(self)

    def delay(self, *args: Any, **kwargs: Any) -> Any:
        return self.apply_async(args, kwargs)


class chain(Canvas):
    """``chain(a.s(1), b.s(), c.s())`` or ``a.s(1) | b.s() | c.s()``: each result is the next step's first
    argument. A step may be a group, a chord or a chain (nested canvases, docs/canvas.md)."""

    kind = "chain"
    OPTIONS = (*LINK_OPTIONS, "jid")

    def __init__(self, *tasks: Any, **options: Any) -> None:
        found: list[Any] = []
        for task in _steps(tasks):
            if isinstance(task, chain) and not task.options:
                found.extend(task.tasks)
            else:
                found.append(as_node(task, "chain"))
        super().__init__({"tasks": found}, options)

    @property
    def tasks(self) -> list[Any]:
        return self["kwargs"]["tasks"]

    def on_error(self, errback: Any) -> chain:
        return self.set(link_error=errback)

    def freeze(self, _id: str | None = None) -> chain:
        """Reserve every task's id now, the last task's ``_id`` when given; ``.id`` is then the last task's
        (the chain's, as in Celery: its result is its last task's)."""
        last = self.tasks[-1] if self.tasks else None
        if _id is not None and last is not None:
            if not (is_task(last) or isinstance(last, chain)):
                raise CanvasError("chain.freeze(id): the chain must end in a task to run with that id")
            if is_task(last):
                last.set(jid=_id)
            else:
                last.freeze(_id)
        freeze(self)
        self.options["jid"] = last.id if isinstance(last, Signature) else None
        return self

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
        return chain(*self.tasks, other, **{key: value for key, value in self.options.items() if key in LINK_OPTIONS})

    def apply_async(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
                    **options: Any) -> Any:
        if not self.tasks:
            raise CanvasError("an empty chain has nothing to run")
        return apply("chain", partial(self, args, kwargs), options)

    def apply(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None, **options: Any) -> Any:
        """Run it now, in this process, step by step (Celery's eager ``chain.apply``): an ``EagerResult``."""
        return apply("eager", partial(self, args, kwargs))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Send it (Celery's ``chain(...)()``); arguments go before the first step's own (a partial chain)."""
        return self.apply_async(args, kwargs)


class group(Canvas):
    """``group(add.s(1, 1), add.s(2, 2))``: a batch; ``.get()`` returns the results in order. A member may
    be a chain or a chord (its value is its result in the list); a group inside a group is unrolled into it,
    its members the outer group's (Celery's)."""

    kind = "group"
    OPTIONS = ()

    def __init__(self, *tasks: Any, **options: Any) -> None:
        if len(tasks) == 1 and isinstance(tasks[0], group):
            tasks = (tasks[0].tasks,)  # group(group(...)) is that group (Celery's)
        super().__init__({"tasks": [as_node(task, "group") for task in _steps(tasks)]}, options)

    @property
    def tasks(self) -> list[Any]:
        return self["kwargs"]["tasks"]

    def __repr__(self) -> str:
        return f"group({self.tasks!r})"

    def __or__(self, other: Any) -> Any:
        return chord(self, other)  # Celery upgrades group | task to a chord (its members, not copies)

    def apply_async(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
                    **options: Any) -> Any:
        if options:
            raise CanvasError(f"group options {sorted(options)}: set options on its signatures")
        tasks = partial(self, args, kwargs).tasks
        if len(tasks) == 1 and isinstance(tasks[0], (chain, chord)) and ends_in_group(tasks[0]):
            # Celery's special case: a group of one canvas that ends in a group is that group (its results
            # are the group's list, not a list of one list).
            return apply("chain", tasks[0] if isinstance(tasks[0], chain) else chain(tasks[0]), {})
        return apply("group", tasks)

    def apply(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None, **options: Any) -> Any:
        """Run every member now, in this process (Celery's eager ``group.apply``)."""
        return apply("eager", partial(self, args, kwargs))

    def __call__(self, *args: Any, **options: Any) -> Any:
        """Send it (Celery's ``group(...)()``); arguments go before each member's own."""
        return self.apply_async(args, **options)

    def skew(self, start: float = 1.0, stop: float | None = None, step: float = 1.0) -> group:
        """Member *i* gets ``countdown=start + i * step``, held at ``stop`` once it is reached (Celery's)."""
        countdown = float(start)
        for task in self.tasks:
            if not is_task(task):
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


def unrolled(tasks: Iterable[Any]) -> list[Any]:
    """A group's members with every group among them replaced by its own members (Celery unrolls them)."""
    return [member for task in tasks for member in (unrolled(task.tasks) if isinstance(task, group) else [task])]


def ends_in_group(node: Any) -> bool:
    """Whether the last thing ``node`` runs is a group (a chain's last step, a chord's body, down nested ones)."""
    if isinstance(node, group):
        return True
    if isinstance(node, chain):
        return bool(node.tasks) and ends_in_group(node.tasks[-1])
    if isinstance(node, chord):
        return node.body is not None and ends_in_group(node.body)
    return False


class chord(Canvas):
    """``chord(header)(body)``: the body runs once, with every header result in order, when all succeeded.
    Header members and the body may be nested canvases (a chord is the chain ``group(header) | body``)."""

    kind = "chord"

    def __init__(self, header: Any, body: Any = None, **options: Any) -> None:
        if isinstance(header, dict) and header.get("subtask_type") == "group":
            header = as_node(header, "chord header")
        if isinstance(header, (list, tuple)):
            # Copies, as Celery's chord makes of a list's members: a link_error put on chord.tasks then
            # changes the chord's, not the caller's signatures (which Celery's own tests compare to fresh ones).
            header = [member.clone() if isinstance(member, (Signature, Canvas)) else member for member in header]
        if not isinstance(header, (group, Iterator)):
            header = group(header)
        # A generator (any iterator) stays one until the chord is applied, which sends each member as it is
        # yielded (Celery consumes it lazily too; djwork/canvas/stream.py). Until then the chord is no JSON.
        members = {"header": header, "body": as_node(body, "chord body") if body is not None else None,
                   "kwargs": {}}
        super().__init__(members, options)

    @property
    def lazy(self) -> bool:
        """Whether its header is still an unconsumed generator."""
        return not isinstance(self["kwargs"]["header"], group)

    @property
    def header(self) -> list[Any]:
        """The header's tasks (a list: djwork's; Celery's ``chord.header`` is the group of them). Reading
        it consumes a generator header."""
        if self.lazy:
            self["kwargs"]["header"] = group(self["kwargs"]["header"])
        return self["kwargs"]["header"].tasks

    @property
    def body(self) -> Any:
        return self["kwargs"]["body"]

    def set(self, **options: Any) -> chord:
        """Its options are link and link_error, which go on the body (Celery's ``chord.link``/``link_error``);
        given before the body (``chord(header, link_error=...)(body)``) they wait in its options for it."""
        links = {key: options.pop(key) for key in LINK_OPTIONS if key in options}
        super().set(**options)
        for key, value in links.items():
            if value is None:
                continue
            if self.body is None:
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
        every = get_config().chord_header_errbacks
        # A generator header is left unconsumed (it is sent as it yields) unless its members need the errback.
        for task in self.header if every or not self.lazy else ():
            if every:
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

    def __repr__(self) -> str:
        return f"chord({'<generator>' if self.lazy else repr(self.header)}, {self.body!r})"

    def __or__(self, other: Any) -> Any:
        return chain(self, other)

    def __call__(self, body: Any = None, **options: Any) -> Any:
        header = self["kwargs"]["header"]  # as it is: a generator is consumed by the send, not here
        return chord(header, body if body is not None else self.body, **self.options).apply_async(**options)

    def apply_async(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
                    **options: Any) -> Any:
        if self.body is None:
            raise CanvasError("a chord needs a body: chord(header)(body)")
        if self.lazy and not args and not kwargs:
            return apply("stream", self, options)
        return apply("chord", partial(self, args, kwargs), options)

    def apply(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None, **options: Any) -> Any:
        """Run the header, then the body, now, in this process (Celery's eager ``chord.apply``)."""
        return apply("eager", partial(self, args, kwargs))


def _rebuild_chain(value: dict[str, Any]) -> chain:
    return chain(*value["kwargs"]["tasks"], **dict(value.get("options") or {}))


def _rebuild_group(value: dict[str, Any]) -> group:
    return group(*value["kwargs"]["tasks"], **dict(value.get("options") or {}))


def _rebuild_chord(value: dict[str, Any]) -> chord:
    members = value["kwargs"]
    return chord(members["header"], members.get("body"), **dict(value.get("options") or {}))


APPLY["pipe"] = chain  # ``sig | other``: Signature can't import this module (it is imported by it)
REBUILD.update(chain=_rebuild_chain, group=_rebuild_group, chord=_rebuild_chord)
