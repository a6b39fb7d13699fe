"""Writing a canvas: its batches (``Plan``) and first jobs in one MULTI; its jobs' payloads and callbacks.

Every canvas is batches (docs/batches.md) that keep their results (nesting: nest.py; applying: apply.py):

- a **group** is one batch of its jobs;
- a **chord** is a batch of its header whose ``success`` callback is the body, with every result in
  order as the body's first argument; the body is the one pre-made member of a second batch (so its
  own result and links are recorded like any member's);
- a **chain** is one batch per step; step *i+1* is the ``success`` callback of step *i*'s batch (the
  result as its first argument) and the pre-made member of its own;
- ``link=``/``link_error=`` make a one-job batch whose ``success``/``death`` callbacks they are.

A pre-made member's batch is written before its job exists: the job's payload (without its
arguments) waits in the previous batch's hash as the callback head, and lua/batch_lib.lua pushes it
in the Lua step that ends the previous job, claimed once (HSETNX): never twice, never lost to a
``kill -9`` between a job's end and its ack. Client middleware runs on the first jobs (they are
collected as ``batch.jobs()`` collects); a callback is pushed by Lua, and runs no client middleware.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from djwork import redis as redis_layer
from djwork.batches import collect
from djwork.batches.batch import CHUNK, MAX_KEPT_RESULTS, PENDING_TTL, list_batch
from djwork.canvas import cluster_plan
from djwork.canvas.signature import LINK_OPTIONS, CanvasError, Signature
from djwork.payload import build, dumps
from djwork.redis import keys, lanes
from djwork.redis.cluster import is_cluster
from djwork.results.record import PAYLOAD_FIELD
from djwork.settings.conf import get_config

# The first argument Lua puts before a callback's own (lua/batch_lib.lua, batch_canvas_args).
SHAPE_PLACEHOLDER = {"one": None, "all": [], "status": {}, "died": ""}
ERRBACK_CALLER = "djwork.canvas.builtins.call_errback"  # runs a (request, exc, traceback) errback

# Fields every payload written in this context carries (a replacement's replaced_task_nesting, replace.py):
# a context, not an argument, as a canvas's jobs are built at many depths of its compiling.
_stamped: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("djwork.canvas.stamped",
                                                                                 default=None)


@contextlib.contextmanager
def stamped(**payload_fields: Any) -> Iterator[None]:
    """Every payload made inside the block gets ``payload_fields``."""
    token = _stamped.set({**(_stamped.get() or {}), **payload_fields})
    try:
        yield
    finally:
        _stamped.reset(token)


@dataclass
class Plan:
    """One batch to write: its members (jids, and ``b-<bid>`` of child batches) and its callbacks."""

    bid: str
    description: str
    jids: list[str] = field(default_factory=list)
    # event -> [(head, cx spec), ...]: a step before a group starts each of the group's first jobs.
    callbacks: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    # The batch whose success callback is this one's job (a chain's next step, a chord's body): until that
    # fires, the job is not queued anywhere, and the dashboard says "waiting", not "running".
    after: str = ""
    value: str = ""  # what it hands its parent or the next step: one, all, last (lua/batch_lib.lua)
    parent: str = ""  # the batch it is a member b-<bid> of (a canvas nested in a group)
    # Pending members no job ends and no result is kept for: a chord header's hold while a generator still
    # feeds it (djwork/canvas/stream.py), released by lua/batch_release.lua.
    holds: list[str] = field(default_factory=list)

    def add_callback(self, event: str, head: str, spec: str) -> None:
        self.callbacks.setdefault(event, []).append((head, spec))

    def fields(self, now: float, kids: int) -> dict[str, Any]:
        found: dict[str, Any] = {"bid": self.bid, "description": self.description, "created_at": repr(now),
                                 "cbq": "default", "keep_results": "1", "canvas": "1", "total": len(self.jids)}
        for event, pushed in self.callbacks.items():
            for index, (head, spec) in enumerate(pushed, start=1):
                suffix = "" if index == 1 else f"-{index}"
                found[f"cb-{event}{suffix}"] = head
                found[f"cx-{event}{suffix}"] = spec
            if len(pushed) > 1:
                found[f"cbn-{event}"] = len(pushed)
        for name, value in (("after", self.after), ("value", self.value), ("parent", self.parent)):
            if value:
                found[name] = value
        if kids:
            found["kids"] = kids
        return found


def new_bid() -> str:
    return secrets.token_urlsafe(10)


def resolve_job(name: str) -> Any:
    from djwork.jobs import resolve

    return resolve(name)


def payload_of(sig: Signature, first: Any = None, shape: str | None = None,
               fields: dict[str, Any] | None = None) -> tuple[dict[str, Any], float | None]:
    """The job hash for ``sig`` (its args after ``first`` when a callback's shape puts one there);
    ``fields`` are added to it (a canvas's ``root_id``/``parent_id``, its own result record)."""
    options = {key: value for key, value in sig.options.items() if key not in LINK_OPTIONS}
    args = list(sig.args) if shape in (None, "none") else [first, *sig.args]
    job = resolve_job(sig.task)
    if job is not None and job.typing and shape == "died":
        # An errback's arguments are checked when it is called, as Celery's are: one that can't take the
        # failed task's id fails then, in its own job, and one never called (nothing failed) never fails.
        job = copy.copy(job)
        job.typing = False
    if job is not None:
        payload, at = job.build_payload(args, dict(sig.kwargs), **options)
    else:
        # Not registered in this process (another service's job): by name, as delay() of a name would.
        unknown = set(options) - {"queue", "retry", "jid", "countdown", "ignore_result"}
        if unknown:
            raise CanvasError(f"{sig.task} is not registered here: only queue, retry, jid, countdown apply, "
                              f"not {sorted(unknown)}")
        payload = build(sig.task, args, dict(sig.kwargs), queue=options.get("queue") or "default",
                        retry=options.get("retry", True), jid=options.get("jid"))
        countdown = options.get("countdown")
        at = (time.time() + float(countdown)) if countdown else None
    for name, value in {**(_stamped.get() or {}), **(fields or {})}.items():
        if name == PAYLOAD_FIELD and options.get("ignore_result"):
            continue  # the signature asked for no record of its own
        if value is not None:
            payload[name] = value
    return payload, at


def callback(sig: Signature, shape: str, bid: str | None, of_bid: str,
             fields: dict[str, Any] | None = None) -> tuple[str, str, str]:
    """A signature as a batch callback: (its jid, the payload head Lua completes, the cx spec)."""
    if sig.immutable:
        shape = "none"
    if "eta" in sig.options:
        raise CanvasError(f"{sig.task}: a step that runs after another takes countdown=, not eta= "
                          "(it is counted from when the previous step ends)")
    payload, at = payload_of(sig, SHAPE_PLACEHOLDER.get(shape), shape, fields)
    delay = max(0.0, (at - time.time())) if at is not None else 0.0
    args = payload.pop("args")
    if shape != "none":
        args = args[1:]
    for late in ("created_at", "enqueued_at"):
        payload.pop(late, None)
    payload["callback_bid"] = of_bid
    if bid is not None:
        payload["bid"] = bid
    spec = f"{shape}\t{payload['queue']}\t{round(delay, 3)}\t{dumps(args)}"
    return payload["jid"], dumps(payload)[:-1], spec


def takes_request(name: str) -> bool:
    """Whether an errback is Celery's new style, ``(request, exc, traceback)``: its function takes more than
    one positional argument (Celery's own test); else it gets the failed task's id. A ``bind=True`` job is
    always called the old way, as a task (Celery's too: so that it can ``self.retry()``)."""
    import inspect

    job = resolve_job(name)
    if job is None or job.bind:
        return False
    kinds = [parameter.kind for parameter in inspect.signature(job.func).parameters.values()]
    return inspect.Parameter.VAR_POSITIONAL in kinds or sum(
        kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD) for kind in kinds) > 1


def add_errback(plan: Plan, errback: Signature, request_id: str | None = None) -> None:
    """``errback`` as the batch's death callback, called as Celery calls it: with the failed task's id
    first, or, for a function taking ``(request, exc, traceback)``, in a worker by the built-in job
    that rebuilds them (djwork/canvas/builtins.py); the failed jid is found by the Lua step (shape ``died``).
    ``request_id`` names another task instead (a chord's body, when its header failed: Celery's)."""
    if errback.immutable:
        pass  # its own arguments only, whatever its style: Celery's immutable signature ignores what it is given
    elif takes_request(errback.task):
        errback = Signature(ERRBACK_CALLER, [dict(errback)], {"request_id": request_id} if request_id else None,
                            options={key: value for key, value in errback.options.items() if key in ("queue",)})
    elif request_id is not None:
        errback = errback.clone([request_id], immutable=True)  # an immutable errback ignores the id (Celery's)
    _, head, spec = callback(errback, "died", None, plan.bid)
    plan.add_callback("death", head, spec)


def links(plan: Plan, options: dict[str, Any], link_bid: str | None = None) -> None:
    """``link`` as the plan's success callback (its value first), ``link_error`` as its death callback."""
    link, errback = options.get("link"), options.get("link_error")
    if link is not None:
        _, head, spec = callback(link, "all" if plan.value == "all" else "one", link_bid, plan.bid)
        plan.add_callback("success", head, spec)
    if errback is not None:
        add_errback(plan, errback)


def push(entries: list[Any], root_id: str) -> list[collect.Collector]:
    """The first jobs, through client middleware, collected per batch for the MULTI (as ``batch.jobs()`` does)."""
    from djwork import client

    collectors: dict[str, collect.Collector] = {}
    for entry in entries:
        collector = collectors.setdefault(entry.bid, collect.Collector(entry.bid))
        token = collect.open_block(collector)
        try:
            payload, at = payload_of(entry.sig, fields={"root_id": root_id, PAYLOAD_FIELD: True})
            client.push_reporting(payload, at=at)
        finally:
            collect.close_block(token)
    return list(collectors.values())


def write(plans: list[Plan], collectors: list[collect.Collector], also: Callable[[Any], None] | None = None,
          join: cluster_plan.Join | None = None) -> bool:
    """Every plan's batch, then the first jobs, in one MULTI (pre-made batches exist before any job runs);
    ``also`` adds its own commands to that MULTI (a replacement's place in the batch it joins), which on a Redis
    Cluster is ``join``'s step in that batch's slot instead (djwork/canvas/cluster_plan.py). Whether the new plans
    joined (False: on a cluster, a replacement an earlier run of the job already made)."""
    cluster = is_cluster(get_config())
    now = time.time()
    for plan in plans:
        if len(plan.jids) > MAX_KEPT_RESULTS:
            raise CanvasError(f"a group or chord header keeps at most {MAX_KEPT_RESULTS} results")
    kids = {plan.bid: sum(1 for other in plans if other.parent == plan.bid) for plan in plans}
    if cluster:
        # Not replayed after a send, as below (djwork/canvas/cluster_plan.py: each plan in its slot, then the jobs).
        return bool(redis_layer.run(lambda conn: cluster_plan.write(conn, plans, collectors, kids, now, join)))

    def run(conn: Any) -> list[Any]:
        pipe = conn.pipeline(transaction=True)
        for plan in plans:
            head = keys.batch(plan.bid)
            pipe.hset(head, mapping=plan.fields(now, kids[plan.bid]))
            list_batch(pipe, plan.bid, now)
            for start in range(0, len(plan.jids), CHUNK):
                pipe.sadd(keys.batch_jids(plan.bid), *plan.jids[start:start + CHUNK])
                pipe.rpush(keys.batch_order(plan.bid), *plan.jids[start:start + CHUNK])
            if plan.holds:
                pipe.sadd(keys.batch_jids(plan.bid), *plan.holds)
            for key in (head, keys.batch_jids(plan.bid), keys.batch_order(plan.bid)):
                pipe.expire(key, PENDING_TTL)
        for collector in collectors:
            for (queue, lane), raws in collector.queued.items():
                for start in range(0, len(raws), CHUNK):
                    for command in lanes.push_commands(queue, lane, raws[start:start + CHUNK]):
                        pipe.execute_command(*command)
                pipe.sadd(keys.QUEUES, queue)
            if collector.scheduled:
                pipe.zadd(keys.SCHEDULE, {raw: score for score, raw in collector.scheduled})
        for plan in plans:
            if not plan.jids and not plan.holds:
                from djwork.redis import scripts

                # Nothing will end in it (an empty group or chord header): its events are decided now.
                pipe.execute_command("EVAL", scripts.source("batch_check"), 1, keys.batch(plan.bid))
        if also is not None:
            also(pipe)
        return pipe.execute()

    # Not replayed after a send (a second MULTI would push every job twice); a failed dial is.
    redis_layer.run(run)
    return True
