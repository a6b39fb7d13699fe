"""The fetch and its acks on a Redis Cluster: one ``lua/fetch_queue.lua`` call per queue, each in its slot.

On one server ``fetch.lua`` settles the acks and takes jobs from every queue in one step. On a cluster
each queue's keys share the queue's slot (``{queue:<name>}``), so each queue gets a call of its own, and
the calls of a round go out together, one round trip per node (djwork.redis.exchange_on). The reliable
fetch's guarantee is the same: a job moves from its queue to its in-progress list inside one call, so it
is always on one of the two.

A round settles the acks of every queue that has some (an ack-only call, limit 0) and takes up to the
limit from the queues of the fetch's order, each given what its length (read at the end of the last
round, ``LLEN`` riding in the round) says it holds, the first queue that may hold jobs given the rest:
the calls of a round never take more than the free slots, since a call cannot know what the others
took. Queues not known empty are asked first-come in order, as ``fetch.lua`` does; only when a round
comes back short and a queue's fresh length says it has jobs is another round sent. A busy queue fills
the batch in one round trip, as on one server; a drained queue costs nothing until it has jobs again
(its length is read in every round).

The first round is sent by ``send`` and read by ``receive``, so the worker's refill overlaps it with its
last jobs, as on one server. ``paused`` lives in a slot of its own: its SMEMBERS rides in the first
round, and the queues it names are skipped from the next fetch on (one fetch later than on one server,
where the check is in the step).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.crc import key_slot
from redis.exceptions import NoScriptError

from djwork import redis as redis_layer
from djwork.batches import cluster_accounting
from djwork.payload import stored_payload
from djwork.redis import key_layout, keys, lanes, scripts
from djwork.redis.cluster_exchange import receive_by_node, send_by_node
from djwork.results import revoke_events
from djwork.settings.conf import Capsule
from djwork.worker.cluster import locks, results, revoked
from djwork.worker.cluster.taker import ClusterQueueTaker
from djwork.worker.fetch import Ack, Fetcher, SentFetch, UnitOfWork, logger
from djwork.worker.isolation import IsolationGate


@dataclass(slots=True)
class ClusterSentFetch(SentFetch):
    """A cluster's first round in flight: its script calls (queue index, limit) and the round to read."""

    calls: list[tuple[int, int]] = field(default_factory=list)
    round: Any = None  # djwork.redis.cluster_exchange.SentRound


class ClusterFetcher(Fetcher):
    """``Fetcher`` whose fetch is one single-slot call per queue; requeue and the rest use the cluster's keys."""

    taker_class = ClusterQueueTaker

    def __init__(self, identity: str, capsule: Capsule, reliable: bool,
                 isolation: IsolationGate | None = None) -> None:
        super().__init__(identity, capsule, reliable, isolation, layout=key_layout.CLUSTER)
        self.finished_late_keys = [keys.cluster_finished_late(name) for name in self.queue_names]
        # Queue index -> its length at the end of the last round (LLEN rides in every round); absent: unknown.
        self.lengths: dict[int, int] = {}
        self.paused_unknown = True
        # Each queue's slot (its companions' too, by the tag), and paused's: computed once, not per round.
        self.queue_slots = [key_slot(key.encode()) for key in self.queue_keys]
        self.paused_slot = key_slot(keys.PAUSED.encode())
        self.revoked_slot = key_slot(keys.REVOKED.encode())
        # Whether the last first round saw djwork:revoked non-empty: only then are the jobs taken checked.
        self.revoked_seen = False

    def send(self, limit: int, acks: list[Ack]) -> SentFetch:
        """The first round leaves (every queue's acks, its takes, the lengths and ``paused``); ``receive`` reads it.

        As on one server, the worker's refill sends it while its last jobs still run.
        """
        if self.paused_unknown:
            # The first fetch reads `paused` before it takes: a queue paused before the worker started is
            # never fetched (later pauses apply from the fetch after the round that read them).
            self.paused = {name.decode() if isinstance(name, bytes) else name for name in redis_layer.run(
                lambda conn: conn.smembers(keys.PAUSED), idempotent=True, purpose="fetch")}
            self.paused_unknown = False
        order = [index for index in self.order() if self.queue_names[index - 1] not in self.paused]
        # The acks' results are written before the round that LREMs their jobs: a crash between leaves a job
        # with its record and still in progress, to run again (never acked with no record).
        self.store_results(acks)
        # Their batches told likewise before the LREMs: a crash between runs the job again, counted once.
        cluster_accounting.end_members([end for ack in acks
                                        for end in cluster_accounting.batch_ends(ack.locks, ack.jid, "ok")])
        isolated_allowed = self.isolation.reserve() if self.reliable and limit > 0 else 0
        acked: dict[int, list[Any]] = {}
        for ack in acks:
            acked.setdefault(ack.queue_index, []).append(ack.raw)
        takes = self._allotted(order, limit)
        calls = takes + [(index, 0) for index in acked if index not in dict(takes)]
        commands = [self._call(index, each_limit, isolated_allowed if position == 0 and each_limit else 0,
                               acked.get(index, []))
                    for position, (index, each_limit) in enumerate(calls)]
        commands += self._length_reads()
        commands += [("EXISTS", keys.REVOKED), ("SMEMBERS", keys.PAUSED)]
        slots = [self.queue_slots[index - 1] for index, _limit in calls] + self.queue_slots * 2 + [self.revoked_slot,
                                                                                                   self.paused_slot]
        try:
            # A failed dial is retried by the policy: nothing was sent to any node then (cluster_exchange).
            sent_round = redis_layer.run(lambda conn: send_by_node(conn, commands, redis_layer.pack, slots),
                                         purpose="fetch")
        except BaseException:
            self.isolation.settle(isolated_allowed, 0)
            raise
        return ClusterSentFetch(limit, acks, order, isolated_allowed, [], [], calls, sent_round)

    def _allotted(self, order: list[int], limit: int) -> list[tuple[int, int]]:
        """(queue index, its limit) in order: what each queue's last known length says it holds, up to ``limit``.

        A queue whose length is unknown (never read) may hold anything: it is given the rest. At least the
        first queue is asked when none is known to hold jobs, so a job pushed since the last round is found.
        """
        takes: list[tuple[int, int]] = []
        remaining = limit
        for index in order:
            if remaining <= 0:
                break
            known = self.lengths.get(index)
            if known == 0:
                continue
            given = remaining if known is None else min(known, remaining)
            takes.append((index, given))
            remaining -= given
        if not takes and order and limit > 0:
            takes.append((order[0], limit))
        return takes

    def _length_reads(self) -> list[tuple[Any, ...]]:
        """Each queue's LLEN, then whether each has lanes registered (its lanes SET, in its slot)."""
        return [("LLEN", key) for key in self.queue_keys] + [("EXISTS", key) for key in self.lanes_keys]

    def _read_lengths(self, replies: list[Any]) -> None:
        count = len(self.queue_keys)
        for index, (reply, lanes_present) in enumerate(zip(replies[:count], replies[count:], strict=True), start=1):
            if isinstance(reply, int) and lanes_present == 0:
                self.lengths[index] = reply
            else:
                # Unknown again, asked like a queue never read: its own list's length says nothing of its lanes.
                self.lengths.pop(index, None)

    def receive(self, sent: SentFetch) -> list[UnitOfWork]:
        try:
            work = self._rounds(sent)
        except BaseException:
            self.lengths.clear()  # what the lost round took is unknown: every queue may hold jobs
            # Unknown whether an isolated job was taken; a reconcile adopts it unflagged.
            self.isolation.settle(sent.isolated_allowed, 0)
            raise
        self.isolation.settle(sent.isolated_allowed, sum(unit.isolated for unit in work))
        if self.revoked_seen and work:
            work = self._without_revoked(work)
        # The acks' LREMs have their replies: now their locks, one call per lock (each its own slot).
        locks.release_ended([(ack.jid, ack.locks) for ack in sent.acks if ack.locks])
        return work

    def _call(self, index: int, limit: int, isolated_allowed: int, raws: list[Any]) -> tuple[Any, ...]:
        script_keys, args = self._call_parts(index, limit, isolated_allowed, raws)
        return ("EVALSHA", scripts.sha("fetch_queue"), len(script_keys), *script_keys, *args)

    def _call_parts(self, index: int, limit: int, isolated_allowed: int,
                    raws: list[Any]) -> tuple[list[str], list[Any]]:
        script_keys = [self.queue_keys[index - 1], self.in_progress_keys[index - 1], self.isolated_keys[index - 1],
                       self.orphan_counts_keys[index - 1], self.finished_late_keys[index - 1],
                       self.lanes_keys[index - 1]]
        return script_keys, [limit, "reliable" if self.reliable else "basic", isolated_allowed,
                             self.lane_names[index - 1], *raws]

    def take_one(self, index: int) -> Any:
        """A queue taker's look at its queue's lanes and own list without blocking (docs/priority.md): one
        ``fetch_queue.lua`` call for that queue, limit 1, no acks, no isolated job. The job taken, or None.

        Not replayed: a lost reply may hide a job already moved to the in-progress list, which the caller's
        reconcile adopts, as after a lost blocking take.
        """
        script_keys, args = self._call_parts(index, 1, 0, [])
        reply = redis_layer.run(lambda conn: scripts.evaluate(conn, "fetch_queue", script_keys, args),
                                purpose="fetch")
        taken = self._taken(index, reply)
        return taken[0].raw if taken else None

    def _rounds(self, sent: Any) -> list[UnitOfWork]:
        replies = self._again_as_eval(sent.round.commands, receive_by_node(sent.round))
        paused, revoked_seen = replies.pop(), replies.pop()
        if not isinstance(paused, Exception):
            self.paused = {name.decode() if isinstance(name, bytes) else name for name in paused}
        self.revoked_seen = revoked_seen != 0  # an error reply: checked, to be safe
        work = self._round_done(sent.calls, replies)
        asked = {index for index, _limit in sent.calls}
        while len(work) < sent.limit:
            # Short: another round only for queues not asked yet that the fresh lengths say hold jobs.
            takes = self._allotted([index for index in sent.order if index not in asked and self.lengths.get(index)],
                                   sent.limit - len(work))
            if not takes:
                break
            asked.update(index for index, _limit in takes)
            allowed = max(0, sent.isolated_allowed - sum(unit.isolated for unit in work))
            commands = [self._call(index, each_limit, allowed if position == 0 else 0, [])
                        for position, (index, each_limit) in enumerate(takes)] + self._length_reads()
            replies = redis_layer.run(lambda conn, commands=commands: redis_layer.exchange_on(conn, commands),
                                      purpose="fetch")
            work += self._round_done(takes, self._again_as_eval(commands, replies))
        return work

    def _round_done(self, calls: list[tuple[int, int]], replies: list[Any]) -> list[UnitOfWork]:
        """The jobs a round's calls took; the queues' lengths it read (the replies after the calls) kept."""
        self._read_lengths(replies[len(calls):len(calls) + 2 * len(self.queue_keys)])
        return self._taken_all(calls, replies[:len(calls)])

    def _again_as_eval(self, commands: list[tuple[Any, ...]], replies: list[Any]) -> list[Any]:
        """The calls answered NOSCRIPT (which ran nothing: a node promoted since the boot) sent again as EVAL."""
        refused = [position for position, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if refused:
            # Not replayed: a lost reply may hide jobs a call moved, which the dispatcher's reconcile adopts.
            again = redis_layer.run(lambda conn: redis_layer.exchange_on(
                conn, [("EVAL", scripts.source("fetch_queue"), *commands[position][2:]) for position in refused]),
                purpose="fetch")
            for position, reply in zip(refused, again, strict=True):
                replies[position] = reply
        return replies

    def _taken_all(self, calls: list[tuple[int, int]], replies: list[Any]) -> list[UnitOfWork]:
        return [unit for (index, _limit), reply in zip(calls, replies, strict=True)
                for unit in self._taken(index, reply)]

    def _taken(self, index: int, reply: Any) -> list[UnitOfWork]:
        if isinstance(reply, Exception):
            # The call did not run (a refused command is refused whole): this queue's acks wait for a
            # reconcile, its jobs stay queued; the other queues' calls stand.
            logger.error("djwork: the fetch from queue %s failed: %s", self.queue_names[index - 1], reply)
            raise reply
        payloads, isolated_taken, broken, skipped = reply
        if broken:
            self._report_broken(broken)
        for jid in skipped:
            logger.warning("djwork: dropped a copy of job %s: it already finished after its process's "
                           "shutdown deadline had pushed it back", jid.decode() if isinstance(jid, bytes) else jid)
        in_progress = self.in_progress_keys[index - 1] if self.reliable else None
        return [UnitOfWork(queue=self.queue_names[index - 1], queue_index=index, raw=stored_payload(raw),
                           in_progress_key=in_progress, isolated=position == 0 and bool(isolated_taken))
                for position, raw in enumerate(payloads)]

    def store_results(self, acks: Sequence[Ack]) -> None:
        """One single-slot write per job's result (djwork/worker/cluster/results.py), not one step for all."""
        results.store_results([(ack.jid, ack.result) for ack in acks if ack.result and ack.jid])

    def settle_late(self, unit: UnitOfWork) -> str:
        """``Fetcher.settle_late`` without the locks in its step (they are in other slots), released after it."""
        held, unit.locks = unit.locks, ""
        if unit.ack_jid:  # it succeeded: its batch told first, as an ack's is (counted once however often)
            cluster_accounting.end_members(cluster_accounting.batch_ends(held, unit.ack_jid, "ok"))
        try:
            outcome = super().settle_late(unit)
        finally:
            unit.locks = held
        if outcome in ("removed", "acked"):  # "marked": the locks stay with the copy left, and expire by TTL
            locks.release_ended([(unit.ack_jid or "", held)])
        return outcome

    def _without_revoked(self, work: list[UnitOfWork]) -> list[UnitOfWork]:
        """The fetched jobs less the revoked ones, dropped in steps (djwork/worker/cluster/revoked.py)."""
        dropped = revoked.drop_revoked([(unit.raw, unit.in_progress_key or "",
                                         self.orphan_counts_keys[unit.queue_index - 1]) for unit in work])
        if dropped:
            revoke_events.dropped([work[position].raw for position in sorted(dropped)], self.identity)
        return [unit for position, unit in enumerate(work) if position not in dropped]

    def drop_if_revoked(self, queue_index: int, raw: Any) -> bool:
        """A job a taker took, dropped if revoked (asked for every take: a taker's round can't read the set)."""
        in_progress = self.in_progress_keys[queue_index - 1] if self.reliable else ""
        if not revoked.drop_revoked([(raw, in_progress, self.orphan_counts_keys[queue_index - 1])]):
            return False
        revoke_events.dropped([raw], self.identity)
        return True

    def _push_back(self, unfinished: Any) -> int:
        """Basic fetch's shutdown push-back: one RPUSH per job, each in its queue's slot (no MULTI across them)."""
        if not unfinished:
            return 0
        # Each job to its lane (docs/priority.md), the lane registered after the push.
        commands = [command for unit in unfinished
                    for command in lanes.push_commands(unit.queue, lanes.lane_of_raw(unit.raw), [unit.raw], "RPUSH",
                                                       self.layout)]
        # Not replayed: a lost reply may hide pushes that landed; basic fetch accepts the loss instead.
        redis_layer.run(lambda conn: redis_layer.exchange_on(conn, commands))
        return len(unfinished)
