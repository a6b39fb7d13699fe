"""QueueTaker: one blocked connection that waits on one queue and takes the job that lands on it (takers.py)."""

from __future__ import annotations

import threading
from typing import Any

from djwork import redis as redis_layer
from djwork.payload import StoredPayload, stored_payload
from djwork.redis import keys, lanes, scripts
from djwork.redis.key_types import WrongTypeKey
from djwork.worker.fetch import Fetcher, UnitOfWork


class QueueTaker:
    """A dedicated connection that blocks on one queue and takes the job that lands on it.

    Reliable fetch moves the job into the in-progress list (BLMOVE), so a lost
    reply or a crash leaves it where reconciling or orphan recovery finds it;
    basic fetch pops it (BRPOP), as Sidekiq OSS does. The connection is its
    own so that another thread can cut the wait short with CLIENT UNBLOCK.
    """

    def __init__(self, fetcher: Fetcher, queue_index: int) -> None:
        self.fetcher = fetcher
        self.queue_index = queue_index
        self.queue = fetcher.queue_names[queue_index - 1]
        self.queue_key = fetcher.queue_keys[queue_index - 1]
        self.in_progress_key = fetcher.in_progress_keys[queue_index - 1]
        self.connection: Any = None
        self.client_id: int | None = None
        self.wrong_type_streak = False  # failing on a key of the wrong type: logged once per streak
        # The queue has priority lanes registered (docs/priority.md), as the last take saw: each take then
        # starts with a non-blocking fetch.lua over the lanes and the queue, highest lane first. True at
        # first, so jobs already waiting in lanes are not passed over by the first blocking take.
        self.lanes_seen = True
        self.lanes_key = fetcher.lanes_keys[queue_index - 1]
        self._lock = threading.Lock()

    def connect(self) -> int:
        """Open the connection if needed and learn its id (for CLIENT UNBLOCK)."""
        with self._lock:
            if self.connection is None:
                self.connection = redis_layer.dedicated_connection("fetch")
            if self.client_id is None:
                try:
                    self.connection.send_command("CLIENT", "ID")
                    self.client_id = int(self.connection.read_response())
                except BaseException:
                    self._drop()
                    raise
            return self.client_id

    def take(self, timeout: float) -> tuple[str | None, bool]:
        """Block up to ``timeout`` seconds for a job; returns (raw payload or None, queue paused?).

        The paused check rides in the same round trip and runs after the take,
        so it sees a pause that began while we were blocked.

        While the queue has priority lanes, the queue's lanes and own list are looked at first without
        blocking (``Fetcher.take_one``); only when all are empty does the take block, on the queue's own
        list: a job pushed to a lane meanwhile is taken once the block ends (``fetch_timeout`` at most).
        """
        if self.lanes_seen:
            taken, paused = self.take_one()
            if taken is not None or paused:
                return taken, paused
        connection = self.connection
        take = self._take_command(timeout)
        try:
            taken, paused, finished_late, revoked, lanes_present = redis_layer.exchange(connection, [
                take, ("SISMEMBER", keys.PAUSED, self.queue), ("EXISTS", keys.FINISHED_LATE),
                ("EXISTS", keys.REVOKED), ("EXISTS", self.lanes_key)])
        except BaseException:
            with self._lock:
                self._drop()
            raise
        for reply, candidates in ((taken, [self.queue_key, self.in_progress_key]), (paused, [keys.PAUSED])):
            if isinstance(reply, Exception):
                # WRONGTYPE names no key: say which. A refused take moved nothing; a failed
                # paused check follows a take that ran (a job may be on our in-progress list).
                error = scripts.named_on_connection(connection, reply, f"the wait on queue {self.queue}", candidates)
                if isinstance(error, WrongTypeKey) and not error.keys:
                    with self._lock:
                        self._drop()  # the TYPE lookup may have failed and closed the socket: redial, new id
                raise error
        self.lanes_seen = lanes_present == 1
        taken = self._payload(taken)
        if taken is not None:
            dropped = finished_late and self.fetcher.reliable and self.fetcher.drop_if_finished_late(
                self.queue_index, taken)
            if dropped or (revoked and self.fetcher.drop_if_revoked(self.queue_index, taken)):
                taken = None
        return taken, bool(paused)

    def take_one(self) -> tuple[StoredPayload | None, bool]:
        """A look at the queue's priority lanes and own list without blocking (docs/priority.md): fetch.lua
        for this queue alone, no acks, no isolated job (``Fetcher.take_isolated`` is asked first). Returns
        (the job taken, or None; whether the queue is paused).

        Not replayed: a lost reply may hide a job already moved to the in-progress list, which the caller's
        reconcile adopts, as after a lost blocking take.
        """
        fetcher = self.fetcher
        script_keys = fetcher.script_keys([self.queue_index])
        args = [1, "reliable" if fetcher.reliable else "basic", 0, 0, self.queue]
        fetched, paused, broken, skipped, revoked = redis_layer.run(
            lambda conn: scripts.evaluate(conn, "fetch", script_keys, args), purpose="fetch")
        fetcher.report_drops(broken, skipped, revoked)
        return (stored_payload(fetched[1]) if fetched else None), bool(paused)

    def _take_command(self, timeout: float) -> tuple[Any, ...]:
        """The blocking take: reliable fetch moves the job onto our in-progress list in the same command."""
        if self.fetcher.reliable:
            return ("BLMOVE", self.queue_key, self.in_progress_key, "RIGHT", "LEFT", timeout)
        return ("BRPOP", self.queue_key, timeout)

    def _payload(self, taken: Any) -> StoredPayload | None:
        """The take's reply as a payload, or None when the wait timed out (BRPOP replies [queue, payload])."""
        if taken is not None and not self.fetcher.reliable:
            taken = taken[1]
        return stored_payload(taken) if isinstance(taken, bytes) else None

    def unblock(self) -> None:
        """Cut this taker's blocked wait short (CLIENT UNBLOCK of its connection's id), from another thread."""
        client_id = self.client_id
        if client_id is not None:
            redis_layer.run(lambda conn: conn.client_unblock(client_id), idempotent=True, purpose="admin")

    def is_paused(self) -> bool:
        return bool(redis_layer.run(lambda conn: conn.sismember(keys.PAUSED, self.queue), idempotent=True))

    def give_back(self, raw: StoredPayload, isolated: bool = False) -> None:
        """Return a job taken but not run to the pop end of the list it was taken from."""
        if self.fetcher.reliable:
            if isolated:
                script_keys, args = [self.in_progress_key, self.fetcher.isolated_keys[self.queue_index - 1]], [raw]
            else:  # a prioritised job back to its lane (docs/priority.md)
                script_keys = [self.in_progress_key, self.queue_key, self.lanes_key]
                args = [raw, self.fetcher.lane_names[self.queue_index - 1]]
            redis_layer.run(lambda conn: scripts.evaluate(conn, "return_job", script_keys, args), idempotent=True,
                            purpose="fetch")
        else:
            # Basic fetch already popped it: a lost reply here loses it, as basic fetch accepts.
            lane = lanes.lane_of_raw(raw)
            redis_layer.run(lambda conn: redis_layer.exchange_on(
                conn, lanes.push_commands(self.queue, lane, [raw], "RPUSH", self.fetcher.layout)), purpose="fetch")

    def unit(self, raw: StoredPayload) -> UnitOfWork:
        return UnitOfWork(queue=self.queue, queue_index=self.queue_index, raw=raw,
                          in_progress_key=self.in_progress_key if self.fetcher.reliable else None)

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        # After any error the reply stream is unknown: start over on a new socket, with a new id.
        if self.connection is not None:
            try:
                self.connection.disconnect()
            except Exception:  # pragma: no cover - teardown must not raise
                pass
        self.client_id = None


def refused_take(error: BaseException, taker: QueueTaker) -> bool:
    """The take itself was refused (its key holds the wrong type): it moved nothing, there is nothing to reconcile."""
    return isinstance(error, WrongTypeKey) and bool({taker.queue_key, taker.in_progress_key} & set(error.keys))
