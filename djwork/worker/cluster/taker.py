"""A queue taker on a Redis Cluster: its BLMOVE waits on the node that owns the queue's slot.

The in-progress list carries the queue's tag, so the take (queue to in-progress list) is one command in
one slot, as on one server. What the single-server take reads in the same round trip in other slots is
read apart: ``paused`` by a separate SISMEMBER after the take (so it still sees a pause that began
while the take was blocked); the finished-late marks are the queue's own (in its slot), so their EXISTS
rides with the take. A revoked job is checked after the take (``djwork:revoked`` is in another slot).
The queue's priority lanes carry its tag too (docs/priority.md): while its lanes SET exists (read with
the take, same slot), a take first looks at the lanes and the list without blocking (``fetch_queue.lua``).
After a failover the old primary answers the take with UNBLOCKED or MOVED, which ran nothing: the slot
map is read again and the next take dials the new primary.
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import MovedError, ResponseError

from djwork import redis as redis_layer
from djwork.payload import StoredPayload
from djwork.redis import cluster as redis_cluster
from djwork.redis import keys, scripts
from djwork.redis.connections import is_failover_reply
from djwork.worker.fetch import Fetcher
from djwork.worker.queue_taker import QueueTaker


class ClusterQueueTaker(QueueTaker):
    def __init__(self, fetcher: Fetcher, queue_index: int) -> None:
        super().__init__(fetcher, queue_index)
        self.finished_late_key = keys.cluster_finished_late(self.queue)
        self.node: str | None = None  # "host:port" of the primary the connection waits on (its ids are its own)

    def connect(self) -> int:
        with self._lock:
            if self.connection is None:
                self.node = redis_layer.client("fetch").get_node_from_key(self.queue_key).name
                self.connection = redis_cluster.node_connection(redis_layer.client("fetch"), self.queue_key)
        return super().connect()

    def unblock(self) -> None:
        """CLIENT UNBLOCK on the node this taker waits on: a client id means something on its own node only."""
        client_id, node = self.client_id, self.node
        if client_id is None or node is None:
            return

        def unblock(conn: Any) -> None:
            target = conn.get_node(node_name=node)
            if target is not None:  # gone from the slot map: the failover already cut the wait (UNBLOCKED)
                conn.get_redis_connection(target).client_unblock(client_id)

        redis_layer.run(unblock, idempotent=True, purpose="admin")

    def take(self, timeout: float) -> tuple[StoredPayload | None, bool]:
        if self.lanes_seen:
            # A job pushed to a lane does not wake the BLMOVE on the queue's own list: look first, highest lane
            # first, as one server's taker does.
            taken = self.fetcher.take_one(self.queue_index)
            if taken is not None:
                if self.fetcher.drop_if_revoked(self.queue_index, taken):
                    taken = None
                return taken, self.is_paused()
        connection = self.connection
        take = self._take_command(timeout)
        try:
            taken, finished_late, lanes_present = redis_layer.exchange(
                connection, [take, ("EXISTS", self.finished_late_key), ("EXISTS", self.lanes_key)])
        except ResponseError as error:
            if not (isinstance(error, MovedError) or is_failover_reply(error)):
                raise
            taken = error
        except BaseException:
            with self._lock:
                self._drop()
            raise
        if isinstance(taken, ResponseError) and (isinstance(taken, MovedError) or is_failover_reply(taken)):
            # The node is no longer the queue's primary: nothing ran; the next take dials the new one.
            self._moved()
            return None, False
        if isinstance(taken, Exception):
            error = scripts.named_on_connection(connection, taken, f"the wait on queue {self.queue}",
                                                [self.queue_key, self.in_progress_key])
            with self._lock:
                self._drop()
            raise error
        self.lanes_seen = lanes_present != 0  # an error reply: looked at, to be safe
        taken = self._payload(taken)
        if taken is not None:
            dropped = finished_late == 1 and self.fetcher.reliable and self.fetcher.drop_if_finished_late(
                self.queue_index, taken)
            if dropped or self.fetcher.drop_if_revoked(self.queue_index, taken):
                taken = None
        # After the take, so a pause that began while it was blocked is seen (one server: same round trip).
        return taken, self.is_paused()

    def _moved(self) -> None:
        with self._lock:
            self._drop()
            self.connection = None
        redis_cluster.reload_slots(redis_layer.client("fetch"))

    def close(self) -> None:
        super().close()
        self.connection = None
