"""limiter.concurrent on the private Redis: the limit under threads, the waiting list, lock_timeout, dead processes.

Every assertion is on what Redis recorded (counters the holders raise, the
limiter's own keys and stats), never on how long something took.
"""

from __future__ import annotations

import logging
import threading

import pytest

from djwork.api import Limiter as LimiterStatus
from djwork.limiter import OverLimit, clear_process_identity, concurrent, release_slots_of, set_process_identity
from djwork.redis import keys
from tests.helpers_worker import wait_until


@pytest.fixture(autouse=True)
def own_identity():
    clear_process_identity()
    yield
    clear_process_identity()


def stats(name: str) -> dict[str, int]:
    summary = LimiterStatus(name).summary()
    assert summary is not None
    return {"held": summary.stats.held, "immediate": summary.stats.immediate, "waited": summary.stats.waited,
            "over": summary.stats.over, "overages": summary.stats.overages, "reclaimed": summary.stats.reclaimed,
            "orphaned": summary.stats.orphaned}


def run_threads(count: int, target) -> list[BaseException]:
    errors: list[BaseException] = []

    def guarded(index: int) -> None:
        try:
            target(index)
        except BaseException as error:  # reported by the test
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "a thread is still blocked"
    return errors


def test_concurrent_3_shared_by_20_threads_holds_exactly_3_at_most(raw_redis):
    stripe = concurrent("stripe", 3, wait_timeout=60, lock_timeout=60)
    # The first three in must all be in at once: proves the limit is reached, not only never passed.
    first_three = threading.Barrier(3, timeout=60)
    start = threading.Barrier(20, timeout=30)

    def body(_index: int) -> None:
        start.wait()
        with stripe.within_limit():
            running = raw_redis.incr("test:running")
            raw_redis.rpush("test:seen", running)
            admitted = raw_redis.incr("test:admitted")
            if admitted <= 3:
                if admitted == 3:
                    # The three hold until the other seventeen are on the waiting list: else a thread the
                    # machine ran late found a slot already free and counted "immediate" (9 of 20, beside two
                    # CPU burners). One of them looks: after the first release the list is shorter again.
                    wait_until(lambda: raw_redis.zcard(keys.limiter_waiters("stripe")) == 17, 30,
                               "the seventeen others waiting")
                first_three.wait()
            raw_redis.decr("test:running")

    assert run_threads(20, body) == []
    seen = [int(value) for value in raw_redis.lrange("test:seen", 0, -1)]
    assert len(seen) == 20
    assert max(seen) == 3
    counted = stats("stripe")
    assert counted["held"] == 20
    assert counted["immediate"] == 3 and counted["waited"] == 17
    assert counted["over"] == counted["overages"] == counted["reclaimed"] == 0
    assert raw_redis.zcard(keys.LIMITER_HOLDINGS) == 0
    assert raw_redis.exists(keys.limiter_holders("stripe")) == 0


def test_a_release_grants_the_slot_to_the_oldest_waiter_before_any_newcomer(raw_redis):
    gate = concurrent("gate", 1, wait_timeout=30)
    first = gate.acquire(jid="first")
    acquired: list = []
    waiter = threading.Thread(target=lambda: acquired.append(gate.acquire(jid="waiter")))
    waiter.start()
    wait_until(lambda: raw_redis.zcard(keys.limiter_waiters("gate")) == 1, 10, "the waiter on the waiting list")

    first.release()
    # The release itself handed the slot over: the waiter owns it before it has even woken up...
    owners = [value.decode() for value in raw_redis.hvals(keys.limiter_owners("gate"))]
    assert len(owners) == 1 and owners[0].split("\t")[1] == "waiter"
    assert raw_redis.zcard(keys.limiter_waiters("gate")) == 0
    # ...so a newcomer arriving right after the release finds no free slot.
    with pytest.raises(OverLimit) as refused:
        gate.acquire(wait_timeout=0, jid="newcomer")
    assert refused.value.name == "gate" and refused.value.retry_after > 0

    waiter.join(30)
    assert len(acquired) == 1
    acquired[0].release()
    counted = stats("gate")
    assert (counted["immediate"], counted["waited"], counted["over"], counted["held"]) == (1, 1, 1, 2)


def test_a_waiter_that_gives_up_leaves_the_waiting_list(raw_redis):
    gate = concurrent("gate", 1, wait_timeout=0.3)
    holding = gate.acquire()
    with pytest.raises(OverLimit):
        gate.acquire()
    assert raw_redis.zcard(keys.limiter_waiters("gate")) == 0
    assert raw_redis.hlen(keys.limiter_waiting("gate")) == 0
    holding.release()
    assert stats("gate")["over"] == 1


def test_a_holder_past_lock_timeout_is_reclaimed_and_counted_once_as_an_overage(raw_redis, caplog):
    slow = concurrent("slow", 1, wait_timeout=30, lock_timeout=0.5)
    stuck = slow.acquire(jid="stuck")
    with caplog.at_level(logging.WARNING, logger="djwork.limiter"):
        # Waits until the stuck holder's lease runs out, then takes its slot.
        taker = slow.acquire(jid="taker")
        assert "reclaimed 1 slot(s)" in caplog.text
        counted = stats("slow")
        assert (counted["reclaimed"], counted["overages"]) == (1, 1)
        stuck.release()  # the stuck holder comes back: told, not counted again
        assert "past its lock_timeout" in caplog.text and "it had been reclaimed" in caplog.text
    counted = stats("slow")
    assert (counted["reclaimed"], counted["overages"], counted["held"]) == (1, 1, 0)
    owners = [value.decode() for value in raw_redis.hvals(keys.limiter_owners("slow"))]
    assert [owner.split("\t")[1] for owner in owners] == ["taker"]
    taker.release()
    assert stats("slow")["held"] == 1


def test_a_holder_past_lock_timeout_that_nobody_reclaimed_is_an_overage_at_release(raw_redis, caplog):
    slow = concurrent("slow", 2, lock_timeout=0.2)
    holding = slow.acquire()
    lease_end = raw_redis.zscore(keys.limiter_holders("slow"), holding.token)

    def redis_now() -> float:
        seconds, micros = raw_redis.time()
        return seconds + micros / 1e6

    wait_until(lambda: redis_now() > lease_end, 10, "the lease to run out on Redis's clock")
    with caplog.at_level(logging.WARNING, logger="djwork.limiter"):
        holding.release()
    assert "counted as an overage" in caplog.text
    counted = stats("slow")
    assert (counted["held"], counted["overages"], counted["reclaimed"]) == (1, 1, 0)


def test_release_slots_of_frees_every_slot_of_a_dead_process_and_admits_waiters(raw_redis):
    erp, crm = concurrent("erp", 2, wait_timeout=30), concurrent("crm", 1)
    set_process_identity("deadhost:4242:0badc0de")
    erp.acquire(jid="a")
    erp.acquire(jid="b")
    crm.acquire(jid="c")
    set_process_identity("livehost:7:00ff00ff")
    kept = concurrent("other", 1).acquire(jid="live")
    acquired: list = []
    waiter = threading.Thread(target=lambda: acquired.append(erp.acquire(jid="waiting")))
    waiter.start()
    wait_until(lambda: raw_redis.zcard(keys.limiter_waiters("erp")) == 1, 10, "the waiter on erp's waiting list")

    assert release_slots_of("deadhost:4242:0badc0de") == 3
    index = [entry.decode() for entry in raw_redis.zrange(keys.LIMITER_HOLDINGS, 0, -1)]
    assert all(entry.startswith("livehost:7:00ff00ff\t") for entry in index)
    assert sorted(entry.split("\t")[1] for entry in index) == ["erp", "other"]  # the granted waiter, the live slot
    waiter.join(30)
    assert len(acquired) == 1
    assert stats("erp")["orphaned"] == 2 and stats("crm")["orphaned"] == 1
    assert raw_redis.zcard(keys.limiter_holders("crm")) == 0
    # Twice is harmless: nothing of the dead process is left to free.
    assert release_slots_of("deadhost:4242:0badc0de") == 0
    acquired[0].release()
    kept.release()
    assert raw_redis.zcard(keys.LIMITER_HOLDINGS) == 0


def test_an_acquisition_sent_twice_holds_one_slot(raw_redis):
    # The replay policy re-sends an acquisition whose reply was lost: the token makes that safe.
    gate = concurrent("gate", 5)
    first = gate._acquire_call("token-1", 0.0, "host:1:aa", "")
    again = gate._acquire_call("token-1", 0.0, "host:1:aa", "")
    assert int(first[0]) == int(again[0]) == 1 and first[3] == again[3]
    assert raw_redis.zcard(keys.limiter_holders("gate")) == 1
    assert stats("gate")["immediate"] == 1


def test_the_index_names_the_holding_process_and_the_script_takes_its_keys(raw_redis):
    set_process_identity("host:1:abc")
    holding = concurrent("idx", 1).acquire(jid="j1")
    assert raw_redis.zrange(keys.LIMITER_HOLDINGS, 0, -1) == [f"host:1:abc\tidx\t{holding.token}".encode()]
    owner = raw_redis.hget(keys.limiter_owners("idx"), holding.token).decode().split("\t")
    assert owner[:2] == ["host:1:abc", "j1"]
    holding.release()
    holding.release()  # a second release is a no-op, not a second count
    assert stats("idx")["held"] == 1
    assert raw_redis.exists(keys.limiter_holders("idx"), keys.limiter_owners("idx")) == 0


def test_holders_taken_for_dead_that_ran_on_count_one_overage_each_and_warn(raw_redis, caplog):
    # concurrent(3) wholly held by a process that stalls past lock_timeout (SIGSTOP): the reaper frees its
    # slots, three new holders come in, and the stalled ones come back and release beside them.
    three = concurrent("stall", 3, lock_timeout=0.2)
    set_process_identity("stalled:1:aa")
    stalled = [three.acquire(jid=f"old-{index}") for index in range(3)]
    lease_end = max(raw_redis.zscore(keys.limiter_holders("stall"), slot.token) for slot in stalled)
    wait_until(lambda: float(".".join(str(part) for part in raw_redis.time())) > lease_end, 10,
               "the leases to run out on Redis's clock")
    assert release_slots_of("stalled:1:aa") == 3
    set_process_identity("live:2:bb")
    # The new holders' leases are long: with 0.2 s, a loaded machine let them lapse before their release,
    # and the stalled ones' releases swept them as lost (a fourth overage).
    fresh = [concurrent("stall", 3, lock_timeout=60).acquire(jid=f"new-{index}") for index in range(3)]
    assert stats("stall")["overages"] == 0  # freed as orphaned: nobody knows yet that they ran on
    with caplog.at_level(logging.WARNING, logger="djwork.limiter"):
        for slot in stalled:
            slot.release()
    assert stats("stall")["overages"] == 3 and stats("stall")["orphaned"] == 3
    warnings = [record for record in caplog.records if "freed under its holder" in record.getMessage()]
    assert len(warnings) == 3 and all(record.levelno == logging.WARNING for record in warnings)
    assert "the limit of 3 was exceeded" in warnings[0].getMessage()
    for slot in fresh:
        slot.release()
    assert stats("stall")["overages"] == 3 and raw_redis.zcard(keys.limiter_lost("stall")) == 0


def test_a_replayed_release_of_a_freed_slot_counts_its_overage_once(raw_redis):
    gate = concurrent("gate", 1)
    set_process_identity("stalled:1:aa")
    holding = gate.acquire(jid="old")
    release_slots_of("stalled:1:aa")
    holding.release()
    gate._release(holding)  # the replay policy re-sends a release whose reply was lost
    assert stats("gate")["overages"] == 1


def test_a_reset_under_a_running_holder_is_an_overage_at_its_release(raw_redis):
    gate = concurrent("gate", 1)
    holding = gate.acquire(jid="running")
    LimiterStatus("gate").reset()
    gate.acquire(jid="after-reset").release()
    holding.release()
    assert stats("gate")["overages"] == 1
