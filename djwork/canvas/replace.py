"""``self.replace(sig)`` and ``self.add_to_chord(sig)`` (Celery's), from a running job.

``replace`` gives the replacement's last job the running job's id, as Celery freezes the replacement with
it (a replacement ending in a group gets one more job, ``hand_on``, as Celery appends ``accumulate``): its
result record is the job's, so ``add_replaced.delay().get()`` returns the replacement's value. Then it
returns ``Replaced`` for ``Task.replace`` to raise (djwork/canvas/replace_run.py makes the run a success
that writes no record of its own). Inside a canvas both verbs add a member to the batch the running job
belongs to, in one MULTI, while that job is still pending (so the batch can't finish in between); on a Redis
Cluster in single-slot steps, the join last but the pushes (djwork/canvas/cluster_plan.py, lua/batch_join.lua):

- ``replace``: the replacement canvas becomes a child batch of the job's batch, and takes the job's
  place in the batch's order (``LSET`` of ``b-<bid>-order``), so the value the batch hands on (the next
  chain step's argument, the group's or chord header's list) is the replacement's, whatever the job
  returns. Run twice (a ``kill -9`` after the write, before the ack), the second run finds its jid
  gone from the order and writes nothing: the replacement is made once.
- ``add_to_chord``: a new member of the job's group (a chord header), appended: the body gets its
  result last, as in Celery.

A job sent on its own is replaced by the replacement alone (pushed, or written as a canvas). In an eager
run (``task.apply()``) ``replace`` runs the replacement eagerly and returns its value (Celery's).
``add_to_chord`` outside a canvas raises CanvasError. docs/canvas.md.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

from djwork import redis as redis_layer
from djwork.batches import runtime
from djwork.canvas import plan as plans
from djwork.canvas.nest import Compiler, steps_of
from djwork.canvas.shapes import as_node, chain
from djwork.canvas.signature import HAND_ON, CanvasError, Signature, is_task
from djwork.jobs import task_class
from djwork.jobs.task_class import Replaced
from djwork.redis import keys
from djwork.redis.cluster import is_cluster
from djwork.redis.key_layout import layout
from djwork.results.record import PAYLOAD_FIELD, wants_result
from djwork.settings.conf import get_config


def _batch_of(task: Any, what: str) -> tuple[str, str, dict[str, str]]:
    """The running job's jid, its batch and the batch's canvas fields; CanvasError outside a canvas."""
    request = task.request
    bid = runtime.bid_of(request.payload)
    if not request.id or bid is None:
        raise CanvasError(f"{what} works in a job that runs inside a canvas (a chain, group or chord): "
                          "a job sent on its own has no batch to hand the new value to")
    found = redis_layer.run(lambda conn: conn.hmget(keys.batch(bid), "canvas", "value", "keep_results"),
                            idempotent=True)
    fields = dict(zip(("canvas", "value", "keep_results"), (value.decode() if isinstance(value, bytes) else value
                                                              for value in found), strict=True))
    if not fields["canvas"] or not fields["keep_results"]:
        raise CanvasError(f"{what}: batch {bid} is not a canvas's (or is gone)")
    return request.id, bid, fields


def _compile(node: Any, bid: str, root_id: str | None, wrap_task: bool) -> tuple[Compiler, plans.Plan, list[Any]]:
    """``node`` as a member of the existing batch ``bid``: the new plans, a stand-in for that batch (its
    ``jids`` are the new members), the entries. ``wrap_task``: a lone task gets a batch of its own too."""
    compiler = Compiler()
    compiler.root_id = root_id or ""
    into = plans.Plan(bid, "")  # not written: it stands for the running job's batch, to name the child's slot
    node = as_node(node, "replace")
    if wrap_task and is_task(node):
        # A child batch even for one task: its value is what the slot hands on, whatever the job returns.
        own = compiler.new_plan(f"canvas: replacement {node.task}", "one", into)
        entries = compiler.member(node, own)
    else:
        entries = compiler.member(node, into)
    return compiler, into, entries


def _ending_as(node: Any, jid: str, queue: str) -> Any:
    """``node`` with its last job running as ``jid``, so its value becomes that id's result; a node that
    ends in a group gets one more job, ``hand_on``, on ``queue`` (the replaced job's: the default queue
    may have no worker), that makes the group's list its result."""
    steps, options = steps_of(as_node(node, "replace"))
    last = steps[-1]
    if is_task(last):
        steps[-1] = last.clone(jid=jid)
    else:
        steps.append(Signature(HAND_ON, options={"jid": jid, "queue": queue}))
    return steps[0] if len(steps) == 1 and not options else chain(*steps, **options)


def replace(task: Any, sig: Any) -> Any:
    """Replace the running job by ``sig`` (a task or any canvas); ``Replaced`` for ``Task.replace`` to raise,
    or, in an eager run, the replacement's value."""
    request = task.request
    node = as_node(sig, "replace")
    if isinstance(node, chain) and not steps_of(node)[0]:
        # Celery's error and words: the job fails with it (there is nothing to hand its place to).
        raise ImproperlyConfigured("Cannot replace with an empty chain: replace() needs a task or a canvas "
                                   "with at least one task")
    if request.is_eager:
        return node.apply().get()
    if not request.id:
        raise CanvasError("replace() works in a job run by a worker (or by apply()): "
                          "a job called as a function has no id to hand over")
    node = _ending_as(sig, request.id, request.queue)
    bid = runtime.bid_of(request.payload)
    # Celery's replaced_task_nesting: how many replacements deep the replacement's jobs are.
    with plans.stamped(replaced_task_nesting=request.replaced_task_nesting + 1):
        if bid is None:
            _replace_alone(request, node)
        else:
            _replace_in_batch(task, node, bid)
    return Replaced(f"replaced by {sig!r}")


def _replace_alone(request: Any, node: Any) -> None:
    """A job sent on its own: the replacement, sent as a job or a canvas of its own, ends in its id."""
    root_id = request.root_id or request.id
    if is_task(node) and not (node.options.get("link") or node.options.get("link_error")):
        from djwork import client

        payload, at = plans.payload_of(node, fields={"root_id": root_id,
                                                     PAYLOAD_FIELD: wants_result(request.payload) or None})
        client.push_reporting(payload, at=at)
        return
    compiler = Compiler()
    compiler.root_id = root_id
    steps, options = steps_of(node)
    made = compiler.chain(steps, options, None)
    plans.write(compiler.plans, plans.push(made[0].entries, compiler.root_id))


def _replace_in_batch(task: Any, node: Any, bid: str) -> None:
    jid, bid, _ = _batch_of(task, "replace()")
    order = layout(is_cluster(get_config())).batch(bid).order
    place = redis_layer.run(lambda conn: conn.lpos(order, jid), idempotent=True)
    if place is None:
        return  # this job's earlier run already replaced it (it was killed before its ack)
    compiler, into, entries = _compile(node, bid, task.request.root_id, wrap_task=True)
    slot = into.jids[-1]

    def join(pipe: Any) -> None:
        pipe.sadd(keys.batch_jids(bid), slot)
        pipe.hincrby(keys.batch(bid), "kids", 1)
        pipe.lset(keys.batch_order(bid), place, slot)

    # On a cluster the check that the jid still holds its place is made again in the join's own step.
    plans.write(compiler.plans, plans.push(entries, compiler.root_id), also=join,
                join=(bid, ["replace", jid, slot]))


def add_to_chord(task: Any, sig: Any) -> Any:
    """Add ``sig`` to the group (a chord's header) the running job is a member of; its result comes last."""
    _, bid, fields = _batch_of(task, "add_to_chord()")
    if fields["value"] != "all":
        raise CanvasError("add_to_chord(): the running job is not a member of a group or chord header")
    slots = add_members(bid, sig, task.request.root_id)
    from djwork.results import AsyncResult

    return AsyncResult(slots[-1])


def add_members(bid: str, node: Any, root_id: str | None) -> list[str]:
    """``node`` appended to the group batch ``bid`` (a chord's header), in one MULTI with its first jobs: a task
    joins as itself, a group as its tasks (unrolled), another canvas as its batch. Returns the new slots."""
    compiler, into, entries = _compile(node, bid, root_id, wrap_task=False)
    slots = into.jids
    if not slots:
        return []  # an empty group: nothing joins

    def join(pipe: Any) -> None:
        pipe.sadd(keys.batch_jids(bid), *slots)
        pipe.rpush(keys.batch_order(bid), *slots)
        pipe.hincrby(keys.batch(bid), "total", len(slots))

    plans.write(compiler.plans, plans.push(entries, compiler.root_id), also=join,
                join=(bid, ["add", str(len(slots)), *slots]))
    return slots


task_class.CANVAS_VERBS.update(replace=replace, add_to_chord=add_to_chord)
