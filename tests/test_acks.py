"""AckBuffer (djwork/worker/acks.py): the reconcile rules after a lost reply, as a pure decision.

The fault-proxy tests (test_worker_takers, test_worker_backlog) show a worker
recovering from a lost reply end to end; these pin each rule of the decision
itself, including the cases that are hard to time through a real process.
"""

from __future__ import annotations

import collections

from djwork.worker.acks import AckBuffer
from djwork.worker.fetch import Ack, UnitOfWork


def settle(held, running=(), sent=(), pending=()):
    buffer = AckBuffer(reliable=True)
    buffer.pending = list(pending)
    buffer.needs_reconcile = True
    adopted = buffer.settle_lost_round_trip(held, collections.Counter(running), list(sent))
    return buffer, adopted


def test_what_runs_here_is_ours_and_the_rest_was_moved_by_the_lost_fetch():
    buffer, adopted = settle({1: ["a", "moved"], 2: ["other-moved"]}, running=["a"])
    assert sorted(adopted) == [(1, "moved"), (2, "other-moved")]
    assert buffer.pending == [] and not buffer.needs_reconcile


def test_an_ack_the_lost_fetch_did_not_apply_is_sent_again_first():
    already_buffered = Ack(2, "z", "jid-z")
    not_applied, applied = Ack(1, "b", "jid-b"), Ack(1, "gone", "jid-gone")
    buffer, adopted = settle({1: ["b"], 2: ["z"]}, sent=[not_applied, applied], pending=[already_buffered])
    # b is still on the list: its ack did not land, and it is not a job to adopt.
    assert adopted == []
    assert buffer.pending == [not_applied, already_buffered]


def test_a_job_that_finished_after_the_read_is_not_adopted():
    # On the list when it was read, finished since: no longer running, its ack
    # buffered after the read. Adopting it would run it a second time.
    late = Ack(1, "finished-late", "jid-late")
    buffer, adopted = settle({1: ["finished-late"]}, running=[], pending=[late])
    assert adopted == []
    assert buffer.pending == [late]


def test_identical_payloads_are_counted_not_merged():
    buffer, adopted = settle({1: ["same", "same", "same"]}, running=["same"], sent=[Ack(1, "same", "")])
    assert adopted == [(1, "same")]
    assert buffer.pending == [Ack(1, "same", "")]


def test_an_abandoned_buffer_takes_no_more_acks():
    buffer = AckBuffer(reliable=True)
    unit = UnitOfWork("default", 1, "raw", "inprogress")
    unit.acknowledge("jid")
    buffer.add(unit)
    buffer.abandoned = True
    buffer.add(unit)
    assert buffer.take() == [Ack(1, "raw", "jid")]
    assert buffer.take() == []


def test_basic_fetch_buffers_only_acks_with_a_jid_to_retire():
    # No in-progress list to remove from; only the orphan counter of a job with a jid.
    buffer = AckBuffer(reliable=False)
    anonymous, named = UnitOfWork("q", 1, "a", None), UnitOfWork("q", 1, "b", None)
    anonymous.acknowledge("")
    named.acknowledge("jid-b")
    buffer.add(anonymous)
    buffer.add(named)
    assert buffer.take() == [Ack(1, "b", "jid-b")]
