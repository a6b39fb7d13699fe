"""A fetch takes its batch in one step, and a refill's fetch is sent ahead and read when its jobs are needed.

fetch.lua moves a batch with LRANGE + LPUSH + LTRIM (not one LMOVE per job):
the jobs must come out oldest first and sit on the in-progress list exactly
as LMOVE would have put them, and a push refused by a key of the wrong type
must leave the queue whole. Dispatcher.refill sends the next fetch while jobs
still wait; whoever needs the jobs first reads its reply (a processor, or the
dispatcher once the reply has waited past the escalation period).
"""

from __future__ import annotations

import json
import threading

import pytest

from djwork.redis import keys
from djwork.settings.conf import Capsule
from djwork.worker.acks import AckBuffer
from djwork.worker.dispatcher import Dispatcher
from djwork.worker.fetch import Ack, Fetcher, UnitOfWork
from djwork.worker.handoff import HandOff
from djwork.worker.slots import Slots
from djwork.worker.takers import Takers
from tests.helpers_worker import wait_until

IDENTITY = "host:1:batch"
IN_PROGRESS = keys.in_progress(IDENTITY, "default")


def _job(jid: str) -> bytes:
    return json.dumps({"class": "tests.worker_jobs.record", "args": [jid], "jid": jid, "queue": "default",
                       "retry": True, "created_at": 1.0, "enqueued_at": 1.0}).encode()


def _jids(units: list[UnitOfWork]) -> list[str]:
    return [json.loads(unit.raw)["jid"] for unit in units]


def _fetcher(reliable: bool = True, concurrency: int = 10) -> Fetcher:
    return Fetcher(IDENTITY, Capsule("default", concurrency, (("default", 0),)), reliable)


@pytest.fixture
def fetchers():
    made: list[Fetcher] = []

    def make(reliable: bool = True, concurrency: int = 10) -> Fetcher:
        made.append(_fetcher(reliable, concurrency))
        return made[-1]

    yield make
    for fetcher in made:
        fetcher.close()


def _enqueue(raw_redis, count: int) -> None:
    # LPUSH, as a client enqueues: job-0 is the oldest, at the tail the fetch takes from.
    for index in range(count):
        raw_redis.lpush(keys.queue("default"), _job(f"job-{index}"))


def test_a_batch_comes_out_oldest_first_and_lies_on_the_in_progress_list_as_lmove_would_put_it(
        raw_redis, fetchers):
    _enqueue(raw_redis, 7)
    units = fetchers().fetch(5, [])
    assert _jids(units) == [f"job-{index}" for index in range(5)]
    # LMOVE RIGHT LEFT, one job at a time, leaves the newest taken at the head.
    assert [json.loads(raw)["jid"] for raw in raw_redis.lrange(IN_PROGRESS, 0, -1)] == [
        f"job-{index}" for index in (4, 3, 2, 1, 0)]
    assert [json.loads(raw)["jid"] for raw in raw_redis.lrange(keys.queue("default"), 0, -1)] == ["job-6", "job-5"]


def test_a_batch_larger_than_the_queue_takes_what_there_is(raw_redis, fetchers):
    _enqueue(raw_redis, 3)
    units = fetchers().fetch(10, [])
    assert _jids(units) == ["job-0", "job-1", "job-2"]
    assert raw_redis.exists(keys.queue("default")) == 0
    assert raw_redis.llen(IN_PROGRESS) == 3


def test_basic_fetch_pops_a_batch_oldest_first_and_keeps_no_in_progress_list(raw_redis, fetchers):
    _enqueue(raw_redis, 4)
    units = fetchers(reliable=False).fetch(3, [])
    assert _jids(units) == ["job-0", "job-1", "job-2"]
    assert raw_redis.exists(IN_PROGRESS) == 0
    assert raw_redis.llen(keys.queue("default")) == 1


def test_a_wrong_type_in_progress_key_refuses_the_batch_and_leaves_the_queue_whole(raw_redis, fetchers, caplog):
    _enqueue(raw_redis, 4)
    raw_redis.set(IN_PROGRESS, "not a list")
    fetcher = fetchers()
    reported: list[str] = []
    fetcher.on_broken_key = lambda key, error: reported.append(key) or False
    assert fetcher.fetch(4, []) == []
    assert reported == [IN_PROGRESS]
    assert raw_redis.llen(keys.queue("default")) == 4
    assert raw_redis.get(IN_PROGRESS) == b"not a list"


def test_an_ack_retires_a_recovered_jobs_orphan_count_and_no_other(raw_redis, fetchers):
    _enqueue(raw_redis, 2)
    fetcher = fetchers()
    first, second = fetcher.fetch(2, [])
    raw_redis.hset(keys.ORPHAN_COUNTS, mapping={"job-0": 1, "someone-else": 2})
    fetcher.fetch(0, [Ack(first.queue_index, first.raw, "job-0"), Ack(second.queue_index, second.raw, "job-1")])
    assert raw_redis.hgetall(keys.ORPHAN_COUNTS) == {b"someone-else": b"2"}
    assert raw_redis.exists(IN_PROGRESS) == 0


def test_acks_remove_one_copy_each_even_of_identical_payloads(raw_redis, fetchers):
    raw_redis.lpush(keys.queue("default"), _job("twin"), _job("twin"), _job("other"))
    fetcher = fetchers()
    units = fetcher.fetch(3, [])
    twin = next(unit for unit in units if json.loads(unit.raw)["jid"] == "twin")
    fetcher.fetch(0, [Ack(twin.queue_index, twin.raw, "twin")])
    assert sorted(json.loads(raw)["jid"] for raw in raw_redis.lrange(IN_PROGRESS, 0, -1)) == ["other", "twin"]


# --- a refill's fetch, sent ahead -------------------------------------------------------------
class _Capsule:
    """The dispatcher's parts as a Manager wires them, with no processor threads: the test plays them."""

    def __init__(self, fetcher: Fetcher, concurrency: int) -> None:
        self.slots = Slots(concurrency)
        self.acks = AckBuffer(True)
        self.work: HandOff[UnitOfWork] = HandOff(concurrency, 1, 0.003)
        arrived = threading.Event()
        self.takers = Takers(fetcher, self.slots, self.acks, self.work.put, arrived.set, 1.0, 1.0)
        self.dispatcher = Dispatcher("default", fetcher, self.slots, self.acks, self.takers, self.work, arrived, 1.0)

    def running(self, units: list[UnitOfWork]) -> None:
        """A batch fetched and handed out, with more waiting on the queue: the backlog the refill serves."""
        with self.slots.condition:
            self.slots.hold(len(units))
            self.dispatcher.backlog = True
        self.dispatcher._hand_out(units, held=len(units))
        self.dispatcher.backlog = True

    def finish(self, unit: UnitOfWork) -> None:
        with self.slots.condition:
            unit.acknowledge(json.loads(unit.raw)["jid"])
            self.acks.add(unit)
            self.slots.finish(unit)

    def stop(self) -> None:
        with self.slots.condition:
            self.slots.stopping = True
            self.slots.condition.notify_all()
        self.dispatcher.wake()
        self.dispatcher.join(5)
        self.work.close()


def _refill_sent(raw_redis, fetchers) -> tuple[_Capsule, Fetcher, UnitOfWork]:
    """Three slots running job-0..2 from a queue of 8; job-0 finished and the refill sent with two still waiting."""
    _enqueue(raw_redis, 8)
    fetcher = fetchers(concurrency=3)
    capsule = _Capsule(fetcher, 3)
    capsule.running(fetcher.fetch(3, []))
    first = capsule.work.get()
    capsule.finish(first)
    capsule.dispatcher.refill()
    assert capsule.dispatcher.sent is not None and capsule.dispatcher.fetching
    return capsule, fetcher, first


def test_a_refill_with_a_job_still_waiting_sends_now_and_the_processor_that_runs_dry_reads_it(
        raw_redis, fetchers):
    capsule, _fetcher, first = _refill_sent(raw_redis, fetchers)
    # The ack rode on the sent fetch: it is off the in-progress list already.
    assert first.raw not in raw_redis.lrange(IN_PROGRESS, 0, -1)
    second, third = capsule.work.get(), capsule.work.get()
    capsule.finish(second)
    capsule.dispatcher.refill()  # nothing waits now: the reply is read and its one job handed out
    assert capsule.dispatcher.sent is None and not capsule.dispatcher.fetching
    assert capsule.work.waiting() == 1
    assert _jids([capsule.work.get()]) == ["job-3"]
    capsule.finish(third)
    capsule.stop()


def test_a_sent_refill_nobody_reads_is_read_by_the_dispatcher(raw_redis, fetchers):
    # The processor that sent it took another job (a long one, say) and no other finishes: the
    # fetched jobs would sit in held slots. The dispatcher reads the reply after the escalation period.
    capsule, _fetcher, _first = _refill_sent(raw_redis, fetchers)
    capsule.work.get()
    capsule.work.get()  # every processor is busy from here on
    capsule.dispatcher.start()
    try:
        wait_until(lambda: capsule.work.waiting() == 1, 10, "the dispatcher to read the sent fetch")
        assert capsule.dispatcher.sent is None
        assert _jids([capsule.work.get()]) == ["job-3"]
    finally:
        capsule.stop()


def test_stopping_reads_a_sent_refill_so_its_jobs_are_counted_and_requeued(raw_redis, fetchers):
    capsule, fetcher, _first = _refill_sent(raw_redis, fetchers)
    capsule.dispatcher.start()
    capsule.stop()
    assert capsule.dispatcher.sent is None
    with capsule.slots.condition:
        assert sum(capsule.slots.running.values()) == 3  # two left of the first batch, one from the refill
    assert fetcher.requeue(capsule.acks.take()) == 3
    assert raw_redis.llen(keys.queue("default")) == 8 - 1
