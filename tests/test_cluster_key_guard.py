"""The key guard on a real Redis Cluster (3 primaries + 3 replicas): docs/cluster.md, quarantine.lua.

A wrong-type key is moved aside in single-slot steps (djwork/redis/cluster_quarantine.py): renamed to a copy
in its own slot, then indexed in the index's slot. A real ``runworkers`` process meets wrong-type queue,
`retry`, `schedule`, `dead` and isolated-list keys, moves each aside, and runs its jobs; djwork.api's
quarantine listing reads the moves back.
"""

from __future__ import annotations

from djwork.api import Quarantine
from djwork.redis import key_repair, keys
from tests import cluster_jobs
from tests.cluster_jobs import COUNTS
from tests.helpers_worker import wait_until

QUEUES = ["q1", "q2", "q3"]


def _counts(conn) -> dict[str, int]:
    return {name.decode(): int(value) for name, value in conn.hgetall(COUNTS).items()}


def _listed() -> dict[str, str]:
    """key -> its copy, from djwork.api's listing (the newest copy of each key)."""
    return {entry.key: entry.copy for entry in reversed(Quarantine.recent(100))}


def test_a_worker_moves_wrong_type_keys_aside_and_runs_its_jobs(on_cluster, workers):
    conn = on_cluster.cluster_client()
    assert len({conn.get_node_from_key(keys.queue(queue)).name for queue in QUEUES}) == 3
    isolated = keys.cluster_isolated("q2")
    planted = {keys.queue("q1"): "set", keys.RETRY: "list", keys.SCHEDULE: "string", keys.DEAD: "hash",
               isolated: "string"}
    conn.sadd(keys.queue("q1"), "not a job")
    conn.rpush(keys.RETRY, "not an entry")
    conn.set(keys.SCHEDULE, "junk")
    conn.hset(keys.DEAD, "a", "b")
    conn.set(isolated, "junk")
    for queue in ("q2", "q3"):
        cluster_jobs.record.set(queue=queue).delay(f"before-{queue}")
    # Fails once: its retry is filed in `retry`, which must be a ZSET again by then.
    cluster_jobs.fail_once.set(queue="q3").delay("retried")
    worker = workers.start("-c", "4", *(argument for queue in QUEUES for argument in ("-q", queue)),
                           redis_url=on_cluster.url())
    wait_until(lambda: set(planted) <= set(_listed()), 60, "every planted key to be moved aside and listed")
    # The queue is a LIST again: a job pushed to it now runs.
    cluster_jobs.record.set(queue="q1").delay("after-q1")
    wait_until(lambda: len(_counts(conn)) == 4, 60, "every good job to run")
    assert _counts(conn) == {"before-q2": 1, "before-q3": 1, "retried": 1, "after-q1": 1}
    listed = _listed()
    for key, kind in planted.items():
        copy = listed[key]
        # Renamed in the key's own slot, with its content and its 30-day TTL.
        assert conn.keyslot(copy) == conn.keyslot(key)
        assert conn.type(copy).decode() == kind
        assert 0 < conn.ttl(copy) <= keys.QUARANTINE_TTL
        assert f"key {key} held a {kind}" in worker.log()
    assert conn.smembers(listed[keys.queue("q1")]) == {b"not a job"}
    assert conn.type(keys.RETRY).decode() in ("none", "zset")
    assert "CROSSSLOT" not in worker.log()


def test_a_key_whose_braces_make_no_tag_is_copied_and_a_key_s_copies_are_trimmed(on_cluster):
    conn = on_cluster.cluster_client()
    # `queue:a{b` hashes whole, and no copy name can share its slot: DUMP, RESTORE, then the key deleted.
    odd = keys.queue("a{b")
    conn.sadd(odd, "x")
    copy = key_repair.quarantine_if_wrong_type(odd, "list")
    assert copy is not None and copy.startswith(keys.QUARANTINE_PREFIX + odd + ":")
    assert conn.exists(odd) == 0 and conn.smembers(copy) == {b"x"}
    assert 0 < conn.ttl(copy) <= keys.QUARANTINE_TTL
    assert _listed()[odd] == copy
    # A good key is left alone.
    conn.rpush(odd, "job")
    assert key_repair.quarantine_if_wrong_type(odd, "list") is None and conn.llen(odd) == 1
    # Six moves of one key keep its five newest copies; the oldest, in the key's slot, is deleted.
    copies = []
    for number in range(key_repair.COPIES_KEPT + 1):
        conn.set(keys.queue("q1"), str(number))
        copies.append(key_repair.quarantine_if_wrong_type(keys.queue("q1"), "list"))
    assert all(copies)
    assert conn.exists(copies[0]) == 0
    assert [conn.get(copy) for copy in copies[1:]] == [str(number).encode() for number in range(1, 6)]
    indexed = {member.decode() for member in conn.zrange(keys.QUARANTINE_INDEX, 0, -1)}
    assert copies[0] not in indexed and set(copies[1:]) <= indexed
    # The index itself the wrong type: moved aside in its own slot, then used again.
    conn.delete(keys.QUARANTINE_INDEX)
    conn.set(keys.QUARANTINE_INDEX, "junk")
    conn.set(keys.SCHEDULE, "junk")
    copy = key_repair.quarantine_if_wrong_type(keys.SCHEDULE, "zset")
    assert conn.type(keys.QUARANTINE_INDEX) == b"zset"
    index_copies = [entry.copy for entry in Quarantine.recent() if entry.key == keys.QUARANTINE_INDEX]
    assert len(index_copies) == 1 and conn.get(index_copies[0]) == b"junk"
    assert _listed()[keys.SCHEDULE] == copy
    # The sweep names a queue's isolated list as the cluster does (its queue's tag).
    conn.sadd(keys.QUEUES, "q2")
    conn.set(keys.cluster_isolated("q2"), "junk")
    moved = dict(key_repair.sweep())
    assert set(moved) == {keys.cluster_isolated("q2")}
    assert conn.keyslot(moved[keys.cluster_isolated("q2")]) == conn.keyslot(keys.queue("q2"))
