"""Applying a canvas: a signature with links, a group, a chain or a chord, compiled (nest.py) into the
batches plan.py writes with their first jobs in one MULTI; and calling a signature in this process.

Fills ``signature.APPLY`` when imported (djwork/canvas/__init__.py imports it). docs/canvas.md.
"""

from __future__ import annotations

from typing import Any

from djwork.batches import collect
from djwork.canvas.nest import Compiler, steps_of, unlinked
from djwork.canvas.plan import Plan, links, new_bid, payload_of, push, resolve_job, write
from djwork.canvas.refs import ChainRef, ChordRef, GroupRef
from djwork.canvas.signature import APPLY, LINK_OPTIONS, CanvasError, Signature, as_signature
from djwork.jobs.enqueue import JobRef
from djwork.results.record import PAYLOAD_FIELD

START_OPTIONS = ("eta", "countdown")  # a chain's or chord's own: they go to the jobs it starts with


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
                      ignored=not payload.get(PAYLOAD_FIELD), ignore_result=_asks_no_result(sig))
    root = Plan(new_bid(), f"canvas: {sig.task} with links", value="one")
    links(root, sig.options)
    plain = unlinked(sig)
    root.jids = [plain.options["jid"]]
    from djwork import client

    # Its own record follows its own results flag, as a job without links: a ref that assumed one
    # would read PENDING for ever when results are off (the links get the value through the batch).
    collector = collect.Collector(root.bid)
    token = collect.open_block(collector)
    try:
        payload, at = payload_of(plain)
        client.push_reporting(payload, at=at)
    finally:
        collect.close_block(token)
    write([root], [collector])
    return JobRef(root.jids[0], ignored=not payload.get(PAYLOAD_FIELD), ignore_result=_asks_no_result(sig))


def _asks_no_result(sig: Signature) -> bool:
    """``ignore_result=True`` asked by the signature or its job: its ref's ``get()`` is None (Celery's)."""
    job = resolve_job(sig.task)
    return job.asks_no_result(sig.options) if job is not None else sig.options.get("ignore_result") is True


def apply_group(members: list[Any]) -> GroupRef:
    compiler = Compiler()
    root = Plan(new_bid(), f"canvas: group of {len(members)}", value="all")
    entries = [entry for member in members for entry in compiler.member(member, root)]
    write([root, *compiler.plans], push(entries, compiler.root_id or root.bid))
    # A member's id is its job's, as Celery's GroupResult lists them (a nested canvas's: its batch's b-<bid>).
    return GroupRef(root.bid, [compiler.task_ids.get(slot, slot) for slot in root.jids], compiler.root_id or None)


def apply_chain(node: Any, options: dict[str, Any], hold: str | None = None) -> ChainRef:
    """A chain, or a chord (the chain ``[group(header), body]``): one batch per step, nested ones below.
    ``hold``: a pending member of the first step's batch that keeps it open (djwork/canvas/stream.py)."""
    nodes, own = steps_of(node)
    # Celery's chain.apply_async(eta=/countdown=): when the first jobs run; each later step still starts
    # when the one before it ends.
    when = {key: options.pop(key) for key in START_OPTIONS if options.get(key) is not None}
    options = {**own, **_options(options, LINK_OPTIONS, "chain")}
    compiler = Compiler()
    steps = compiler.chain(nodes, options, None)
    if hold is not None:
        steps[0].plan.holds.append(hold)
    for entry in steps[0].entries:
        entry.sig.set(**when)  # its reserved copy (nest.unlinked): the caller's signature is not changed
    write(compiler.plans, push(steps[0].entries, compiler.root_id or steps[0].plan.bid))
    return ChainRef([step.plan.bid for step in steps],
                    [step.plan.jids[0] if step.kind == "one" else step.plan.bid for step in steps],
                    last_kind=steps[-1].kind, root_id=compiler.root_id or None)


def apply_chord(node: Any, options: dict[str, Any], hold: str | None = None) -> ChordRef:
    return ChordRef(apply_chain(node, options, hold))


def call_signature(name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """``sig()``: the job run as a function in this process (Celery's ``add.s(2, 2)()``)."""
    job = resolve_job(name)
    if job is None:
        raise CanvasError(f"{name}: calling a signature runs its job in this process, "
                          "and no djwork job of that name is registered here")
    return job(*args, **kwargs)


APPLY.update(signature=apply_signature, group=apply_group, chord=apply_chord, chain=apply_chain,
             call=call_signature)
