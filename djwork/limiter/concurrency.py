"""The concurrent kind: at most ``size`` holders at once, cluster-wide (lua/limiter_concurrent.lua).

A refused caller joins the limiter's waiting list and blocks (BLPOP) on a wake
list of its own. Every release grants the freed slot to the oldest waiter in
the same Lua call and pushes to that waiter's wake list, so it is admitted at
once and a newcomer can't take the slot first. The block is cut into slices
shorter than the socket timeout; after each slice the waiter asks the script
again, which also catches a lease that ran out (lock_timeout) meanwhile.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from redis.exceptions import RedisError

from djwork import redis as redis_layer
from djwork.limiter.base import SWEEP_BATCH, Holding, Limiter
from djwork.limiter.cluster_steps import holdings_by_limiter, list_apart, wake_connection
from djwork.limiter.errors import OverLimit
from djwork.limiter.identity import clean_jid, new_token, process_identity
from djwork.limiter.names import DEFAULT_LOCK_TIMEOUT, DEFAULT_TTL, DEFAULT_WAIT_TIMEOUT, seconds
from djwork.redis import keys, scripts
from djwork.redis.key_layout import Layout, LimiterKeys, layout_of
from djwork.settings.conf import get_config

logger = logging.getLogger("djwork.limiter")

ADMITTED, WAIT, OVER = 1, 0, -1
WAKE_TTL_MS = 10_000  # a wake-up nobody popped (the waiter learned of its grant otherwise) goes soon
SHORTEST_BLOCK = 0.01  # BLPOP's timeout 0 means forever: never send it


def group_keys(limiter_keys: LimiterKeys) -> list[str]:
    """The seven keys lua/limiter_concurrent.lua takes per limiter, in its order."""
    return [limiter_keys.meta, limiter_keys.stats, limiter_keys.holders, limiter_keys.owners, limiter_keys.waiters,
            limiter_keys.waiting, limiter_keys.lost]


def script_keys(layout: Layout, *names: str) -> list[str]:
    """The script's KEYS for ``names`` in ``layout`` (a cluster's call names one limiter: its own registry stand-in
    and holdings index are in its slot)."""
    groups = [layout.limiter(name) for name in names]
    return [groups[0].registry, groups[0].holdings, *(key for group in groups for key in group_keys(group))]


def wake(conn: Any, grants: list[tuple[str, str]]) -> None:
    """Push a wake-up to each granted waiter (limiter name, token), in one round trip."""
    if not grants:
        return
    pipe = conn.pipeline(transaction=False)
    for name, token in grants:
        key = keys.limiter_wake(name, token)
        pipe.lpush(key, 1)
        pipe.pexpire(key, WAKE_TTL_MS)
    pipe.execute()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Slot(Holding):
    """A held concurrent slot; ``release()`` frees it (and admits the next waiter)."""

    def __init__(self, limiter: ConcurrentLimiter, acquired_at: float, token: str) -> None:
        super().__init__(limiter, acquired_at)
        self.token = token

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        limiter = self.limiter
        assert isinstance(limiter, ConcurrentLimiter)
        limiter._release(self)


class ConcurrentLimiter(Limiter):
    kind = "concurrent"

    def __init__(self, name: str, size: int, *, wait_timeout: Any = DEFAULT_WAIT_TIMEOUT,
                 lock_timeout: Any = DEFAULT_LOCK_TIMEOUT, ttl: Any = DEFAULT_TTL,
                 reschedule: int | None = None) -> None:
        self.lock_timeout = seconds(lock_timeout, "lock_timeout")
        super().__init__(name, size, 0.0, wait_timeout=wait_timeout, ttl=ttl, reschedule=reschedule)
        if self.ttl < self.lock_timeout + self.wait_timeout:
            raise ValueError(f"limiter {name!r}: ttl {self.ttl:g} s must cover lock_timeout + wait_timeout "
                             f"({self.lock_timeout + self.wait_timeout:g} s)")

    def __repr__(self) -> str:
        return f"<ConcurrentLimiter {self.name!r} size={self.size} lock_timeout={self.lock_timeout:g}>"

    def metadata(self) -> list[str]:
        return [*super().metadata(), "lock_timeout", repr(self.lock_timeout)]

    def _script(self, conn: Any, args: list[Any]) -> list[Any]:
        layout = layout_of(conn)
        if args[0] == "acquire":
            list_apart(conn, layout.limiter(self.name), self.name, self.ttl)
        reply = scripts.evaluate(conn, "limiter_concurrent", script_keys(layout, self.name), args)
        return list(reply)

    def _acquire_call(self, token: str, budget: float, identity: str, jid: str) -> list[Any]:
        args = ["acquire", self.name, self.size, repr(self.lock_timeout), repr(self.ttl), token, identity, jid,
                repr(budget), SWEEP_BATCH, *self.metadata()]

        def block(conn: Any) -> list[Any]:
            reply = self._script(conn, args)
            wake(conn, [(self.name, _text(granted)) for granted in reply[5:]])
            return reply

        # Replayed: the token makes it safe (a token already holding answers "held" again).
        reply = redis_layer.run(block, idempotent=True)
        if int(reply[4]):
            logger.warning("djwork: limiter %s reclaimed %d slot(s) held past lock_timeout (%g s)",
                           self.name, int(reply[4]), self.lock_timeout)
        return reply

    def acquire(self, *, wait_timeout: float | None = None, jid: str | None = None, **options: Any) -> Slot:
        if options:
            raise TypeError(f"concurrent limiter got unexpected options {sorted(options)}")
        budget_total = self.wait_budget(wait_timeout)
        deadline = time.monotonic() + budget_total
        token, identity, jid = new_token(), process_identity(), clean_jid(jid)
        reply = self._acquire_call(token, budget_total, identity, jid)
        if int(reply[0]) == WAIT:
            reply = self._wait(reply, token, deadline, identity, jid)
        if int(reply[0]) == OVER:
            retry = min(float(reply[2]), max(self.wait_timeout, 1.0))
            raise OverLimit(self.name, retry, self.kind)
        return Slot(self, float(reply[3]), token)

    def _wait(self, reply: list[Any], token: str, deadline: float, identity: str, jid: str) -> list[Any]:
        """Block on this waiter's wake list until granted, asking the script again after each slice."""
        # A connection of its own: a pooled one blocked here would starve the pool of connections
        # the holders need to release (and a waiting list can be longer than the pool).
        wake_key = keys.limiter_wake(self.name, token)
        connection = wake_connection(wake_key)
        # A slice stays under the socket timeout, so a block never reads as a dead connection.
        longest_block = max(SHORTEST_BLOCK, get_config().socket_timeout / 2)
        try:
            while int(reply[0]) == WAIT:
                block_for = max(SHORTEST_BLOCK, min(float(reply[2]), deadline - time.monotonic(), longest_block))
                try:
                    connection.run(lambda conn, timeout=block_for: redis_layer.exchange(
                        conn, [("BLPOP", wake_key, f"{timeout:.3f}")]))
                except (RedisError, OSError):
                    # A wake-up lost with the reply costs nothing: the next call sees the grant.
                    # (Redis down: that call raises, under the replay policy.)
                    logger.debug("djwork: limiter %s wait interrupted", self.name, exc_info=True)
                reply = self._acquire_call(token, max(0.0, deadline - time.monotonic()), identity, jid)
        finally:
            connection.close()
        return reply

    def _release(self, slot: Slot) -> None:
        args = ["release", self.name, self.size, repr(self.lock_timeout), repr(self.ttl), slot.token,
                f"{slot.acquired_at:.6f}"]

        def block(conn: Any) -> list[Any]:
            reply = self._script(conn, args)
            wake(conn, [(self.name, _text(granted)) for granted in reply[5:]])
            return reply

        # Replayed: releasing a token twice frees nothing the second time, and counts nothing.
        held, _now, held_for, reclaimed, lost = redis_layer.run(block, idempotent=True)[:5]
        held_for = float(held_for)
        if int(lost):
            # A stalled holder (SIGSTOP, a long GC pause) taken for dead: its slot went to another
            # holder while it ran on. Said at INFO and left uncounted, the limit was silently exceeded.
            logger.warning("djwork: limiter %s slot was freed under its holder after %.3f s (its process was "
                           "taken for dead, or the limiter was reset) and the job ran on: the limit of %d was "
                           "exceeded meanwhile; counted as an overage", self.name, held_for, self.size)
        elif held_for > self.lock_timeout:
            logger.warning("djwork: limiter %s slot held %.3f s, past its lock_timeout of %g s (%s)",
                           self.name, held_for, self.lock_timeout,
                           "counted as an overage" if int(held) else "it had been reclaimed")
        elif not int(held):
            logger.info("djwork: limiter %s slot was freed before its release (reset, or its process was "
                        "taken for dead)", self.name)
        if int(reclaimed):
            logger.warning("djwork: limiter %s reclaimed %d slot(s) held past lock_timeout (%g s)",
                           self.name, int(reclaimed), self.lock_timeout)


def release_slots_of(identity: str) -> int:
    """Free every concurrent slot ``identity`` holds, for the reaper once it finds that process dead.

    Finds the holdings in the index (a lex range, not a scan), then frees them in one Lua call
    that re-checks each one, so it is safe to run twice or while slots change hands; each freed
    slot goes to its limiter's oldest waiter at once. Returns the number of slots freed.
    """
    freed = 0
    for _ in range(3):  # a waiter of the dead process granted meanwhile is freed on the next round
        calls = redis_layer.run(lambda conn: _free_calls(conn, identity), idempotent=True)
        if not calls:
            break
        left = 0
        for names in calls:

            def block(conn: Any, names: list[str] = names) -> list[Any]:
                reply = list(scripts.evaluate(conn, "limiter_concurrent", script_keys(layout_of(conn), *names),
                                              ["free", identity, *names]))
                pairs = reply[2:]
                wake(conn, [(_text(pairs[i]), _text(pairs[i + 1])) for i in range(0, len(pairs) - 1, 2)])
                return reply

            reply = redis_layer.run(block, idempotent=True)
            freed += int(reply[0])
            left += int(reply[1])
        if not left:
            break
    if freed:
        logger.warning("djwork: freed %d limiter slot(s) held by dead process %s", freed, identity)
    return freed


def _free_calls(conn: Any, identity: str) -> list[list[str]]:
    """The limiter names ``identity`` holds slots of, grouped by the free call that frees them.

    One server: one call for all, found in the shared index by a lex range (not a scan). A cluster: one call
    per limiter (each is its own slot), found in each limiter's own index.
    """
    if layout_of(conn).cluster:
        return [[name] for name, entries in holdings_by_limiter(conn).items()
                if any(_text(entry).startswith(f"{identity}\t") for entry in entries)]
    low, high = f"[{identity}\t".encode(), f"[{identity}\t".encode() + b"\xff"
    entries = conn.zrangebylex(keys.LIMITER_HOLDINGS, low, high)
    names = sorted({_text(entry).split("\t")[1] for entry in entries if _text(entry).count("\t") >= 2})
    return [names] if names else []


def _all_holdings(conn: Any) -> list[Any]:
    if layout_of(conn).cluster:
        return [entry for entries in holdings_by_limiter(conn).values() for entry in entries]
    return conn.zrange(keys.LIMITER_HOLDINGS, 0, -1)


def identities_holding_slots() -> list[str]:
    """Every process identity that holds a concurrent slot (the reaper may check each one's beat)."""
    entries = redis_layer.run(_all_holdings, idempotent=True)
    return sorted({_text(entry).split("\t")[0] for entry in entries})
