"""Canvases on a real Redis Cluster (docs/cluster.md, Batches; canvas.md): chains, groups, chords, nested.

Each plan's batch is written in its own slot, then the first jobs (djwork/canvas/cluster_plan.py); a step's end
counts it in its batch's slot and pushes what follows once (djwork/batches/cluster_accounting.py).
"""

from __future__ import annotations

import pytest

import djwork
from djwork.batches import cluster_accounting
from djwork.redis import keys
from tests import cluster_jobs
from tests.helpers_worker import wait_until

QUEUE_ARGS = [argument for index in range(6) for argument in ("-q", f"q{index}")]


def _spread(signature, index: int):
    return signature.set(queue=f"q{index % 6}")


def test_a_chain_a_group_and_a_chord_run_on_a_cluster(on_cluster, workers):
    conn = on_cluster.cluster_client()
    chain = djwork.chain(_spread(cluster_jobs.add.s(1, 2), 0), _spread(cluster_jobs.add.s(3), 1),
                         _spread(cluster_jobs.add.s(4), 2)).apply_async()
    group = djwork.group(_spread(cluster_jobs.add.s(index, 10), index) for index in range(6)).apply_async()
    chord = djwork.chord([_spread(cluster_jobs.add.s(index, index), index) for index in range(5)],
                         _spread(cluster_jobs.total.s(), 3)).apply_async()
    worker = workers.start("-c", "4", *QUEUE_ARGS, redis_url=on_cluster.url())
    assert chain.get(timeout=60) == 10
    assert group.get(timeout=60) == [index + 10 for index in range(6)]
    assert chord.get(timeout=60) == sum(index * 2 for index in range(5))
    assert "CROSSSLOT" not in worker.log()
    assert not any(conn.llen(keys.queue(f"q{index}")) for index in range(6))


def test_a_group_of_chains_hands_each_chain_s_last_value_to_the_chord_body(on_cluster, workers):
    chains = [djwork.chain(_spread(cluster_jobs.add.s(index, 1), index), _spread(cluster_jobs.add.s(100), index + 1))
              for index in range(4)]
    chord = djwork.chord(chains, _spread(cluster_jobs.total.s(), 5)).apply_async()
    worker = workers.start("-c", "4", *QUEUE_ARGS, redis_url=on_cluster.url())
    assert chord.get(timeout=60) == sum(index + 101 for index in range(4))
    assert "CROSSSLOT" not in worker.log()


def test_a_chord_whose_header_member_dies_calls_its_errback_once_with_that_task_s_id(on_cluster, workers):
    conn = on_cluster.cluster_client()
    doomed = _spread(cluster_jobs.refuse.s("no"), 1)
    chord = djwork.chord([_spread(cluster_jobs.add.s(1, 1), 0), doomed, _spread(cluster_jobs.add.s(2, 2), 2)],
                         _spread(cluster_jobs.total.s(), 3))
    ref = chord.apply_async(link_error=_spread(cluster_jobs.errback.s(), 4))
    worker = workers.start("-c", "3", *QUEUE_ARGS, redis_url=on_cluster.url())
    wait_until(lambda: conn.llen(cluster_jobs.FAILED_IDS) == 1, 60, "the errback")
    failed = conn.lindex(cluster_jobs.FAILED_IDS, 0).decode()
    assert failed == ref.header.jids[1]
    assert conn.zcard(keys.DEAD) == 1 and failed.encode() in conn.zrange(keys.DEAD, 0, -1)[0]
    wait_until(lambda: not any(conn.llen(keys.queue(f"q{index}")) for index in range(6)), 30, "the queues drained")
    assert conn.llen(cluster_jobs.FAILED_IDS) == 1  # once
    assert "CROSSSLOT" not in worker.log()


def test_a_group_of_chains_whose_step_dies_names_that_task_to_the_chord_s_errback(on_cluster, workers):
    conn = on_cluster.cluster_client()
    chains = [djwork.chain(_spread(cluster_jobs.add.s(1, 1), 0), _spread(cluster_jobs.add.s(1), 1)),
              djwork.chain(_spread(cluster_jobs.add.s(2, 2), 2), _spread(cluster_jobs.refuse.si("no"), 3))]
    ref = djwork.chord(chains, _spread(cluster_jobs.total.s(), 5)).apply_async(
        link_error=_spread(cluster_jobs.errback.s(), 4))
    worker = workers.start("-c", "3", *QUEUE_ARGS, redis_url=on_cluster.url())
    wait_until(lambda: conn.llen(cluster_jobs.FAILED_IDS) == 1, 60, "the errback")
    failed = conn.lindex(cluster_jobs.FAILED_IDS, 0).decode()
    assert not failed.startswith("b-")  # the task inside the nested chain, followed across slots
    assert failed.encode() in conn.zrange(keys.DEAD, 0, -1)[0]
    assert ref.id  # the chord's body never ran: its header failed
    assert "CROSSSLOT" not in worker.log()


@pytest.mark.parametrize(("shape", "expected"), [("chain", 3 + 10 + 100 + 4), ("group", [4, 5])])
def test_a_chain_step_that_replaces_itself_gives_the_chain_s_final_value(on_cluster, workers, shape, expected):
    conn = on_cluster.cluster_client()
    last = _spread(cluster_jobs.add.s(4), 1) if shape == "chain" else _spread(cluster_jobs.total.s(), 1)
    ref = djwork.chain(_spread(cluster_jobs.add.s(1, 2), 0), _spread(cluster_jobs.replaces_with.s(shape), 5),
                       last).apply_async()
    worker = workers.start("-c", "3", *QUEUE_ARGS, redis_url=on_cluster.url())
    assert ref.get(timeout=60) == (expected if shape == "chain" else sum(expected))
    assert "CROSSSLOT" not in worker.log()
    assert not conn.zcard(keys.DEAD)


def test_a_chord_member_that_replaces_itself_completes_the_chord_once(on_cluster, workers):
    conn = on_cluster.cluster_client()
    chord = djwork.chord([_spread(cluster_jobs.add.s(1, 1), 0), _spread(cluster_jobs.replaces.s(5), 1),
                          _spread(cluster_jobs.add.s(2, 2), 2)], _spread(cluster_jobs.counted_total.s(), 3))
    ref = chord.apply_async()
    worker = workers.start("-c", "3", *QUEUE_ARGS, redis_url=on_cluster.url())
    assert ref.get(timeout=60) == 2 + 6 + 4  # the replaced member's value is its replacement's: add(5, 1)
    wait_until(lambda: not any(conn.llen(keys.queue(f"q{index}")) for index in range(6)), 30, "the queues drained")
    assert conn.hget(cluster_jobs.COUNTS, "counted_total") == b"1"
    assert "CROSSSLOT" not in worker.log()


def test_add_to_chord_adds_a_member_whose_value_reaches_the_body(on_cluster, workers):
    chord = djwork.chord([_spread(cluster_jobs.adds_to_chord.s(7), 0), _spread(cluster_jobs.add.s(2, 2), 1)],
                         _spread(cluster_jobs.total.s(), 2))
    ref = chord.apply_async()
    worker = workers.start("-c", "3", *QUEUE_ARGS, redis_url=on_cluster.url())
    assert ref.get(timeout=60) == 7 + 4 + 1007
    assert "CROSSSLOT" not in worker.log()


def test_a_chord_fed_by_a_generator_gives_its_body_every_member_s_value(on_cluster, workers):
    conn = on_cluster.cluster_client()
    members = (_spread(cluster_jobs.add.s(index, index), index) for index in range(5))
    ref = djwork.chord(members, _spread(cluster_jobs.counted_total.s(), 5)).apply_async()
    worker = workers.start("-c", "3", *QUEUE_ARGS, redis_url=on_cluster.url())
    assert ref.get(timeout=60) == sum(index * 2 for index in range(5))
    wait_until(lambda: not any(conn.llen(keys.queue(f"q{index}")) for index in range(6)), 30, "the queues drained")
    assert conn.hget(cluster_jobs.COUNTS, "counted_total") == b"1"
    assert "CROSSSLOT" not in worker.log()


def test_a_join_cut_before_its_pushes_loses_nothing_and_pushes_each_job_once(on_cluster, workers, monkeypatch):
    conn = on_cluster.cluster_client()
    cut = []
    # The client dies after each later member's join (its first job kept pending in the header's hash) and
    # before that job's push: the step that pushes it is skipped.
    monkeypatch.setattr(cluster_accounting, "settle_now", lambda _conn, bid: cut.append(bid))
    members = (_spread(cluster_jobs.add.s(index, index), index) for index in range(5))
    ref = djwork.chord(members, _spread(cluster_jobs.counted_total.s(), 5)).apply_async()
    assert cut == [ref.header.bid] * 4
    queued = lambda: sum(conn.llen(keys.queue(f"q{index}")) for index in range(6))  # noqa: E731
    assert queued() == 5  # the first member's own push, and the four pushed by the header's next end (the hold's)
    assert cluster_accounting.sweep(conn, older_than=0) == 0  # the leader's pass finds nothing left, pushes nothing
    assert queued() == 5
    worker = workers.start("-c", "3", *QUEUE_ARGS, redis_url=on_cluster.url())
    assert ref.get(timeout=60) == sum(index * 2 for index in range(5))
    wait_until(lambda: not queued(), 30, "the queues drained")
    assert conn.hget(cluster_jobs.COUNTS, "counted_total") == b"1"
    assert "CROSSSLOT" not in worker.log()
