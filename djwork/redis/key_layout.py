"""The per-queue and per-job companion keys of each mode: one server's names, or a Redis Cluster's hash-tagged ones.

Every name is spelled in djwork/redis/keys.py; this module only chooses between its two layouts, once,
by the mode (docs/cluster.md, Keys), so no caller tests the mode to name a key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis as redis_py

from djwork.redis import keys

# ZSET burial name -> epoch seconds: the poison pills a cluster's reapers filed in `dead` (lua/file_once.lua), in
# dead's slot, kept an hour. A cluster's key only, named here: djwork/redis/keys.py is at its size limit.
CLUSTER_PILL_BURIALS = "djwork:pill-burials:{dead}"
PILL_BURIALS_HORIZON = 3600  # seconds: far longer than two reapers of one pass are apart
# ZSET bid -> epoch seconds: batches a cluster's job end may have left a fired callback pending in
# (djwork/batches/cluster_accounting.py), marked before that step; the leader's sweep reads the marks. Its own slot.
CLUSTER_BATCH_SWEEP = "djwork:batch-sweep"


def cluster_queue_tag(queue_name: str) -> str:
    """``{queue:<name>}``: the hash tag that puts a queue's companions (its lanes too) in the queue's slot."""
    return f"{{{keys.queue(queue_name)}}}"


# A batch's companions on a cluster: ``{b-<bid>}-jids`` and so on, tagged by the batch's hash ``b-<bid>`` (which
# keeps Sidekiq's name), so its accounting reads and writes them in one slot. Generated into Lua too
# (djwork/redis/lua_keys.py): lua/batch_account.lua puts them in place of one server's names.
def cluster_batch_jids(bid: str) -> str:
    return f"{{{keys.BATCH_PREFIX}{bid}}}-jids"


def cluster_batch_failed(bid: str) -> str:
    return f"{{{keys.BATCH_PREFIX}{bid}}}-failed"


def cluster_batch_died(bid: str) -> str:
    return f"{{{keys.BATCH_PREFIX}{bid}}}-died"


def cluster_batch_order(bid: str) -> str:
    return f"{{{keys.BATCH_PREFIX}{bid}}}-order"


def cluster_batch_results(bid: str) -> str:
    return f"{{{keys.BATCH_PREFIX}{bid}}}-results"


@dataclass(frozen=True, slots=True)
class BatchKeys:
    """One batch's keys in a mode's names: its hash and its companion sets and lists."""

    hash: str
    jids: str
    failed: str
    died: str
    order: str
    results: str


@dataclass(frozen=True, slots=True)
class LimiterKeys:
    """One limiter's keys, in lua/limiter_*.lua's terms.

    ``registry`` is the script's KEYS[1]: ``djwork:limiters`` on one server; on a cluster (the registry is in
    a slot of its own) the metadata key itself, which tells the script to leave the registry to the listing
    step apart (lua/limiter_list.lua, docs/cluster.md). ``holdings`` is the index of held slots: one shared
    ZSET on one server, the limiter's own on a cluster.
    """

    registry: str
    meta: str
    stats: str
    state: str
    holders: str
    owners: str
    waiters: str
    waiting: str
    lost: str
    holdings: str


@dataclass(frozen=True, slots=True)
class Layout:
    """The per-queue companion keys of one mode: one server's names, or a cluster's hash-tagged ones.

    The queue itself (``queue``) and every Sidekiq key are the same in both.
    """

    cluster: bool

    def in_progress(self, identity: str, queue_name: str) -> str:
        if self.cluster:
            return keys.cluster_in_progress(identity, queue_name)
        return keys.in_progress(identity, queue_name)

    def isolated(self, queue_name: str) -> str:
        return keys.cluster_isolated(queue_name) if self.cluster else keys.isolated(queue_name)

    def orphan_counts(self, queue_name: str) -> str:
        """One server keeps every queue's counters in one hash; a cluster one per queue, in its slot."""
        return keys.cluster_orphan_counts(queue_name) if self.cluster else keys.ORPHAN_COUNTS

    def lanes(self, queue_name: str) -> str:
        """The queue's lanes SET (docs/priority.md): on a cluster ``djwork:lanes:{queue:<name>}``, in the queue's
        slot, so the per-queue one-slot steps (fetch, recovery, requeue, return) register and read it."""
        return keys.lanes(self.lane_name(queue_name))

    def lane_name(self, queue_name: str) -> str:
        """The name lane keys are built from (``keys.lane``, lua/lane_lib.lua): the queue's name on one server;
        on a cluster the queue's hash tag ``{queue:<name>}``, or its lanes would lie outside the queue's slot."""
        return cluster_queue_tag(queue_name) if self.cluster else queue_name

    def lane(self, queue_name: str, lane: int) -> str:
        """The LIST a job of ``lane`` (-9..9) waits on: lane 0 is the queue's own list, Sidekiq's, in both modes."""
        return keys.lane(self.lane_name(queue_name), str(lane)) if lane else keys.queue(queue_name)

    def finished_late(self, queue_name: str) -> str:
        return keys.cluster_finished_late(queue_name) if self.cluster else keys.FINISHED_LATE

    def result_notify(self, jid: str) -> str:
        return keys.cluster_result_notify(jid) if self.cluster else keys.result_notify(jid)

    def result_waiters(self, jid: str) -> str:
        """One server keeps every waiter in one hash; a cluster one per job, in its record's slot."""
        return keys.cluster_result_waiters(jid) if self.cluster else keys.RESULT_WAITERS

    def periodic_history(self, entry_id: str) -> str:
        return keys.cluster_periodic_history(entry_id) if self.cluster else keys.periodic_history(entry_id)

    def limiter(self, name: str) -> LimiterKeys:
        meta = keys.limiter(name)
        group = keys.cluster_limiter_tag(name) if self.cluster else name
        return LimiterKeys(
            registry=meta if self.cluster else keys.LIMITERS, meta=meta, stats=keys.limiter_stats(group),
            state=keys.limiter_state(group), holders=keys.limiter_holders(group), owners=keys.limiter_owners(group),
            waiters=keys.limiter_waiters(group), waiting=keys.limiter_waiting(group), lost=keys.limiter_lost(group),
            holdings=keys.cluster_limiter_holdings(name) if self.cluster else keys.LIMITER_HOLDINGS)

    def periodic_lock(self, entry_id: str) -> str:
        """A no-overlap entry's running lock: in its state's slot on a cluster, so the claim takes it in one step."""
        return keys.periodic_lock(entry_id, cluster=self.cluster)

    def clearing_copy(self, key: str, stamp: str) -> str:
        """Where a clear sets ``key`` aside (djwork/api/clearing.py): ``djwork:clearing:<stamp>`` on one server;
        on a cluster ``djwork:clearing:{<key>}:<stamp>``, the key its own hash tag, so the rename is one slot."""
        if not self.cluster:
            return f"{keys.CLEARING_PREFIX}{stamp}"
        # A key with a hash tag of its own (a lane, `djwork:lane:{queue:<name>}|<n>`) hashes by that tag: the
        # copy takes the same one, or `{djwork:lane:{queue:<name>}` would be the tag and the rename cross slots.
        start = key.find("{")
        end = key.find("}", start + 1) if start >= 0 else -1
        tag = key[start:end + 1] if start >= 0 and end > start + 1 else f"{{{key}}}"
        return f"{keys.CLEARING_PREFIX}{tag}:{stamp}"

    def batch(self, bid: str) -> BatchKeys:
        if self.cluster:
            return BatchKeys(keys.batch(bid), cluster_batch_jids(bid), cluster_batch_failed(bid),
                             cluster_batch_died(bid), cluster_batch_order(bid), cluster_batch_results(bid))
        return BatchKeys(keys.batch(bid), keys.batch_jids(bid), keys.batch_failed(bid), keys.batch_died(bid),
                         keys.batch_order(bid), keys.batch_results(bid))

    def quarantine_head(self, key: str) -> str | None:
        """The start of the name the key guard gives a copy of ``key``, up to ``<ms>:<random>``.

        On a cluster the copy must hash to the key's slot, so one RENAME moves it: a key with a hash tag of its
        own keeps it in the copy (the prefix holds no brace), a key with no brace is wrapped in braces. A key
        whose braces make no tag (``a{b``, ``a{}b``, ``a}b``) can't be named in its slot: None, and the guard
        copies it with DUMP and RESTORE instead (djwork/redis/cluster_quarantine.py).
        """
        plain = f"{keys.QUARANTINE_PREFIX}{key}:"
        if not self.cluster:
            return plain
        start = key.find("{")
        if start >= 0:
            return plain if key.find("}", start + 1) > start + 1 else None
        return None if "}" in key else f"{keys.QUARANTINE_PREFIX}{{{key}}}:"

    def quarantined_key(self, copy: str) -> str:
        """The key a copy the key guard made was (``quarantine_head``'s inverse), for the quarantine listing."""
        if not copy.startswith(keys.QUARANTINE_PREFIX):
            return copy
        original = copy[len(keys.QUARANTINE_PREFIX):].rsplit(":", 2)[0]
        if self.cluster and original.startswith("{") and original.endswith("}") and original.count("{") == 1 \
                and original.count("}") == 1:
            return original[1:-1]  # wrapped by quarantine_head: a key with no brace of its own
        return original

    @property
    def dead_bytes(self) -> str:
        return keys.CLUSTER_DEAD_BYTES if self.cluster else keys.DEAD_BYTES


SINGLE_SERVER = Layout(cluster=False)
CLUSTER = Layout(cluster=True)


def layout(cluster: bool) -> Layout:
    """The layout of a mode: ``CLUSTER`` for a ``redis+cluster://`` REDIS_URL, else ``SINGLE_SERVER``."""
    return CLUSTER if cluster else SINGLE_SERVER


def layout_of(conn: Any) -> Layout:
    """The layout of the Redis ``conn`` reaches: for a reader handed a client (djwork.api), not a config."""
    return CLUSTER if isinstance(conn, redis_py.RedisCluster) else SINGLE_SERVER
