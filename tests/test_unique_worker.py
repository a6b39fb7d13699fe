"""Unique and expiring jobs against real workers: the lock is released by every exit of its job.

After each exit the test checks that no ``unique:*`` key is left and that a
new copy of the job is accepted. The releases ride on the worker's own Lua
steps (fetch.lua's ack, fail.lua's filing), so each test waits for the event
that carries them, never for time to pass.
"""

from __future__ import annotations

import datetime as dt
import json

from djwork import api, keys, scripts
from tests import unique_jobs
from tests.faultproxy import FaultProxy
from tests.helpers_worker import counts, in_progress_items, wait_beats, wait_until


def unique_keys(raw_redis) -> dict[str, str]:
    # A lock released between SCAN naming it and GET reading it is gone, not an error (it read None once).
    found = {key: raw_redis.get(key) for key in raw_redis.scan_iter("unique:*", count=1000)}
    return {key.decode(): value.decode() for key, value in found.items() if value is not None}


def no_lock_left(raw_redis, why: str, timeout: float = 20) -> None:
    wait_until(lambda: not unique_keys(raw_redis), timeout, f"no unique:* key left after {why}")


def accepted_again(job, *args) -> None:
    ref = job.delay(*args)
    assert ref.enqueued, f"a new copy was refused as a duplicate of {ref.duplicate_of}"


def test_success_releases_the_lock_and_the_next_copy_is_accepted(workers, raw_redis):
    refs = [unique_jobs.sync_account.delay(42) for _ in range(3)]
    assert [ref.enqueued for ref in refs] == [True, False, False]
    workers.start("-c", "2")
    wait_until(lambda: counts(raw_redis).get("sync-42") == 1, 20, "the job to run")
    no_lock_left(raw_redis, "a success")
    accepted_again(unique_jobs.sync_account, 42)
    wait_until(lambda: counts(raw_redis).get("sync-42") == 2, 20, "the second copy to run")
    no_lock_left(raw_redis, "the second success")


def test_dead_releases_the_lock(workers, raw_redis):
    ref = unique_jobs.fails.delay("d")
    workers.start("-c", "2")
    wait_until(lambda: raw_redis.zcard(keys.DEAD) == 1, 20, "the job in dead")
    # fail.lua files and releases in one step: once it is dead, the lock is gone.
    assert not unique_keys(raw_redis)
    assert json.loads(raw_redis.zrange(keys.DEAD, 0, 0)[0])["jid"] == ref.jid
    accepted_again(unique_jobs.fails, "d")


def test_an_expired_job_never_runs_its_history_says_expired_and_its_lock_is_released(workers, raw_redis):
    past = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    ref = unique_jobs.sync_account.apply_async((7,), expires=past)
    assert ref.enqueued
    workers.start("-c", "2")
    runs = wait_until(lambda: api.History.recent(status="expired").runs, 20, "the expiry in the history")
    assert [(run.jid, run.klass) for run in runs] == [(ref.jid, "tests.unique_jobs.sync_account")]
    assert "sync-7" not in counts(raw_redis)  # dropped before the body: the history row proves it was handled
    assert not [run for run in api.History.recent().runs if run.status != "expired"]
    no_lock_left(raw_redis, "an expiry drop (the ack releases it)")
    accepted_again(unique_jobs.sync_account, 7)
    wait_until(lambda: counts(raw_redis).get("sync-7") == 1, 20, "the copy that has not expired")


def test_unique_until_start_accepts_a_duplicate_while_the_first_runs(workers, raw_redis):
    raw_redis.set(unique_jobs.hold_key("s"), 1)
    first = unique_jobs.held_until_start.delay("s")
    assert unique_jobs.held_until_start.delay("s").duplicate_of == first.jid  # queued: still locked
    workers.start("-c", "2")
    wait_until(lambda: raw_redis.hget("t:starts", "s") == b"1", 20, "the first to start")
    no_lock_left(raw_redis, "the start", timeout=10)
    second = unique_jobs.held_until_start.delay("s")
    assert second.enqueued and "s" not in counts(raw_redis)  # the first still runs
    raw_redis.delete(unique_jobs.hold_key("s"))
    wait_until(lambda: counts(raw_redis).get("s") == 2, 20, "both to finish")
    no_lock_left(raw_redis, "both runs")


def test_unique_until_success_refuses_a_duplicate_while_the_first_runs(workers, raw_redis):
    raw_redis.set(unique_jobs.hold_key("r"), 1)
    first = unique_jobs.held.delay("r")
    workers.start("-c", "2")
    wait_until(lambda: raw_redis.hget("t:starts", "r") == b"1", 20, "the job to start")
    # A release at start would have come before the body ran: the lock must still be there.
    assert unique_jobs.held.delay("r").duplicate_of == first.jid
    raw_redis.delete(unique_jobs.hold_key("r"))
    no_lock_left(raw_redis, "the success")
    assert counts(raw_redis) == {"r": 1}


def test_kill_9_then_recovery_keeps_the_lock_with_the_job_until_its_successful_run(workers, raw_redis):
    raw_redis.set(unique_jobs.hold_key("k9"), 1)
    ref = unique_jobs.held.delay("k9")
    first = workers.start("-c", "2")
    wait_until(lambda: raw_redis.hget("t:starts", "k9") == b"1", 20, "the job to start")
    first.kill()  # SIGKILL: nothing acked, nothing released
    (lock,) = unique_keys(raw_redis)
    workers.start("-c", "2")
    wait_until(lambda: raw_redis.hget("t:starts", "k9") == b"2", 30, "orphan recovery to run the job again")
    # Recovered with its payload, the job still owns its lock: no copy can be queued beside it.
    assert unique_keys(raw_redis) == {lock: ref.jid}
    assert unique_jobs.held.delay("k9").duplicate_of == ref.jid
    raw_redis.delete(unique_jobs.hold_key("k9"))
    wait_until(lambda: counts(raw_redis).get("k9") == 1, 20, "the recovered run to finish")
    no_lock_left(raw_redis, "the recovered run's success")
    accepted_again(unique_jobs.held, "k9")


def test_a_cut_reply_of_the_fetch_carrying_the_release_loses_no_release_and_makes_none_twice(
        workers, raw_redis, redis_url):
    raw_redis.set(unique_jobs.hold_key("a"), 1)
    first = unique_jobs.held.delay("a")
    with FaultProxy.in_front_of(redis_url) as proxy:
        # One slot: while the job runs the dispatcher has nothing to fetch for, so the next
        # fetch is the one that carries this job's ack (and with it the lock's release).
        worker = workers.start("-c", "1", overrides={"REDIS_URL": proxy.url})
        wait_until(lambda: raw_redis.hget("t:starts", "a") == b"1", 20, "the job to start")
        fired = proxy.drop_next("EVALSHA", argument=scripts.sha("fetch"))
        raw_redis.delete(unique_jobs.hold_key("a"))
        assert fired.wait(20), "no fetch carried the ack"
        worker.wait_log("fetch failed; reconciling", 20)
        # The cut fetch ran: the lock went with the ack.
        no_lock_left(raw_redis, "the fetch whose reply was cut", timeout=10)
        # A new holder of the same lock must survive whatever the reconcile sends again.
        raw_redis.set(unique_jobs.hold_key("a"), 1)
        second = unique_jobs.held.delay("a")
        assert second.enqueued
        wait_until(lambda: raw_redis.hget("t:starts", "a") == b"2", 20, "the second copy to start")
        wait_beats(raw_redis, worker.identity(raw_redis), 2)
        assert list(unique_keys(raw_redis).values()) == [second.jid]
        raw_redis.delete(unique_jobs.hold_key("a"))
        wait_until(lambda: counts(raw_redis).get("a") == 2, 20, "the second copy to finish")
        no_lock_left(raw_redis, "the second success")
        wait_until(lambda: not any(in_progress_items(raw_redis).values()), 20, "every ack")
    assert first.jid != second.jid


def test_20000_unique_jobs_drained_leave_no_lock(workers, raw_redis):
    total = 20_000
    for start in range(0, total, 2_000):
        refs = unique_jobs.noop.delay_many([(index,) for index in range(start, start + 2_000)])
        assert all(ref.enqueued for ref in refs)
    assert raw_redis.llen(keys.queue("default")) == total
    workers.start("-c", "10")
    wait_until(lambda: int(raw_redis.get("t:runs") or 0) >= total, 120, "every job to run", interval=0.5)
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 20, "every ack")
    no_lock_left(raw_redis, "the drain (no reaper involved)")
    assert int(raw_redis.get("t:runs")) == total
