"""What applying a group, chord or chain returns: a ref whose ``.get(timeout=)`` reads the batch's results.

The results are the ones the batches keep for their callbacks (``b-<bid>-results``, with the
batch's TTL: 24 h after success); there is no other result store. ``.get()`` reads the batch's
claims (``success_at``, ``death_at``) every 20 to 250 ms until one is there: the waiting client
reads, the workers never poll (the callbacks are pushed by the step that ends the last job).
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from djwork import redis as redis_layer
from djwork.batches.status import BatchStatus, read_status
from djwork.canvas.signature import CanvasError, ChordError
from djwork.redis import keys
from djwork.redis.key_layout import layout_of
from djwork.results import AsyncResult

FIRST_WAIT = 0.02
LONGEST_WAIT = 0.25


def _claims(bids: list[str]) -> list[tuple[bool, bool, bool]]:
    """For each batch: (exists, success fired, death fired)."""
    def read(conn: Any) -> list[Any]:
        pipe = conn.pipeline(transaction=False)
        for bid in bids:
            pipe.hmget(keys.batch(bid), "bid", "success_at", "death_at")
        return pipe.execute()

    return [(found[0] is not None, found[1] is not None, found[2] is not None)
            for found in redis_layer.run(read, idempotent=True)]


def results_of(bid: str) -> list[Any]:
    """The batch's kept results, in the order its jobs were added (None for a result not kept)."""
    def read(conn: Any) -> list[Any]:
        named = layout_of(conn).batch(bid)  # a cluster's companions carry the batch's hash tag
        jids = conn.lrange(named.order, 0, -1)
        return conn.hmget(named.results, jids) if jids else []

    return [orjson.loads(value) if value is not None else None for value in redis_layer.run(read, idempotent=True)]


def _died(bid: str) -> list[str]:
    found = redis_layer.run(lambda conn: conn.srandmember(layout_of(conn).batch(bid).died, 10), idempotent=True)
    return sorted(value.decode() if isinstance(value, bytes) else str(value) for value in found)


def pending_jobs(bid: str) -> list[str]:
    """The jobs still pending in batch ``bid`` and, down its ``b-<bid>`` members, in its child batches
    (a nested chain's later steps too: their batches and jids are written with the canvas)."""
    found: list[str] = []
    todo = [bid]
    for _ in range(10_000):  # bounded: a loop of parents would not end otherwise
        if not todo:
            break
        bid_now = todo.pop()
        members = redis_layer.run(lambda conn, bid_now=bid_now: conn.smembers(layout_of(conn).batch(bid_now).jids),
                                  idempotent=True)
        for member in sorted(value.decode() if isinstance(value, bytes) else str(value) for value in members):
            if member.startswith("b-"):
                todo.append(member[2:])
            else:
                found.append(member)
    return found


def failed_jid(bid: str) -> str | None:
    """A job that died in this batch, looked for down its dead child batches (``b-<bid>`` members)."""
    for _ in range(64):  # a canvas is never nested deeper; a loop of parents would not end otherwise
        died = _died(bid)
        if not died:
            return None
        jobs = [member for member in died if not member.startswith("b-")]
        if jobs:
            return jobs[0]
        bid = died[0][2:]
    return None


def failure_of(bid: str) -> BaseException | None:
    """The exception a job that died in this batch (or a nested one) raised, from its own result record
    (a canvas's jobs keep one: plan.py), as ``AsyncResult.get()`` rebuilds it; None when there is none."""
    jid = failed_jid(bid)
    if jid is None:
        return None
    found = AsyncResult(jid).result  # the exception of a FAILURE or REVOKED record; None without a record
    return found if isinstance(found, BaseException) else None


def raise_failure(bid: str, fallback: CanvasError) -> None:
    """Celery's ``propagate=True``: the failed task's own exception; ``fallback`` when it left no record."""
    error = failure_of(bid)
    raise error if error is not None else fallback


def _wait(bids: list[str], done: str, failing: list[str], timeout: float | None, what: str) -> str | None:
    """Wait until batch ``done`` fired success (returns None) or one of ``failing`` fired death (returns its bid)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    pause = FIRST_WAIT
    while True:
        states = dict(zip(bids, _claims(bids), strict=True))
        for bid in failing:
            if states[bid][2]:
                return bid
        if states[done][1]:
            return None
        gone = [bid for bid in bids if not states[bid][0]]
        if gone:
            raise CanvasError(f"{what}: batch {gone[0]} is gone (expired, or never made)")
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: not done within {timeout} s")
        time.sleep(pause if deadline is None else max(0.0, min(pause, deadline - time.monotonic())))
        pause = min(LONGEST_WAIT, pause * 1.5)


class GroupRef:
    """A group's batch: ``.get()`` returns every member's result, in order."""

    def __init__(self, bid: str, jids: list[str] | None, root_id: str | None = None, parent: Any = None) -> None:
        self.bid = self.id = bid
        self._jids = jids  # None: read from the batch when asked (a group step seen from the chain after it)
        self.root_id = root_id  # Celery's: the canvas's first task's id (None when restored from an old save)
        self.parent = parent  # Celery's: the result of the step before it, in a chain
        self.parent_id: str | None = parent.id if parent is not None else None

    @property
    def jids(self) -> list[str]:
        if self._jids is None:
            order = redis_layer.run(lambda conn: conn.lrange(layout_of(conn).batch(self.bid).order, 0, -1),
                                    idempotent=True)
            self._jids = [value.decode() if isinstance(value, bytes) else str(value) for value in order]
        return self._jids

    def as_tuple(self) -> tuple[Any, Any]:
        """Celery's serialised form of a group's result: ``((id, parent's form), [each member's form])``."""
        return (self.id, self.parent.as_tuple() if self.parent is not None else None), [
            result.as_tuple() for result in self.results]

    def __repr__(self) -> str:
        return f"<GroupRef {self.bid} of {len(self.jids)}>"

    def status(self) -> BatchStatus | None:
        return read_status(self.bid)

    def ready(self) -> bool:
        exists, success, death = _claims([self.bid])[0]
        return success or death or not exists

    def successful(self) -> bool:
        """Every member succeeded."""
        return _claims([self.bid])[0][1]

    def failed(self) -> bool:
        """A member died (out of retries, or revoked)."""
        return _claims([self.bid])[0][2]

    def waiting(self) -> bool:
        return not self.ready()

    def completed_count(self) -> int:
        """How many members succeeded (Celery's: completed means successful)."""
        status = self.status()
        return status.succeeded if status is not None else 0

    def revoke(self) -> list[bool]:
        """``djwork.revoke`` each member: True where it was found waiting and removed (docs/celery.md, Revoke).
        A nested canvas member (``b-<bid>``) is every job still pending in it, a step not yet pushed
        included (its flag drops it when it is): True where one of them was found waiting."""
        from djwork.results.revoke import revoke

        return [any([revoke(jid) for jid in pending_jobs(slot[2:])]) if slot.startswith("b-") else revoke(slot)
                for slot in self.jids]

    def get(self, timeout: float | None = None, propagate: bool = True) -> list[Any]:
        """The results in order, once every member succeeded; a member's death raises CanvasError."""
        died = _wait([self.bid], self.bid, [self.bid] if propagate else [], timeout, f"group {self.bid}")
        if died is not None:
            raise_failure(died, CanvasError(f"group {self.bid}: job(s) {_died(died)} died"))
        return results_of(self.bid)

    join = get

    def save(self) -> GroupRef:
        """Keep this group's ids for RESULT_TTL, so ``GroupResult.restore(id)`` finds it in any process (Celery's)."""
        from djwork.settings.conf import get_config

        value = orjson.dumps({"bid": self.bid, "jids": self.jids, "root_id": self.root_id})
        ttl = get_config().result_ttl
        redis_layer.run(lambda conn: conn.set(keys.saved_group(self.id), value, ex=ttl), idempotent=True)
        return self

    @classmethod
    def restore(cls, group_id: str) -> GroupRef | None:
        """The group saved under ``group_id`` (None when never saved, or expired)."""
        raw = redis_layer.run(lambda conn: conn.get(keys.saved_group(group_id)), idempotent=True)
        if raw is None:
            return None
        found = orjson.loads(raw)
        return cls(found["bid"], list(found["jids"]), found.get("root_id"))

    def forget(self) -> None:
        redis_layer.run(lambda conn: conn.delete(keys.saved_group(self.id)), idempotent=True)

    def __len__(self) -> int:
        return len(self.jids)

    @property
    def results(self) -> list[Any]:
        """Each member task's ``AsyncResult`` (a nested canvas member is left out: it has no one id)."""
        return [AsyncResult(jid, root_id=self.root_id) for jid in self.jids if not jid.startswith("b-")]

    def __iter__(self) -> Any:
        return iter(self.results)


class ChainRef(AsyncResult):
    """A chain: its last task's ``AsyncResult`` (Celery's), whose ``.parent`` is the step before's result.
    ``.get()`` returns the last step's result (a task step is the one member of its batch, a group step is
    the group's batch: its results in order), and re-raises the exception of any step that died."""

    def __init__(self, bids: list[str], jids: list[str], last_kind: str = "one", root_id: str | None = None) -> None:
        # Celery's parent_id: the step whose result the last one receives (a group step's: the group's id)
        super().__init__(jids[-1], root_id, jids[-2] if len(jids) > 1 else None)
        self.bids = bids
        self.jids = jids
        self.last_kind = last_kind
        self.jid = self.id

    def __repr__(self) -> str:
        return f"<ChainRef {len(self.bids)} steps, last {self.id}>"

    @property
    def parent(self) -> Any:
        """The step before the last: the chain up to it (its ``.get()`` is that step's result), or, for a group
        step, its ``GroupRef`` (whose ``.parent`` goes on back); None for the first step."""
        if len(self.bids) < 2:
            return None
        before = ChainRef(self.bids[:-1], self.jids[:-1], "one" if self.jids[-2] != self.bids[-2] else "all",
                          self.root_id)
        if before.last_kind == "one":
            return before
        return GroupRef(self.bids[-2], None, self.root_id, before.parent)

    def ready(self) -> bool:
        exists, success, _death = _claims([self.bids[-1]])[0]
        return success or not exists or any(claim[2] for claim in _claims(self.bids))

    @property
    def state(self) -> str:
        """The last task's state (Celery's AsyncResult of a chain is its last task's): canvas jobs keep a record."""
        return AsyncResult(self.id).state

    @property
    def status(self) -> str:
        return self.state

    def successful(self) -> bool:
        return self.state == "SUCCESS"

    def failed(self) -> bool:
        return any(claim[2] for claim in _claims(self.bids))

    def get(self, timeout: float | None = None, propagate: bool = True, interval: float = 0.5) -> Any:
        """The last step's return value; a step's death re-raises its exception (the steps after it never run)."""
        died = _wait(self.bids, self.bids[-1], self.bids if propagate else [], timeout, f"chain {self.id}")
        if died is not None:
            step = self.bids.index(died) + 1
            raise_failure(died, CanvasError(f"chain {self.id}: step {step} ({self.jids[step - 1]}) died; "
                                            "the rest did not run"))
        results = results_of(self.bids[-1])
        return results if self.last_kind == "all" else results[0]

    wait = get


class ChordRef(ChainRef):
    """A chord (the chain of its header's group and its body): ``.get()`` returns the body's result."""

    def __init__(self, chained: ChainRef) -> None:
        super().__init__(chained.bids, chained.jids, chained.last_kind, chained.root_id)
        self.header = GroupRef(chained.bids[0], None, chained.root_id)
        self.body_bid = chained.bids[-1]

    def __repr__(self) -> str:
        return f"<ChordRef header {self.header.bid} body {self.body_bid}>"

    def get(self, timeout: float | None = None, propagate: bool = True, interval: float = 0.5) -> Any:
        """The body's return value; a header member's death re-raises its exception (the body never runs),
        or raises ChordError when it left no record."""
        died = _wait(self.bids, self.bids[-1], self.bids if propagate else [], timeout, f"chord {self.header.bid}")
        if died == self.header.bid:
            raise_failure(died, ChordError(f"chord {self.header.bid}: header job(s) {_died(died)} died; "
                                           "the body did not run"))
        if died is not None:
            raise_failure(died, CanvasError(f"chord {self.header.bid}: its body {self.id} died"))
        results = results_of(self.bids[-1])
        return results if self.last_kind == "all" else results[0]
