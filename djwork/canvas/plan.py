"""Applying a canvas: its batches and first jobs, written in one MULTI.

Every canvas is batches (docs/batches.md) that keep their results:

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

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from djwork import keys
from djwork import redis as redis_layer
from djwork.batches import collect
from djwork.batches.batch import CHUNK, MAX_KEPT_RESULTS, PENDING_TTL, list_batch
from djwork.canvas.refs import ChainRef, ChordRef, GroupRef
from djwork.canvas.signature import APPLY, LINK_OPTIONS, CanvasError, Signature, as_signature
from djwork.enqueue import JobRef
from djwork.payload import build, dumps
from djwork.result_record import PAYLOAD_FIELD

# The first argument Lua puts before a callback's own (lua/batch_lib.lua, batch_canvas_args).
SHAPE_PLACEHOLDER = {"one": None, "all": [], "status": {}}


@dataclass
class Plan:
    """One batch to write: its members' jids and its callbacks (event -> (head, cx spec))."""

    bid: str
    description: str
    jids: list[str] = field(default_factory=list)
    callbacks: dict[str, tuple[str, str]] = field(default_factory=dict)
    # The batch whose success callback is this one's job (a chain's next step, a chord's body): until that
    # fires, the job is not queued anywhere, and the dashboard says "waiting", not "running".
    after: str = ""

    def fields(self, now: float) -> dict[str, Any]:
        found: dict[str, Any] = {"bid": self.bid, "description": self.description, "created_at": repr(now),
                                 "cbq": "default", "keep_results": "1", "canvas": "1", "total": len(self.jids)}
        for event, (head, spec) in self.callbacks.items():
            found[f"cb-{event}"] = head
            found[f"cx-{event}"] = spec
        if self.after:
            found["after"] = self.after
        return found


def new_bid() -> str:
    return secrets.token_urlsafe(10)


def _resolve(name: str) -> Any:
    from djwork.jobs import resolve

    return resolve(name)


def payload_of(sig: Signature, first: Any = None, shape: str | None = None) -> tuple[dict[str, Any], float | None]:
    """The job hash for ``sig`` (its args after ``first`` when a callback's shape puts one there)."""
    options = {key: value for key, value in sig.options.items() if key not in LINK_OPTIONS}
    args = list(sig.args) if shape in (None, "none") else [first, *sig.args]
    job = _resolve(sig.task)
    if job is not None:
        return job.build_payload(args, dict(sig.kwargs), **options)
    # Not registered in this process (another service's job): by name, as delay() of a name would.
    unknown = set(options) - {"queue", "retry", "jid", "countdown"}
    if unknown:
        raise CanvasError(f"{sig.task} is not registered here: only queue, retry, jid, countdown apply, "
                          f"not {sorted(unknown)}")
    payload = build(sig.task, args, dict(sig.kwargs), queue=options.get("queue") or "default",
                    retry=options.get("retry", True), jid=options.get("jid"))
    countdown = options.get("countdown")
    return payload, (time.time() + float(countdown)) if countdown else None


def callback(sig: Signature, shape: str, bid: str | None, of_bid: str) -> tuple[str, str, str]:
    """A signature as a batch callback: (its jid, the payload head Lua completes, the cx spec)."""
    if sig.immutable:
        shape = "none"
    if "eta" in sig.options:
        raise CanvasError(f"{sig.task}: a step that runs after another takes countdown=, not eta= "
                          "(it is counted from when the previous step ends)")
    payload, at = payload_of(sig, SHAPE_PLACEHOLDER.get(shape), shape)
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


def _collect(bid: str, sigs: list[Signature]) -> collect.Collector:
    """The first jobs, through client middleware, collected for the MULTI (as ``batch.jobs()`` does)."""
    from djwork import client

    collector = collect.Collector(bid)
    token = collect.open_block(collector)
    try:
        for sig in sigs:
            if sig.options.get("link") or sig.options.get("link_error"):
                raise CanvasError(f"{sig!r}: links on a member of a group or chord are not supported")
            payload, at = payload_of(sig)
            client.push_reporting(payload, at=at)
    finally:
        collect.close_block(token)
    if len(collector.jids) > MAX_KEPT_RESULTS:
        raise CanvasError(f"a group or chord header keeps at most {MAX_KEPT_RESULTS} results")
    return collector


def write(plans: list[Plan], root: Plan, collector: collect.Collector) -> None:
    """Every plan's batch, then the root's jobs, in one MULTI (pre-made batches exist before any job runs)."""
    now = time.time()
    root.jids = list(collector.jids)

    def run(conn: Any) -> list[Any]:
        pipe = conn.pipeline(transaction=True)
        for plan in [*plans, root]:
            head = keys.batch(plan.bid)
            pipe.hset(head, mapping=plan.fields(now))
            list_batch(pipe, plan.bid, now)
            for start in range(0, len(plan.jids), CHUNK):
                pipe.sadd(keys.batch_jids(plan.bid), *plan.jids[start:start + CHUNK])
                pipe.rpush(keys.batch_order(plan.bid), *plan.jids[start:start + CHUNK])
            for key in (head, keys.batch_jids(plan.bid), keys.batch_order(plan.bid)):
                pipe.expire(key, PENDING_TTL)
        for queue, raws in collector.queued.items():
            for start in range(0, len(raws), CHUNK):
                pipe.lpush(keys.queue(queue), *raws[start:start + CHUNK])
        if collector.scheduled:
            pipe.zadd(keys.SCHEDULE, {raw: score for score, raw in collector.scheduled})
        if collector.queued:
            pipe.sadd(keys.QUEUES, *collector.queued)
        if not root.jids:
            from djwork import scripts

            # Nothing will end in it (an empty group or chord header): its events are decided now.
            pipe.execute_command("EVAL", scripts.source("batch_check"), 1, keys.batch(root.bid))
        return pipe.execute()

    # Not replayed after a send (a second MULTI would push every job twice); a failed dial is.
    redis_layer.run(run)


def _links(plan: Plan, options: dict[str, Any], link_bid: str | None = None) -> None:
    """``link`` as the plan's success callback (the result first), ``link_error`` as its death callback."""
    link, errback = options.get("link"), options.get("link_error")
    if link is not None:
        _, head, spec = callback(link, "one", link_bid, plan.bid)
        plan.callbacks["success"] = (head, spec)
    if errback is not None:
        _, head, spec = callback(errback, "status", None, plan.bid)
        plan.callbacks["death"] = (head, spec)


def _options(options: dict[str, Any], allowed: tuple[str, ...], where: str) -> dict[str, Any]:
    unknown = set(options) - set(allowed)
    if unknown:
        raise CanvasError(f"{where}: unsupported option(s) {sorted(unknown)}")
    return {key: as_signature(value, f"{where} {key}") for key, value in options.items() if value is not None}


def apply_signature(sig: Signature) -> JobRef:
    """One job; with links, the one member of a batch whose success/death callbacks they are."""
    if not (sig.options.get("link") or sig.options.get("link_error")):
        from djwork import client

        payload, at = payload_of(sig)
        return JobRef(*client.push_reporting(payload, at=at), queue=payload.get("queue"),
                      ignored=not payload.get(PAYLOAD_FIELD))
    root = Plan(new_bid(), f"canvas: {sig.task} with links")
    _links(root, sig.options)
    plain = Signature(sig.task, sig.args, sig.kwargs, {k: v for k, v in sig.options.items() if k not in LINK_OPTIONS})
    collector = _collect(root.bid, [plain])
    write([], root, collector)
    # Its own record follows its own results flag, as a job without links: a ref that assumed one
    # would read PENDING for ever when results are off (the links get the value through the batch).
    raws = [raw for queued in collector.queued.values() for raw in queued] + [raw for _, raw in collector.scheduled]
    stores = bool(raws) and bool(orjson.loads(raws[0]).get(PAYLOAD_FIELD))
    return JobRef(collector.jids[0] if collector.jids else None, ignored=not stores)


def apply_group(sigs: list[Signature]) -> GroupRef:
    root = Plan(new_bid(), f"canvas: group of {len(sigs)}")
    collector = _collect(root.bid, sigs)
    write([], root, collector)
    return GroupRef(root.bid, list(collector.jids))


def apply_chord(header: list[Signature], body: Signature, options: dict[str, Any]) -> ChordRef:
    options = {**{k: v for k, v in body.options.items() if k in LINK_OPTIONS and v is not None},
               **_options(options, LINK_OPTIONS, "chord")}
    root = Plan(new_bid(), f"canvas: chord header of {len(header)} -> {body.task}")
    body_plan = Plan(new_bid(), f"canvas: chord body {body.task}", after=root.bid)
    jid, head, spec = callback(body, "all", body_plan.bid, root.bid)
    body_plan.jids = [jid]
    root.callbacks["success"] = (head, spec)
    _links(body_plan, options)
    if options.get("link_error") is not None:  # a header member died: the errback runs, the body never
        _, head, spec = callback(options["link_error"], "status", None, root.bid)
        root.callbacks["death"] = (head, spec)
    collector = _collect(root.bid, header)
    write([body_plan], root, collector)
    return ChordRef(root.bid, body_plan.bid, jid)


def apply_chain(steps: list[Signature], options: dict[str, Any]) -> ChainRef:
    options = _options(options, LINK_OPTIONS, "chain")
    for step in steps:
        if step.options.get("link"):
            raise CanvasError(f"{step!r}: link= on a step inside a chain is not supported (the next step is its link)")
    plans = [Plan(new_bid(), f"canvas: chain step {index + 1}/{len(steps)} {step.task}")
             for index, step in enumerate(steps)]
    jids = [""] * len(steps)
    for index in range(len(steps) - 1, 0, -1):  # each step, as the success callback of the one before
        jid, head, spec = callback(steps[index], "one", plans[index].bid, plans[index - 1].bid)
        plans[index].jids = [jid]
        plans[index].after = plans[index - 1].bid
        plans[index - 1].callbacks["success"] = (head, spec)
        jids[index] = jid
    for index, (plan, step) in enumerate(zip(plans, steps, strict=True)):
        errback = step.options.get("link_error") or options.get("link_error")
        if errback is not None:
            _, head, spec = callback(errback, "status", None, plan.bid)
            plan.callbacks["death"] = (head, spec)
        if index == len(steps) - 1 and options.get("link") is not None:
            _links(plan, {"link": options["link"]})
    first = Signature(steps[0].task, steps[0].args, steps[0].kwargs,
                      {k: v for k, v in steps[0].options.items() if k not in LINK_OPTIONS})
    collector = _collect(plans[0].bid, [first])
    jids[0] = collector.jids[0] if collector.jids else ""
    write(plans[1:], plans[0], collector)
    return ChainRef([plan.bid for plan in plans], jids)


def call_signature(name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """``sig()``: the job run as a function in this process (Celery's ``add.s(2, 2)()``)."""
    job = _resolve(name)
    if job is None:
        raise CanvasError(f"{name}: calling a signature runs its job in this process, "
                          "and no djwork job of that name is registered here")
    return job(*args, **kwargs)


APPLY.update(signature=apply_signature, group=apply_group, chord=apply_chord, chain=apply_chain,
             call=call_signature)
