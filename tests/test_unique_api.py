"""djwork.api and unique jobs: Delete and Kill release the job's lock in the same step; the UniqueLocks read model.

No worker here: jobs are put where a worker would leave them (a queue, the
schedule, the retry set, an in-progress list) with their payloads unchanged.
"""

from __future__ import annotations

import json

import pytest

from djwork import api
from djwork.redis import keys
from tests import unique_jobs

IDENTITY = "host:1:unique-api"


def unique_keys(raw_redis) -> dict[str, str]:
    return {key.decode(): raw_redis.get(key).decode() for key in raw_redis.scan_iter("unique:*", count=1000)}


def lock_of(raw_redis, jid: str) -> str:
    (lock,) = [key for key, owner in unique_keys(raw_redis).items() if owner == jid]
    return lock


def digest_of(lock: str) -> str:
    return lock[len("unique:"):]


def scheduled_entry(raw_redis, jid: str) -> api.SortedEntry:
    entry = api.ScheduledSet().find_job(jid)
    assert entry is not None
    return entry


def as_retry(raw_redis, jid: str) -> None:
    """Move a queued job into `retry` as a failed attempt would leave it (payload and lock unchanged)."""
    (raw,) = [raw for raw in raw_redis.lrange(keys.queue("default"), 0, -1) if json.loads(raw)["jid"] == jid]
    job = json.loads(raw)
    job.update(retry_count=0, error_class="RuntimeError", error_message="boom", failed_at=1.0)
    raw_redis.lrem(keys.queue("default"), 1, raw)
    raw_redis.zadd(keys.RETRY, {json.dumps(job): 2_000_000_000})


# --- Delete and Kill release the lock ------------------------------------------------------------
def test_deleting_a_queued_unique_job_releases_its_lock(raw_redis):
    ref = unique_jobs.sync_account.delay(1)
    api.Queue("default").delete_job(ref.jid)
    assert unique_keys(raw_redis) == {} and raw_redis.llen(keys.queue("default")) == 0
    assert unique_jobs.sync_account.delay(1).enqueued


def test_deleting_a_scheduled_unique_job_releases_its_lock(raw_redis):
    ref = unique_jobs.sync_account.apply_async((1,), countdown=600)
    api.ScheduledSet().delete(scheduled_entry(raw_redis, ref.jid))
    assert unique_keys(raw_redis) == {} and raw_redis.zcard(keys.SCHEDULE) == 0
    assert unique_jobs.sync_account.delay(1).enqueued


def test_killing_a_scheduled_or_retrying_unique_job_buries_it_and_releases_its_lock(raw_redis):
    scheduled = unique_jobs.sync_account.apply_async((1,), countdown=600)
    retrying = unique_jobs.sync_account.delay(2)
    as_retry(raw_redis, retrying.jid)
    api.ScheduledSet().kill(scheduled_entry(raw_redis, scheduled.jid))
    api.RetrySet().kill(api.RetrySet().find_job(retrying.jid))
    assert unique_keys(raw_redis) == {}
    assert {json.loads(member)["jid"] for member in raw_redis.zrange(keys.DEAD, 0, -1)} == {scheduled.jid,
                                                                                               retrying.jid}
    assert unique_jobs.sync_account.delay(1).enqueued and unique_jobs.sync_account.delay(2).enqueued


def test_deleting_a_retrying_unique_job_releases_its_lock(raw_redis):
    ref = unique_jobs.sync_account.delay(3)
    as_retry(raw_redis, ref.jid)
    api.RetrySet().delete(api.RetrySet().find_job(ref.jid))
    assert unique_keys(raw_redis) == {}


def test_a_delete_never_releases_a_lock_another_job_holds_now(raw_redis):
    ref = unique_jobs.sync_account.apply_async((4,), countdown=600)
    lock = lock_of(raw_redis, ref.jid)
    raw_redis.set(lock, "jid-of-a-newer-copy")  # the old lock expired and a new copy took it
    api.ScheduledSet().delete(scheduled_entry(raw_redis, ref.jid))
    assert unique_keys(raw_redis) == {lock: "jid-of-a-newer-copy"}


def test_a_stale_delete_releases_nothing(raw_redis):
    ref = unique_jobs.sync_account.apply_async((5,), countdown=600)
    entry = scheduled_entry(raw_redis, ref.jid)
    raw_redis.zrem(keys.SCHEDULE, entry.job.member)  # promoted (or deleted) by someone else meanwhile
    with pytest.raises(api.StaleEntry):
        api.ScheduledSet().delete(entry)
    assert unique_keys(raw_redis) == {lock_of(raw_redis, ref.jid): ref.jid}


# --- Retry from dead takes the lock again ---------------------------------------------------------
def bury_unique(raw_redis, jid: str) -> None:
    """Kill a retrying unique job from the API: dead, its lock released (as a worker's final failure leaves it)."""
    as_retry(raw_redis, jid)
    api.RetrySet().kill(api.RetrySet().find_job(jid))
    assert unique_keys(raw_redis) == {}


def test_retrying_a_dead_unique_job_takes_its_lock_again(raw_redis):
    ref = unique_jobs.sync_account.delay(6)
    bury_unique(raw_redis, ref.jid)
    api.DeadSet().retry(api.DeadSet().find_job(ref.jid))
    (raw,) = raw_redis.lrange(keys.queue("default"), 0, -1)
    assert json.loads(raw)["jid"] == ref.jid
    lock = lock_of(raw_redis, ref.jid)
    assert 0 < raw_redis.pttl(lock) <= 600_000
    duplicate = unique_jobs.sync_account.delay(6)
    assert not duplicate.enqueued and duplicate.duplicate_of == ref.jid


def test_retrying_a_dead_unique_job_whose_copy_is_alive_is_refused_and_moves_nothing(raw_redis):
    ref = unique_jobs.sync_account.delay(7)
    bury_unique(raw_redis, ref.jid)
    copy = unique_jobs.sync_account.delay(7)  # the lock was free: a new copy was accepted
    assert copy.enqueued
    with pytest.raises(api.NotRetryable, match=copy.jid):
        api.DeadSet().retry(api.DeadSet().find_job(ref.jid))
    assert api.DeadSet().find_job(ref.jid) is not None
    assert [json.loads(raw)["jid"] for raw in raw_redis.lrange(keys.queue("default"), 0, -1)] == [copy.jid]
    assert unique_keys(raw_redis) == {lock_of(raw_redis, copy.jid): copy.jid}
    assert api.DeadSet().retry_all() == (0, 1)


def test_a_failed_push_from_dead_gives_the_lock_back(raw_redis):
    ref = unique_jobs.sync_account.delay(8)
    bury_unique(raw_redis, ref.jid)
    raw_redis.set(keys.queue("default"), "not a list")
    with pytest.raises(Exception, match="WRONGTYPE"):
        api.DeadSet().retry(api.DeadSet().find_job(ref.jid))
    raw_redis.delete(keys.queue("default"))
    assert unique_keys(raw_redis) == {} and api.DeadSet().find_job(ref.jid) is not None


# --- UniqueLocks: where each owner is now ----------------------------------------------------------
def test_unique_locks_say_where_each_owner_is(raw_redis):
    queued = unique_jobs.sync_account.delay(1)
    scheduled = unique_jobs.sync_account.apply_async((2,), countdown=600)
    retrying = unique_jobs.sync_account.delay(3)
    as_retry(raw_redis, retrying.jid)
    running = unique_jobs.sync_account.delay(4)
    (raw,) = [raw for raw in raw_redis.lrange(keys.queue("default"), 0, -1) if json.loads(raw)["jid"] == running.jid]
    raw_redis.lrem(keys.queue("default"), 1, raw)
    raw_redis.lpush(keys.in_progress(IDENTITY, "default"), raw)
    raw_redis.sadd(keys.IN_PROGRESS_REGISTRY, keys.in_progress(IDENTITY, "default"))
    dead = unique_jobs.sync_account.delay(5)
    (raw,) = [raw for raw in raw_redis.lrange(keys.queue("default"), 0, -1) if json.loads(raw)["jid"] == dead.jid]
    raw_redis.lrem(keys.queue("default"), 1, raw)
    raw_redis.zadd(keys.DEAD, {raw: 1.0})  # a job buried by a worker that kept its lock
    raw_redis.set("unique:" + "f" * 64, "jid-of-nobody", px=60_000)
    # A queued job that only names the owner in its arguments is not the owner.
    decoy = unique_jobs.by_account.delay({"jid": "jid-of-nobody"})

    page = api.UniqueLocks().page()
    where = {lock.owner: lock.where for lock in page.locks}
    assert where == {queued.jid: "queued", scheduled.jid: "scheduled", retrying.jid: "retry",
                     running.jid: "running", dead.jid: "dead", "jid-of-nobody": "gone", decoy.jid: "queued"}
    assert page.next_cursor is None and not page.partial_search
    ttls = {lock.owner: lock.ttl for lock in page.locks}
    assert 600 + 590 < ttls[scheduled.jid] <= 1200 and 590 < ttls[queued.jid] <= 600
    assert all(lock.valid and len(lock.digest) == 64 for lock in page.locks)


def test_an_owner_past_the_search_budget_is_unknown_not_gone(raw_redis, monkeypatch):
    from djwork.api import unique_locks

    monkeypatch.setattr(unique_locks, "LOCATE_BUDGET", 4)
    refs = [unique_jobs.sync_account.delay(index) for index in range(10)]
    page = api.UniqueLocks().page()
    where = {lock.owner: lock.where for lock in page.locks}
    assert page.partial_search
    assert {where[ref.jid] for ref in refs[:2] + refs[-2:]} == {"queued"}  # both ends of the queue are read
    assert {where[ref.jid] for ref in refs[2:-2]} == {"unknown"}


def test_unique_locks_page_through_every_lock(raw_redis):
    for index in range(130):
        raw_redis.set(f"unique:{index:064x}", f"jid-{index}", px=60_000)
    raw_redis.set("queue:unrelated", "x")
    seen, cursor, pages = set(), "0", 0
    while cursor is not None and pages < 100:
        page = api.UniqueLocks().page(cursor, per_page=50)
        seen.update(lock.digest for lock in page.locks)
        cursor, pages = page.next_cursor, pages + 1
    assert seen == {f"{index:064x}" for index in range(130)}


def test_get_and_release_are_owner_checked(raw_redis):
    ref = unique_jobs.sync_account.delay(1)
    digest = digest_of(lock_of(raw_redis, ref.jid))
    lock = api.UniqueLocks().get(digest)
    assert (lock.owner, lock.where) == (ref.jid, "queued")
    assert not api.UniqueLocks().release(digest, owner="some-other-jid")
    assert unique_keys(raw_redis)
    assert api.UniqueLocks().release(digest, owner=ref.jid)
    assert unique_keys(raw_redis) == {} and api.UniqueLocks().get(digest) is None
    assert raw_redis.llen(keys.queue("default")) == 1  # releasing a lock never touches the job
    raw_redis.set(f"unique:{digest}", "anyone")
    assert api.UniqueLocks().release(digest) and not api.UniqueLocks().release(digest)


@pytest.mark.parametrize("digest", ["", "a b", "a*", "x\ny", "é", "a" * 201])
def test_a_bad_digest_is_refused(raw_redis, digest):
    with pytest.raises(ValueError, match="not a unique lock digest"):
        api.UniqueLocks().release(digest)
    with pytest.raises(ValueError):
        api.UniqueLocks().get(digest)


def test_a_bad_cursor_is_refused(raw_redis):
    with pytest.raises(ValueError, match="not a page cursor"):
        api.UniqueLocks().page("1; FLUSHALL")


def test_a_lock_key_of_the_wrong_type_is_listed_with_a_problem(raw_redis):
    raw_redis.rpush("unique:abc", "x")
    (lock,) = api.UniqueLocks().page().locks
    assert lock.owner == "" and lock.problems and "unique:abc" in lock.problems[0]


def test_for_job_gives_a_jobs_digest_and_lock_state(raw_redis):
    ref = unique_jobs.sync_account.apply_async((1,), countdown=600)
    entry = scheduled_entry(raw_redis, ref.jid)
    digest, lock = api.UniqueLocks().for_job(entry.job)
    assert lock.owner == ref.jid and lock_of(raw_redis, ref.jid) == f"unique:{digest}"
    raw_redis.delete(f"unique:{digest}")
    assert api.UniqueLocks().for_job(entry.job) == (digest, None)
    plain = unique_jobs.sync_account.build_payload([1])[0]
    plain.pop("djwork_locks")
    assert api.UniqueLocks().for_job(api.JobRecord.parse(json.dumps(plain))) is None


def test_clearing_a_queue_or_a_set_releases_the_locks_its_jobs_own(raw_redis):
    import json

    from djwork.api import Queue, RetrySet

    def job(jid: str, lock: str) -> str:
        return json.dumps({"class": "x", "args": [], "jid": jid, "queue": "default", "djwork_locks": [lock]})

    raw_redis.sadd("queues", "default")
    raw_redis.lpush("queue:default", job("q1", "unique:q1"), job("q2", "unique:q2"), json.dumps({"class": "y"}))
    raw_redis.zadd("retry", {job("r1", "unique:r1"): 1.0})
    raw_redis.mset({"unique:q1": "q1", "unique:q2": "someone-else", "unique:r1": "r1"})
    assert Queue("default").clear() == 3
    assert RetrySet().clear() == 1
    assert not raw_redis.exists("queue:default", "retry", "unique:q1", "unique:r1")
    assert raw_redis.get("unique:q2") == b"someone-else"  # owner-checked: another job's lock stays
    assert not raw_redis.sismember("queues", "default")
    assert not list(raw_redis.scan_iter("djwork:clearing:*"))
