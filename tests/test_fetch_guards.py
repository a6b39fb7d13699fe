"""fetch.lua's guards, against the private Redis: isolated recovered jobs, late-finished copies, wrong-type keys.

Each drives the real scripts through a real ``Fetcher``; worker-level
versions live in tests/test_worker_crash.py and tests/chaos/.
"""

from __future__ import annotations

import json
import logging

import pytest

from djwork.redis import keys, scripts
from djwork.settings.conf import Capsule
from djwork.worker.fetch import ISOLATE_AFTER_RECOVERIES, Fetcher, IsolationGate, UnitOfWork
from tests import worker_jobs
from tests.helpers_worker import blocked_takers, counts, in_progress_items, wait_until

IDENTITY = "host:1:guards"


def _job(jid: str, queue: str = "default") -> bytes:
    return json.dumps({"class": "tests.worker_jobs.record", "args": [jid], "jid": jid, "queue": queue,
                       "retry": True, "created_at": 1.0, "enqueued_at": 1.0}).encode()


def _fetcher(*queues: str, gate: IsolationGate | None = None) -> Fetcher:
    return Fetcher(IDENTITY, Capsule("default", 10, tuple((name, 0) for name in queues)), True, gate)


def _jids(units: list[UnitOfWork]) -> list[str]:
    return [json.loads(unit.raw)["jid"] for unit in units]


@pytest.fixture
def fetchers():
    made: list[Fetcher] = []

    def make(*queues: str, gate: IsolationGate | None = None) -> Fetcher:
        made.append(_fetcher(*queues, gate=gate))
        return made[-1]

    yield make
    for fetcher in made:
        fetcher.close()


# --- isolation -----------------------------------------------------------------------------
def _recover(raw_redis, items: list[bytes], max_orphanings: int = 3) -> list:
    dead_identity = "host:2:dead"
    in_progress = keys.in_progress(dead_identity, "default")
    raw_redis.rpush(in_progress, *items)
    raw_redis.sadd(keys.IN_PROGRESS_REGISTRY, in_progress)
    return scripts.evaluate(raw_redis, "recover_orphans", [
        in_progress, keys.queue("default"), keys.BEATS, keys.ORPHAN_COUNTS, keys.IN_PROGRESS_REGISTRY,
        keys.isolated("default")], [dead_identity, 1, max_orphanings, ISOLATE_AFTER_RECOVERIES])


def test_a_job_recovered_twice_is_isolated_and_a_first_recovery_goes_back_to_its_queue(raw_redis):
    raw_redis.hset(keys.ORPHAN_COUNTS, "twice", 1)  # recovered once before
    reply = _recover(raw_redis, [_job("once"), _job("twice")])
    assert reply[:2] == [1, 2]
    assert raw_redis.lrange(keys.queue("default"), 0, -1) == [_job("once")]
    assert raw_redis.lrange(keys.isolated("default"), 0, -1) == [_job("twice")]
    assert raw_redis.hget(keys.ORPHAN_COUNTS, "twice") == b"2"


def test_a_fetch_takes_at_most_one_isolated_job_per_process_until_it_finishes(raw_redis, fetchers):
    raw_redis.rpush(keys.isolated("default"), _job("suspect-1"), _job("suspect-2"))
    raw_redis.rpush(keys.queue("default"), _job("fresh-1"), _job("fresh-2"))
    gate = IsolationGate()
    fetcher, other_capsule = fetchers("default", gate=gate), fetchers("default", gate=gate)

    first = fetcher.fetch(10, [])
    assert [unit.isolated for unit in first] == [True, False, False]
    assert _jids(first) == ["suspect-2", "fresh-2", "fresh-1"]
    # Another capsule of the same process: the gate is shared, so no second suspect.
    raw_redis.rpush(keys.queue("default"), _job("fresh-3"))
    assert _jids(other_capsule.fetch(10, [])) == ["fresh-3"]
    assert raw_redis.lrange(keys.isolated("default"), 0, -1) == [_job("suspect-1")]

    gate.release()  # the isolated job finished (Manager._release)
    second = fetcher.fetch(10, [])
    assert _jids(second) == ["suspect-1"] and second[0].isolated


def test_the_shutdown_requeue_keeps_an_isolated_job_isolated(raw_redis, fetchers):
    raw_redis.hset(keys.ORPHAN_COUNTS, "suspect", ISOLATE_AFTER_RECOVERIES)
    raw_redis.rpush(keys.isolated("default"), _job("suspect"))
    raw_redis.rpush(keys.queue("default"), _job("fresh"))
    fetcher = fetchers("default")
    assert len(fetcher.fetch(10, [])) == 2
    assert fetcher.requeue([]) == 2
    assert raw_redis.lrange(keys.queue("default"), 0, -1) == [_job("fresh")]
    assert raw_redis.lrange(keys.isolated("default"), 0, -1) == [_job("suspect")]


def test_each_queue_gets_its_own_look_at_its_isolated_list(raw_redis, fetchers):
    gate = IsolationGate(check_interval=3600)
    fetcher = fetchers("critical", "default", gate=gate)
    assert fetcher.take_isolated(1) is None  # critical's look, spent on an empty list
    raw_redis.rpush(keys.isolated("default"), _job("suspect"))
    assert json.loads(fetcher.take_isolated(2))["jid"] == "suspect"  # default's own look is still due


def test_an_idle_taker_looks_at_the_isolated_list_at_most_once_per_interval(raw_redis, fetchers):
    gate = IsolationGate(check_interval=3600)
    fetcher = fetchers("default", gate=gate)
    assert fetcher.take_isolated(1) is None  # due, but empty: the look is spent
    raw_redis.rpush(keys.isolated("default"), _job("suspect"))
    assert fetcher.take_isolated(1) is None  # not due again within the interval
    gate._next_check.clear()
    assert json.loads(fetcher.take_isolated(1))["jid"] == "suspect"
    assert raw_redis.lrange(keys.in_progress(IDENTITY, "default"), 0, -1) == [_job("suspect")]
    gate._next_check.clear()
    raw_redis.rpush(keys.isolated("default"), _job("suspect-2"))
    assert fetcher.take_isolated(1) is None  # one isolated job at a time


# --- a job that finished after the shutdown deadline pushed it back -------------------------------
def _late_unit(fetcher: Fetcher, jid: str) -> UnitOfWork:
    unit = UnitOfWork("default", 1, _job(jid), fetcher.in_progress_keys[0])
    unit.acknowledge(jid)
    return unit


def test_a_late_finish_removes_its_pushed_back_copy(raw_redis, fetchers):
    fetcher = fetchers("default")
    raw_redis.rpush(keys.queue("default"), _job("other"), _job("late"))
    assert fetcher.settle_late(_late_unit(fetcher, "late")) == "removed"
    assert raw_redis.lrange(keys.queue("default"), 0, -1) == [_job("other")]
    assert not raw_redis.exists(keys.FINISHED_LATE)


def test_a_late_finish_before_the_requeue_acks_it(raw_redis, fetchers):
    fetcher = fetchers("default")
    raw_redis.rpush(fetcher.in_progress_keys[0], _job("late"))
    assert fetcher.settle_late(_late_unit(fetcher, "late")) == "acked"
    assert not raw_redis.exists(fetcher.in_progress_keys[0], keys.FINISHED_LATE)
    assert fetcher.requeue([]) == 0


def test_a_copy_that_left_the_queue_is_marked_and_dropped_by_the_fetch_that_meets_it(raw_redis, fetchers, caplog):
    fetcher = fetchers("default")
    assert fetcher.settle_late(_late_unit(fetcher, "late")) == "marked"
    assert raw_redis.hexists(keys.FINISHED_LATE, "late")
    assert raw_redis.ttl(keys.FINISHED_LATE) > 0
    # Orphan recovery returns the copy later; the next fetch drops it and takes the rest.
    raw_redis.rpush(keys.queue("default"), _job("after"), _job("late"))
    raw_redis.hset(keys.ORPHAN_COUNTS, "late", 1)
    with caplog.at_level(logging.WARNING, logger="djwork.worker"):
        units = fetcher.fetch(10, [])
    assert _jids(units) == ["after"]
    assert "dropped a copy of job late" in caplog.text
    assert raw_redis.lrange(fetcher.in_progress_keys[0], 0, -1) == [_job("after")]
    assert not raw_redis.exists(keys.FINISHED_LATE) and not raw_redis.hexists(keys.ORPHAN_COUNTS, "late")


# --- wrong-type keys ------------------------------------------------------------------------------
def test_a_wrong_type_queue_key_fails_only_its_queue_and_names_the_key(raw_redis, fetchers, caplog):
    raw_redis.set(keys.queue("default"), "x")
    raw_redis.rpush(keys.queue("low"), _job("low-1", "low"), _job("low-2", "low"))
    fetcher = fetchers("default", "low")
    reported: list[str] = []
    fetcher.on_broken_key = lambda key, error: reported.append(key) or False
    with caplog.at_level(logging.ERROR, logger="djwork.worker"):
        units = fetcher.fetch(10, [])
        again = fetcher.fetch(10, [])
    assert sorted(_jids(units)) == ["low-1", "low-2"] and again == []
    assert "queue:default" in reported
    assert "key 'queue:default'" in caplog.text and "WRONGTYPE" in caplog.text
    # Logged once per streak, however often the fetch meets it.
    assert caplog.text.count("key 'queue:default'") == 1


def test_a_wrong_type_paused_set_does_not_stop_the_fetch(raw_redis, fetchers):
    raw_redis.set(keys.PAUSED, "x")
    raw_redis.rpush(keys.queue("default"), _job("one"))
    assert _jids(fetchers("default").fetch(10, [])) == ["one"]


def test_an_idle_workers_taker_drops_a_copy_marked_finished_late(workers, raw_redis):
    raw_redis.hset(keys.FINISHED_LATE, "late", 1)
    worker = workers.start("-c", "1", "-q", "default")
    wait_until(lambda: blocked_takers(raw_redis), 20, "the worker's taker blocked on the empty queue")
    # The copy is taken by the blocked taker (not a fetch), then the sentinel after it.
    raw_redis.lpush(keys.queue("default"), _job("late"))
    worker_jobs.record.delay("sentinel")
    wait_until(lambda: counts(raw_redis).get("sentinel") == 1, 20, "the sentinel job")
    assert "late" not in counts(raw_redis)
    assert "dropped a copy of job late" in worker.log()
    # The sentinel's body counts before its ack empties the in-progress list.
    wait_until(lambda: not in_progress_items(raw_redis), 10, "the sentinel acked")
    assert not raw_redis.exists(keys.FINISHED_LATE)


def test_queue_reads_count_isolated_jobs_apart(raw_redis):
    from djwork.api import Queue

    raw_redis.sadd(keys.QUEUES, "default")
    raw_redis.rpush(keys.queue("default"), _job("fresh"))
    raw_redis.rpush(keys.isolated("default"), _job("suspect-1"), _job("suspect-2"))
    (summary,) = Queue.all()
    assert (summary.size, summary.isolated) == (1, 2)
    assert Queue("default").isolated_size() == 2


# --- locks bound to a job's life (djwork/job_locks.py) ------------------------------------------------
def test_an_ack_releases_the_locks_the_job_still_owns_and_no_other(raw_redis, fetchers):
    from djwork.worker.fetch import Ack

    raw_redis.set("unique:mine", "jid-1")
    raw_redis.set("unique:taken-over", "jid-2")  # expired and re-taken by another job meanwhile
    raw_redis.set("unique:wrong-type-ok", "jid-1")
    raw_redis.delete("unique:wrong-type-ok")
    raw_redis.rpush("unique:wrong-type-ok", "x")  # must not fail the fetch
    fetcher = fetchers("default")
    raw_redis.rpush(fetcher.in_progress_keys[0], _job("jid-1"))
    locks = "unique:mine\nunique:taken-over\nunique:wrong-type-ok"
    fetcher.fetch(10, [Ack(1, _job("jid-1"), "jid-1", locks)])
    assert not raw_redis.exists("unique:mine")
    assert raw_redis.get("unique:taken-over") == b"jid-2"
    assert not raw_redis.exists(fetcher.in_progress_keys[0])


def test_a_payload_names_only_djwork_lock_keys():
    from djwork import job_locks

    payload = {"djwork_locks": ["unique:abc", "queue:default", "djwork:periodic-running:nightly", 5, "unique:a\nb"]}
    assert job_locks.locks_of(payload) == ["unique:abc", "djwork:periodic-running:nightly"]
    assert job_locks.locks_of({"djwork_locks": "unique:abc"}) == []


def _locked_job(jid: str, klass: str, args: list, lock: str, **extra) -> bytes:
    return json.dumps({"class": klass, "args": args, "jid": jid, "queue": "default", "retry": extra.pop("retry", True),
                       "created_at": 1.0, "enqueued_at": 1.0, "djwork_locks": [lock], **extra}).encode()


def test_a_worker_releases_job_locks_on_success_dead_and_at_start_and_keeps_them_on_retry(workers, raw_redis):
    jobs = {
        "ok": _locked_job("jid-ok", "tests.worker_jobs.record", ["ok"], "unique:ok"),
        "dead": _locked_job("jid-dead", "tests.worker_jobs.always_fail", ["dead"], "unique:dead", retry=0),
        "retry": _locked_job("jid-retry", "tests.worker_jobs.always_fail", ["retry"], "unique:retry", retry=5),
        "start": _locked_job("jid-start", "tests.worker_jobs.slow", ["start", 30], "unique:start",
                             unique_until="start"),
    }
    for name, raw in jobs.items():
        raw_redis.set(f"unique:{name}", f"jid-{name}")
        raw_redis.lpush(keys.queue("default"), raw)
    worker = workers.start("-c", "5")
    wait_until(lambda: counts(raw_redis).get("ok") == 1 and raw_redis.zcard("dead") == 1
               and raw_redis.zcard("retry") == 1 and raw_redis.hget("t:starts", "start") == b"1", 20,
               "the four jobs to run")
    # The ack and the dead filing carried the release; the retry kept its lock.
    wait_until(lambda: not raw_redis.exists("unique:ok"), 10, "the ack to release the success's lock")
    assert not raw_redis.exists("unique:dead")
    assert raw_redis.get("unique:retry") == b"jid-retry"
    # Released at start: gone while the job still runs.
    assert not raw_redis.exists("unique:start") and "start" not in counts(raw_redis)
    worker.kill()


def test_burying_a_job_releases_the_locks_it_owns(raw_redis):
    from djwork import dead

    raw_redis.rpush("djwork:inprogress:h|default", _job("pill"))
    raw_redis.set("unique:pill", "pill")
    raw_redis.set("unique:other", "someone-else")
    call = dead.move_to_dead("djwork:inprogress:h|default", "list", _job("pill"), {"jid": "pill", "class": "x"},
                             "pill", locks="unique:pill\nunique:other")
    assert call.evaluate(raw_redis) == 1
    assert not raw_redis.exists("unique:pill") and raw_redis.get("unique:other") == b"someone-else"
    assert raw_redis.zcard("dead") == 1


# --- results carried by acks (docs/celery.md) ---------------------------------------------------------
def test_acks_the_shutdown_requeue_drops_still_store_their_results(raw_redis, fetchers):
    from djwork.worker.fetch import Ack

    fetcher = fetchers("default")
    raw_redis.rpush(fetcher.in_progress_keys[0], _job("done-1"), _job("running-1"))
    spec = "86400\nSUCCESS\n\n7\n"
    assert fetcher.requeue([Ack(1, _job("done-1"), "done-1", "", spec)]) == 1
    assert raw_redis.hget(keys.result("done-1"), "state") == b"SUCCESS"
    assert raw_redis.hget(keys.result("done-1"), "result") == b"7"
    assert raw_redis.lrange(keys.queue("default"), 0, -1) == [_job("running-1")]
    assert not raw_redis.exists(keys.result("running-1"))


def test_a_fetched_revoked_job_is_dropped_and_reported(raw_redis, fetchers, caplog):
    raw_redis.lpush(keys.queue("default"), _job("revoked-1"), _job("kept-1"))
    raw_redis.zadd(keys.REVOKED, {"revoked-1": 9e9})
    fetcher = fetchers("default")
    assert _jids(fetcher.fetch(10, [])) == ["kept-1"]
    assert raw_redis.lrange(fetcher.in_progress_keys[0], 0, -1) == [_job("kept-1")]
    assert "dropped revoked job revoked-1" in caplog.text
