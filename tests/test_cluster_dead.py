"""A poison pill's burial on a real Redis Cluster (3 primaries + 3 replicas): docs/cluster.md, Orphan recovery.

Two reapers that both saw a process dead are both handed its poison pill. One server files it only while it
is still on the list (tests/test_dead.py); a cluster names the burial in dead's slot (lua/file_once.lua).
These tests replay the two reapers' steps in the order that used to file the pill twice.
"""

from __future__ import annotations

import json
import time

from redis.crc import key_slot

from djwork.payload import dumps, new_jid, stored_payload
from djwork.redis import key_layout, keys, scripts
from djwork.settings.conf import get_config
from djwork.worker.cluster.recovery import ClusterReaper
from djwork.worker.fetch import ISOLATE_AFTER_RECOVERIES

CRASHED = "host:9:crashed"


def _pill(conn, config, identity: str = CRASHED) -> tuple[str, str, str]:
    """A job recovered as often as a job may be, on a dead process's list: the next recovery hands it over."""
    jid = new_jid()
    raw = dumps({"class": "tests.cluster_jobs.record", "args": ["p"], "queue": "q1", "jid": jid, "retry": True,
                 "enqueued_at": time.time()})
    in_progress = keys.cluster_in_progress(identity, "q1")
    conn.rpush(in_progress, raw)
    conn.sadd(keys.IN_PROGRESS_REGISTRY, in_progress)
    conn.hset(keys.cluster_orphan_counts("q1"), jid, config.max_orphanings)
    return jid, raw, in_progress


def _handed(conn, config, in_progress: str) -> list[str]:
    """recover_list.lua's step, as one reaper runs it: the poison pills it hands back to be buried."""
    reply = scripts.evaluate(conn, "recover_list", [in_progress, keys.queue("q1"), keys.cluster_orphan_counts("q1"),
                                                    keys.cluster_isolated("q1")],
                             [config.max_orphanings, ISOLATE_AFTER_RECOVERIES])
    return [raw.decode() for raw in reply[1:]]


def _dead_jids(conn) -> list[str]:
    return [json.loads(member)["jid"] for member in conn.zrange(keys.DEAD, 0, -1)]


def test_the_burials_are_named_in_dead_s_slot():
    assert key_slot(key_layout.CLUSTER_PILL_BURIALS.encode()) == key_slot(keys.DEAD.encode())


def test_a_poison_pill_handed_to_two_reapers_is_buried_once_on_a_cluster(on_cluster):
    conn = on_cluster.cluster_client()
    config = get_config()
    jid, raw, in_progress = _pill(conn, config)
    first, second = ClusterReaper(config, []), ClusterReaper(config, [])
    assert [_handed(conn, config, in_progress) for _ in (first, second)] == [[raw], [raw]]  # both handed it
    for reaper in (first, second):
        reaper._bury(in_progress, stored_payload(raw), CRASHED, "q1")
    assert _dead_jids(conn) == [jid]
    (buried,) = conn.zrange(keys.DEAD, 0, -1)
    assert json.loads(buried)["error_class"] == "djwork.PoisonPill"
    assert conn.llen(in_progress) == 0 and not conn.hexists(keys.cluster_orphan_counts("q1"), jid)


def test_a_burial_cut_short_after_its_filing_is_finished_by_the_next_without_a_second_entry(on_cluster):
    conn = on_cluster.cluster_client()
    config = get_config()
    jid, raw, in_progress = _pill(conn, config)
    reaper = ClusterReaper(config, [])
    assert _handed(conn, config, in_progress) == [raw]
    reaper._bury(in_progress, stored_payload(raw), CRASHED, "q1")
    # A crash between the filing and the drop (lua/drop_copy.lua) leaves the pill filed, still on its list and
    # still counted.
    conn.rpush(in_progress, raw)
    conn.hset(keys.cluster_orphan_counts("q1"), jid, config.max_orphanings + 1)
    assert _handed(conn, config, in_progress) == [raw]
    ClusterReaper(config, [])._bury(in_progress, stored_payload(raw), CRASHED, "q1")
    assert _dead_jids(conn) == [jid] and conn.llen(in_progress) == 0


def test_the_same_job_a_pill_again_on_another_process_is_buried_again(on_cluster):
    # The name is the list and its copy: a job retried by hand that kills its workers again is filed again.
    conn = on_cluster.cluster_client()
    config = get_config()
    jid, raw, in_progress = _pill(conn, config)
    ClusterReaper(config, [])._bury(in_progress, stored_payload(raw), CRASHED, "q1")
    other = keys.cluster_in_progress("host:10:crashed", "q1")
    conn.rpush(other, raw)
    ClusterReaper(config, [])._bury(other, stored_payload(raw), "host:10:crashed", "q1")
    assert _dead_jids(conn) == [jid, jid]
    assert conn.llen(in_progress) == 0 and conn.llen(other) == 0
