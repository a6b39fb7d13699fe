"""The two key layouts of djwork/redis/keys.py: one server's names, a cluster's companions in their queue's slot."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from djwork.redis import key_layout, keys


@pytest.mark.parametrize("queue", ["default", "mail.high", "a:b", "x|y"])
def test_a_cluster_queues_companions_hash_to_the_queues_slot(queue):
    layout = key_layout.layout(cluster=True)
    slot = key_slot(keys.queue(queue).encode())
    for key in (layout.in_progress("host:1:abc", queue), layout.isolated(queue), layout.orphan_counts(queue),
                layout.finished_late(queue), keys.pushed(queue)):
        assert key_slot(key.encode()) == slot, key
    assert key_slot(layout.dead_bytes.encode()) == key_slot(keys.DEAD.encode())


def test_one_servers_layout_keeps_its_names():
    layout = key_layout.layout(cluster=False)
    assert layout.in_progress("host:1:abc", "default") == "djwork:inprogress:host:1:abc|default"
    assert layout.isolated("default") == "djwork:isolated:default"
    assert layout.orphan_counts("default") == keys.ORPHAN_COUNTS == "djwork:orphan-counts"
    assert layout.finished_late("default") == keys.FINISHED_LATE
    assert layout.dead_bytes == keys.DEAD_BYTES


@pytest.mark.parametrize("cluster", [False, True])
def test_an_in_progress_list_names_its_process_and_queue_in_both_layouts(cluster):
    key = key_layout.layout(cluster).in_progress("host:1:abc", "mail")
    assert keys.parse_in_progress(key) == ("host:1:abc", "mail")
