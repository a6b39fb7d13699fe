"""Nested canvases as batches: a chain, group or chord of any depth, compiled into batches that are
written, with the jobs that start first, in one MULTI.

The shapes, after flattening (a chain inside a chain is its steps; ``chord(header, body)`` is the chain
``[group(header), body]``, as Celery's ``group | body``):

- a **chain** is a list of steps, each a task or a group; each step is a batch of its own (a task
  step: a one-job batch, ``value = one``; a group step: the group's batch, ``value = all``). The jobs a
  step starts with are its *entries* (a group's: every member's entries), pre-written as the
  ``success`` callbacks of the step before (lua/batch_lib.lua pushes them all, claimed once, with
  that step's value as their first argument);
- a **group** is a batch whose members are its tasks' jids and, for a nested canvas, the member
  ``b-<bid>`` of that canvas's batch, the child (``parent`` field): a nested group's batch, a one-job
  batch for a task with links, or, for a chain, a *container* batch (``value = last``) whose members
  are its steps' batches in order.

A child that succeeds hands its ``value`` to its parent as that member's result, and a canvas child that
loses a member is dead for its parent at once (lua/batch_lib.lua, ``canvas_keep_value``,
``canvas_fail_parent``): results come back nested, in order, and a failure reaches the outermost batch,
which the ref's ``.get()`` reads. docs/canvas.md.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from djwork.canvas import plan as plans
from djwork.canvas.shapes import chain, chord, group
from djwork.canvas.signature import HAND_ON, LINK_OPTIONS, CanvasError, Signature, is_task
from djwork.payload import new_jid
from djwork.results.record import PAYLOAD_FIELD


@dataclass
class Entry:
    """A job that starts its node: its signature (jid reserved), the batch it is a member of."""

    sig: Signature
    bid: str


@dataclass
class Step:
    """A chain step's batch and the jobs that start it."""

    plan: plans.Plan
    entries: list[Entry]
    kind: str  # "one" (a task) or "all" (a group): what it hands the next step


def unlinked(sig: Signature) -> Signature:
    """``sig`` without links, its jid reserved (a pending member is named before its job exists)."""
    options = {key: value for key, value in sig.options.items() if key not in LINK_OPTIONS}
    options["jid"] = options.get("jid") or new_jid()
    return Signature(sig.task, sig.args, sig.kwargs, options, sig.immutable, sig["subtask_type"])


class Header(group):
    """A chord's header as a chain step: a group whose batch, when a member dies, calls the body's errback
    once, with the body's id (Celery's ``chord_error_from_stack``: the body never runs, its errbacks do)."""

    def __init__(self, tasks: list[Any], errback: Signature | None, body_id: str | None) -> None:
        super().__init__(*tasks)
        self.errback = errback
        self.body_id = body_id


def _with_id(sig: Signature) -> Signature:
    """``sig``, links kept, with its jid reserved now (the header's errback names the body by it)."""
    return sig if sig.id else sig.clone(jid=new_jid())


def steps_of(node: Any) -> tuple[list[Any], dict[str, Any]]:
    """A chain's or chord's steps, flattened, and its own link options (a chord's: its body chain's)."""
    if isinstance(node, chord):
        if node.body is None:
            raise CanvasError("a chord needs a body: chord(header)(body)")
        if is_task(node.body):
            body_steps, options = [_with_id(node.body)], {}
            errback = body_steps[0].options.get("link_error")
        else:
            body_steps, options = steps_of(node.body)
            if is_task(body_steps[0]):
                body_steps[0] = _with_id(body_steps[0])
            errback = options.get("link_error") or (
                body_steps[0].options.get("link_error") if is_task(body_steps[0]) else None)
        body_id = body_steps[0].id if is_task(body_steps[0]) else None
        # The chord's own link/link_error went onto its body (chord.link, chord.link_error); an outer
        # chain's errback still reaches the header's batch as any step's (Compiler.chain).
        return [Header(node.header, errback, body_id), *body_steps], options
    if isinstance(node, chain):
        found: list[Any] = []
        for step in node.tasks:
            if isinstance(step, (chain, chord)):
                inner, options = steps_of(step)
                found.extend(_carry(inner, options))
            else:
                found.append(step)
        return found, dict(node.options)
    return [node], {}


def _carry(steps: list[Any], options: dict[str, Any]) -> list[Any]:
    """An inner chain's own links, kept when it is flattened into the chain around it (Celery keeps them):
    its ``link_error`` on each of its tasks that has none, its ``link`` on its last step."""
    errback, link = options.get("link_error"), options.get("link")
    if errback is None and link is None:
        return steps

    def with_errback(node: Any) -> Any:
        if is_task(node):
            return node.clone(link_error=errback) if errback is not None and not node.options.get("link_error") \
                else node
        if isinstance(node, Header):  # a chord's header: its errback is the body's, called once
            return node
        return group(*(with_errback(task) for task in node.tasks)) if isinstance(node, group) else node

    carried = [with_errback(step) for step in steps]
    if link is not None:
        if not is_task(carried[-1]) or carried[-1].options.get("link"):
            raise CanvasError(f"{link!r}: a link on an inner chain whose last step is a group (or has its own "
                              "link) is not supported; make the group a chord's header")
        carried[-1] = carried[-1].clone(link=link)
    return carried


def _plain_group_of_tasks(node: Any) -> bool:
    return isinstance(node, group) and not isinstance(node, Header) and bool(node.tasks) and \
        all(map(is_task, node.tasks))


def _linked_group_steps(nodes: list[Any], errback: Signature | None) -> list[Any]:
    """A chain's group steps as Celery's chain.link_error and its upgrade make them: the chain's errback on each
    member task (it runs once per member that dies, not once per group), and a group step followed by a task
    made that task's chord header (Celery upgrades ``group | task`` to a chord): when the group fails, the task
    never runs and its errback (its own, else the chain's) runs once, naming it."""
    made = list(nodes)
    for index, node in enumerate(nodes):
        if not _plain_group_of_tasks(node):
            continue
        members = [task.clone(link_error=errback) if errback is not None and not task.options.get("link_error")
                   else task for task in node.tasks]
        after = nodes[index + 1] if index + 1 < len(nodes) else None
        body_errback = (after.options.get("link_error") or errback) if is_task(after) else None
        if body_errback is not None:
            made[index + 1] = _with_id(after)
            made[index] = Header(members, body_errback, made[index + 1].id)
        elif errback is not None:
            made[index] = group(*members)
    return made


class Compiler:
    """Walks a canvas, creating its batches (``plans``) and naming the jobs it starts with."""

    def __init__(self) -> None:
        self.plans: list[plans.Plan] = []
        self.root_id = ""  # Celery's root_id: the canvas's first task's id (the first entry reserved)
        self.task_ids: dict[str, str] = {}  # b-<bid> of a one-job batch (a member with links) -> its job's id

    def reserve(self, sig: Signature) -> Signature:
        reserved = unlinked(sig)
        self.root_id = self.root_id or reserved.options["jid"]
        return reserved

    def new_plan(self, description: str, value: str, parent: plans.Plan | None) -> plans.Plan:
        made = plans.Plan(plans.new_bid(), description, value=value, parent=parent.bid if parent else "")
        self.plans.append(made)
        if parent is not None:
            parent.jids.append(f"b-{made.bid}")
        return made

    def member(self, node: Any, into: plans.Plan) -> list[Entry]:
        """``node`` as a member of the group batch ``into``; returns its entries."""
        if is_task(node):
            if not (node.options.get("link") or node.options.get("link_error")):
                sig = self.reserve(node)
                into.jids.append(sig.options["jid"])
                return [Entry(sig, into.bid)]
            # An errback or callback on a member: the member is a one-job batch whose callbacks they are.
            own = self.new_plan(f"canvas: {node.task} with links", "one", into)
            plans.links(own, node.options)
            sig = self.reserve(node)
            self.task_ids[f"b-{own.bid}"] = sig.options["jid"]
            return self.member(sig, own)
        if isinstance(node, group):
            # A group inside a group (or a chord's header) is unrolled into it, as Celery's is: its members
            # are the outer group's, and their results come back in the outer list, not as a list of their own.
            return [entry for task in node.tasks for entry in self.member(task, into)]
        steps, options = steps_of(node)
        if not steps:
            raise CanvasError("an empty chain inside a canvas has nothing to run")
        if len(steps) == 1:
            return self.member(steps[0], into)
        container = self.new_plan(f"canvas: chain of {len(steps)}", "last", into)
        return self.chain(steps, options, container)[0].entries

    def step(self, node: Any, index: int, total: int, container: plans.Plan | None, before: Any = None) -> Step:
        where = f"canvas: chain step {index + 1}/{total}"
        if is_task(node):
            own = self.new_plan(f"{where} {node.task}", "one", container)
            if node.options.get("link") is not None:  # run beside the next step, with the same value
                plans.links(own, {"link": node.options["link"]})
            sig = self.reserve(node)
            own.jids.append(sig.options["jid"])
            return Step(own, [Entry(sig, own.bid)], "one")
        if not isinstance(node, group):
            raise CanvasError(f"a chain step is a task or a group, not {node!r}")
        if not node.tasks and index > 0:
            # Celery calls what follows an empty group with [] (an empty chord header's body); a batch with
            # no job would have nothing to start it once the step before ends: one job hands on [], on the
            # queue of the task before (the default queue may have no worker).
            queue = before.options.get("queue") if is_task(before) else None
            return self.step(Signature(HAND_ON, [[]], options={"queue": queue} if queue else {}, immutable=True),
                             index, total, container)
        own = self.new_plan(f"{where} group of {len(node.tasks)}", "all", container)
        return Step(own, [entry for task in node.tasks for entry in self.member(task, own)], "all")

    def chain(self, nodes: list[Any], options: dict[str, Any], container: plans.Plan | None) -> list[Step]:
        """Each step's batch; the entries of step *i+1* as the success callbacks of step *i*."""
        nodes = _linked_group_steps(nodes, options.get("link_error"))
        steps = [self.step(node, index, len(nodes), container, nodes[index - 1] if index else None)
                 for index, node in enumerate(nodes)]
        for before, after in itertools.pairwise(steps):
            after.plan.after = before.plan.bid
            # Celery's parent_id: the task whose result this one receives; after a group, the member whose end
            # pushed it, which only the Lua step that pushes it knows (lua/batch_lib.lua, batch_push).
            fields = {"root_id": self.root_id, PAYLOAD_FIELD: True,
                      "parent_id": before.plan.jids[0] if before.kind == "one" else None}
            for entry in after.entries:
                _, head, spec = plans.callback(entry.sig, before.kind, entry.bid, before.plan.bid, fields)
                before.plan.add_callback("success", head, spec)
        for node, made in zip(nodes, steps, strict=True):
            if isinstance(node, Header) and node.errback is not None:
                plans.add_errback(made.plan, node.errback, node.body_id)
                continue
            if _plain_group_of_tasks(node):
                continue  # its members carry the chain's errback (_linked_group_steps)
            errback = (node.options.get("link_error") if is_task(node) else None) or \
                options.get("link_error")
            if errback is not None:
                plans.add_errback(made.plan, errback)
        if options.get("link") is not None:
            last = steps[-1]
            _, head, spec = plans.callback(options["link"], last.kind, None, last.plan.bid)
            last.plan.add_callback("success", head, spec)
        return steps
