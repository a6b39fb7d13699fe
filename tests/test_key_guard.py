"""The key guard: a key of the wrong type is named, moved aside and logged, and djwork carries on.

A reliability audit found ``SET queue:default x`` stopped every fetch (2,000
jobs on ``low`` ran 0 in 60 s) with a WRONGTYPE naming a Lua line, and
``SET retry x`` left every failing job stuck on its in-progress list.
djwork/redis/key_repair.py, lua/quarantine.lua, djwork/worker/key_guard.py.
"""

from __future__ import annotations

import json
import logging

import pytest
import redis as redis_py

import djwork
from djwork import redis as redis_layer
from djwork.redis import key_repair as key_guard
from djwork.redis import keys, scripts
from djwork.redis.connections import CountingConnection
from djwork.redis.key_layout import layout_of
from djwork.settings.conf import get_config
from djwork.worker.fetch import Fetcher
from djwork.worker.key_guard import RepairThrottle
from tests import jobs, worker_jobs
from tests.helpers_worker import counts, in_progress_items, wait_until, zset_jobs

THIRTY_DAYS = 30 * 24 * 3600


def copy_head(redis, key: str) -> str:
    """The start of the name of ``key``'s copies: on a cluster the key may be wrapped in braces (its slot)."""
    return layout_of(redis).quarantine_head(key)


def copies_of(redis, key: str) -> list[str]:
    """Names of the quarantined copies of exactly ``key`` that still exist, oldest first."""
    head = copy_head(redis, key)
    return [name.decode() for name in redis.zrange("djwork:quarantine", 0, -1)
            if name.decode().startswith(head) and name.decode()[len(head):].count(":") == 1
            and redis.exists(name)]


# --- quarantine_if_wrong_type ----------------------------------------------------------------
def test_a_wrong_type_key_is_moved_aside_with_an_expiry_and_an_error_naming_it(raw_redis, caplog):
    raw_redis.set("queue:default", "x")
    caplog.set_level(logging.ERROR, logger="djwork.key_guard")

    copy = key_guard.quarantine_if_wrong_type("queue:default")

    head = copy_head(raw_redis, "queue:default")
    assert copy is not None and copy.startswith(head)
    ms, token = copy[len(head):].split(":")
    assert ms.isdigit() and int(token, 16) >= 0
    assert raw_redis.exists("queue:default") == 0
    assert raw_redis.get(copy) == b"x"  # nothing lost: the content is kept
    assert THIRTY_DAYS - 60 <= raw_redis.ttl(copy) <= THIRTY_DAYS
    assert int(raw_redis.zscore("djwork:quarantine", copy)) == int(ms)
    (record,) = caplog.records
    message = record.getMessage()
    assert record.levelno == logging.ERROR
    assert all(part in message for part in ("queue:default", "string", "list", copy)), message


def test_a_key_of_the_right_type_or_missing_is_left_alone(raw_redis, caplog):
    raw_redis.lpush("queue:default", "job")
    raw_redis.zadd("retry", {"job": 1.0})
    caplog.set_level(logging.ERROR, logger="djwork.key_guard")
    assert key_guard.quarantine_if_wrong_type("queue:default") is None
    assert key_guard.quarantine_if_wrong_type("retry", "zset") is None
    assert key_guard.quarantine_if_wrong_type("queue:missing") is None
    assert raw_redis.lrange("queue:default", 0, -1) == [b"job"]
    assert raw_redis.zcard("retry") == 1
    assert not raw_redis.exists("djwork:quarantine") and not caplog.records


def test_six_quarantines_of_one_key_keep_the_five_newest_copies(raw_redis):
    raw_redis.set("queue:default:1", "another key whose name starts the same")
    other = key_guard.quarantine_if_wrong_type("queue:default:1")
    moved = []
    for number in range(6):
        raw_redis.set("queue:default", f"x{number}")
        moved.append(key_guard.quarantine_if_wrong_type("queue:default"))
    kept = copies_of(raw_redis, "queue:default")
    assert len(kept) == 5 and set(kept) <= set(moved)
    assert sorted(raw_redis.get(name) for name in kept) == [f"x{number}".encode() for number in range(1, 6)]
    # The oldest went, from Redis and from the index; the look-alike key's copy was not counted.
    assert not any(raw_redis.get(name) == b"x0" for name in moved)
    assert raw_redis.zcard("djwork:quarantine") == 6
    assert raw_redis.get(other) == b"another key whose name starts the same"


def test_the_index_is_capped_and_its_oldest_copies_deleted(raw_redis, monkeypatch):
    monkeypatch.setattr(key_guard, "INDEX_CAP", 4)
    moved = []
    for number in range(7):
        raw_redis.set(f"queue:q{number}", "x")
        moved.append(key_guard.quarantine_if_wrong_type(f"queue:q{number}"))
    assert [name.decode() for name in raw_redis.zrange("djwork:quarantine", 0, -1)] == moved[3:]
    assert [bool(raw_redis.exists(name)) for name in moved] == [False] * 3 + [True] * 4


def test_an_index_of_the_wrong_type_is_moved_aside_too(raw_redis, caplog):
    raw_redis.set("djwork:quarantine", "junk")
    raw_redis.set("retry", "x")
    caplog.set_level(logging.ERROR, logger="djwork.key_guard")
    copy = key_guard.quarantine_if_wrong_type("retry", "zset")
    assert raw_redis.get(copy) == b"x"
    assert raw_redis.type("djwork:quarantine") == b"zset" and raw_redis.zcard("djwork:quarantine") == 2
    assert any("djwork:quarantine held a string" in record.getMessage() for record in caplog.records)


def test_a_process_key_is_placed_through_processes_and_an_unknown_key_is_refused(raw_redis):
    raw_redis.sadd("processes", "host:1:abc")
    raw_redis.set("host:1:abc:work", "x")
    raw_redis.set("host:1:abc-signals", "x")
    assert key_guard.quarantine_if_wrong_type("host:1:abc:work").startswith(copy_head(raw_redis, "host:1:abc:work"))
    assert key_guard.quarantine_if_wrong_type("host:1:abc-signals") is not None
    raw_redis.set("someone:else", "x")
    with pytest.raises(ValueError, match="does not place 'someone:else'"):
        key_guard.quarantine_if_wrong_type("someone:else")
    assert raw_redis.get("someone:else") == b"x"


# --- sweep --------------------------------------------------------------------------------------
def test_a_sweep_moves_wrong_fixed_queue_process_and_in_progress_keys_and_nothing_else(raw_redis):
    identity = "host:7:feed"
    in_progress = keys.in_progress(identity, "low")
    raw_redis.sadd("queues", "low", "default")
    raw_redis.sadd("processes", identity, "queues")  # "queues": junk in processes, must not be checked as a hash
    raw_redis.sadd("djwork:inprogress", in_progress)
    wrong = {"retry": "zset", "queue:low": "list", identity: "hash", f"{identity}:work": "hash",
             in_progress: "list", "stat:processed": "string"}
    for key in ("retry", "queue:low", identity, f"{identity}:work", in_progress):
        raw_redis.set(key, "x")
    raw_redis.lpush("stat:processed", "not a counter")
    raw_redis.lpush("queue:default", "job")
    raw_redis.hset(f"{identity}:workers", "tid", "{}")

    moved = dict(key_guard.sweep())

    assert set(moved) == set(wrong)
    for key, copy in moved.items():
        assert copy.startswith(copy_head(raw_redis, key)) and not raw_redis.exists(key)
    assert raw_redis.type("queues") == b"set" and raw_redis.llen("queue:default") == 1
    assert raw_redis.hget(f"{identity}:workers", "tid") == b"{}"
    assert key_guard.sweep() == []


def test_a_sweep_checks_the_configured_queues_the_queues_set_does_not_list(raw_redis):
    raw_redis.set("queue:critical", "x")  # QUEUES in tests/settings.py; `queues` is empty
    assert [key for key, _copy in key_guard.sweep(get_config())] == ["queue:critical"]


def test_a_sweep_is_two_round_trips_however_many_keys(raw_redis, monkeypatch):
    raw_redis.sadd("queues", *(f"q{number}" for number in range(50)))
    raw_redis.sadd("processes", *(f"host:{number}:abc" for number in range(20)))
    sends = []
    original = CountingConnection.send_packed_command

    def counting(self, *args, **kwargs):
        sends.append(1)
        return original(self, *args, **kwargs)

    key_guard.sweep()  # dial first: the handshake is not the sweep's
    monkeypatch.setattr(CountingConnection, "send_packed_command", counting)
    assert key_guard.sweep() == []
    assert len(sends) == 2


# --- WRONGTYPE named: scripts, client --------------------------------------------------------
def test_a_script_meeting_a_wrong_type_raises_an_error_naming_the_key(raw_redis):
    raw_redis.set("retry", "x")
    call = ("fail", ["djwork:inprogress:h|default", "retry", "dead", "djwork:orphan-counts"],
            ["raw", "{}", "1.0", "0", "0", "0", "1", ""])
    with pytest.raises(djwork.WrongTypeKey) as raised:
        redis_layer.run(lambda conn: scripts.evaluate(conn, *call))
    error = raised.value
    assert isinstance(error, redis_py.ResponseError) and str(error).startswith("WRONGTYPE")
    assert error.keys == ("retry",) and error.found == {"retry": "string"} and error.expected == {"retry": "zset"}
    assert "'fail'" in str(error) and "retry holds a string, not the zset" in str(error)

    pipe = redis_layer.client().pipeline(transaction=False)
    pipe.incr("t:counter")
    scripts.queue_evaluate(pipe, *call)
    replies = scripts.execute(pipe, raise_on_error=False)
    assert replies[0] == 1 and isinstance(replies[1], djwork.WrongTypeKey) and replies[1].keys == ("retry",)

    connection = redis_layer.dedicated_connection()
    try:
        with pytest.raises(djwork.WrongTypeKey, match="retry holds a string"):
            scripts.evaluate_on_connection(connection, *call)
    finally:
        connection.disconnect()


def test_a_delay_onto_a_queue_key_of_the_wrong_type_names_it_and_works_once_it_is_quarantined(raw_redis):
    raw_redis.set("queue:default", "x")
    with pytest.raises(djwork.WrongTypeKey) as raised:
        jobs.add.delay(1)
    assert raised.value.keys == ("queue:default",)
    assert "queue:default holds a string, not the list" in str(raised.value)
    assert "quarantine_if_wrong_type('queue:default')" in str(raised.value)
    with pytest.raises(djwork.WrongTypeKey, match="queue:default"):
        jobs.add.delay_many([(2,), (3,)])
    assert raw_redis.get("queue:default") == b"x"  # the client names it, never moves it

    key_guard.quarantine_if_wrong_type("queue:default")
    ref = jobs.add.delay(4)
    assert [json.loads(raw)["jid"] for raw in raw_redis.lrange("queue:default", 0, -1)] == [ref.jid]


def test_repairs_of_one_key_are_throttled_to_one_a_second():
    throttle = RepairThrottle(interval=3600)
    assert throttle.admit("queue:a") and throttle.admit("queue:b")
    assert not throttle.admit("queue:a") and not throttle.admit("queue:b")


# --- real workers -------------------------------------------------------------------------------
def test_a_failing_job_is_filed_in_a_fresh_retry_set_when_retry_held_a_string(workers, raw_redis):
    # A wrong key at boot proves the boot sweep ran: `retry` is set after it, so the filing meets it.
    raw_redis.rpush("process_cleanup", "not a string")
    worker = workers.start("-c", "2")
    worker.wait_log("key process_cleanup held a list", 20)
    raw_redis.set("retry", "x")
    ref = worker_jobs.always_fail.delay("r")

    ((entry, _score, _raw),) = wait_until(lambda: raw_redis.type("retry") == b"zset" and zset_jobs(raw_redis, "retry"),
                                          20, "the job in a fresh retry set")
    assert entry["jid"] == ref.jid and entry["error_class"] == "RuntimeError"
    log = worker.wait_log("key retry held a string where djwork expects a zset", 10)
    assert copy_head(raw_redis, "retry") in log
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 10, "nothing left in progress")
    (copy,) = copies_of(raw_redis, "retry")
    assert raw_redis.get(copy) == b"x"


def test_a_string_on_queue_default_at_boot_is_quarantined_and_every_queue_runs(workers, raw_redis):
    raw_redis.set("queue:default", "x")
    worker_jobs.record.set(queue="low").delay_many([(f"low-{number}",) for number in range(300)])
    worker = workers.start("-c", "4")
    worker.wait_log("key queue:default held a string where djwork expects a list", 20)
    worker_jobs.record.delay_many([(f"default-{number}",) for number in range(20)])
    wait_until(lambda: len(counts(raw_redis)) == 320, 60, "every job on low and default run", interval=0.1)
    assert set(counts(raw_redis).values()) == {1}
    (copy,) = copies_of(raw_redis, "queue:default")
    assert raw_redis.get(copy) == b"x"


def test_a_taker_meeting_a_wrong_queue_key_has_it_quarantined_and_keeps_taking(workers, raw_redis):
    worker = workers.start("-c", "2", "-q", "default")
    identity = worker.identity(raw_redis)
    wait_until(lambda: raw_redis.zscore("djwork:beats", identity), 20, "the worker's beat")
    raw_redis.set("queue:default", "x")  # the takers' next BLMOVE is refused
    worker.wait_log("key queue:default held a string where djwork expects a list", 20)
    worker_jobs.record.delay_many([(number,) for number in range(5)])
    wait_until(lambda: len(counts(raw_redis)) == 5, 20, "the jobs after the repair")
    assert copies_of(raw_redis, "queue:default")


# Depends on the coordinator's fetch change (fetch.lua skips a queue whose key holds the wrong type and
# reports it): without it, the one bad queue fails the whole fetch, every queue with it.
def test_a_fetch_with_one_bad_queue_key_still_takes_the_other_queues_jobs(raw_redis):
    raw_redis.set("queue:default", "x")
    worker_jobs.record.set(queue="low").delay_many([(number,) for number in range(3)])
    capsule = get_config().capsules[0]
    fetcher = Fetcher("host:1:fetch", capsule, reliable=True)
    try:
        work = fetcher.fetch(10, [])
    finally:
        fetcher.close()
    assert [unit.queue for unit in work] == ["low"] * 3
    assert raw_redis.get("queue:default") == b"x"


def test_the_overview_lists_keys_moved_aside(raw_redis, admin_client):
    from djwork.api import Quarantine

    raw_redis.set("queue:default", "<script>x</script>")
    copy = key_guard.quarantine_if_wrong_type("queue:default")
    (entry,) = Quarantine.recent()
    assert (entry.key, entry.copy, entry.type) == ("queue:default", copy, "string")
    page = admin_client.get("/djwork/").content.decode()
    assert "Keys moved aside" in page and copy in page
