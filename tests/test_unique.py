"""Unique jobs, the enqueue side: one lock and one push in one Lua step, against the private Redis.

The worker side (locks released by every exit) is in tests/test_unique_worker.py,
the API's Delete/Kill and the read model in tests/test_unique_api.py.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import threading
import time

import orjson
import pytest
from django.conf import settings
from django.test import override_settings

import djwork
from djwork.options import OptionError
from djwork.redis import keys
from tests import unique_jobs
from tests.faultproxy import FaultProxy


def unique_keys(raw_redis) -> dict[str, str]:
    return {key.decode(): raw_redis.get(key).decode() for key in raw_redis.scan_iter("unique:*", count=1000)}


def queued(raw_redis, queue: str = "default") -> list[dict]:
    return [json.loads(raw) for raw in reversed(raw_redis.lrange(keys.queue(queue), 0, -1))]


def test_100_concurrent_delays_from_10_threads_enqueue_exactly_one(raw_redis):
    refs: list[djwork.JobRef] = []
    lock = threading.Lock()
    start = threading.Barrier(10)

    def caller() -> None:
        start.wait(10)
        mine = [unique_jobs.sync_account.delay(42) for _ in range(10)]
        with lock:
            refs.extend(mine)

    threads = [threading.Thread(target=caller) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(refs) == 100
    enqueued = [ref for ref in refs if ref.enqueued]
    assert len(enqueued) == 1
    (winner,) = enqueued
    duplicates = [ref for ref in refs if not ref.enqueued]
    assert len(duplicates) == 99
    assert {ref.duplicate_of for ref in duplicates} == {winner.jid}
    assert {ref.jid for ref in duplicates} == {winner.jid}  # the id of the job that will do the work
    assert winner.duplicate_of is None
    (job,) = queued(raw_redis)
    assert job["jid"] == winner.jid
    assert unique_keys(raw_redis) == {job["djwork_locks"][0]: winner.jid}


def test_the_lock_is_sha256_of_class_queue_and_arguments_and_lives_unique_for(raw_redis):
    ref = unique_jobs.sync_account.delay(42)
    (job,) = queued(raw_redis)
    digest = hashlib.sha256(orjson.dumps(["tests.unique_jobs.sync_account", "default", [42], {}])).hexdigest()
    assert job["djwork_locks"] == [f"unique:{digest}"]
    assert job["unique_for"] == 600 and "unique_until" not in job
    assert raw_redis.get(f"unique:{digest}") == ref.jid.encode()
    assert 599_000 < raw_redis.pttl(f"unique:{digest}") <= 600_000


def test_the_same_arguments_on_another_queue_or_other_arguments_are_other_jobs(raw_redis):
    first = unique_jobs.sync_account.delay(42)
    assert unique_jobs.sync_account.set(queue="low").delay(42).enqueued
    assert unique_jobs.sync_account.delay(43).enqueued
    assert unique_jobs.sync_account.delay(account_id=42).enqueued  # a keyword argument is another call
    assert unique_jobs.sync_account.delay(42).duplicate_of == first.jid
    assert len(unique_keys(raw_redis)) == 4


def test_keyword_order_does_not_make_another_job(raw_redis):
    first = unique_jobs.by_account.apply_async(kwargs={"account_id": 1, "note": "a"})
    assert unique_jobs.by_account.apply_async(kwargs={"note": "a", "account_id": 1}).duplicate_of == first.jid


def test_unique_args_chooses_what_the_same_job_means(raw_redis):
    first = unique_jobs.by_account.delay(7, note="first")
    second = unique_jobs.by_account.delay(7, note="something else")
    assert second.duplicate_of == first.jid and not second.enqueued
    assert unique_jobs.by_account.delay(8, note="first").enqueued


def test_unique_until_start_is_written_in_the_payload(raw_redis):
    unique_jobs.held_until_start.delay("x")
    (job,) = queued(raw_redis)
    assert job["unique_until"] == "start"


def test_a_scheduled_jobs_lock_covers_the_delay_plus_unique_for(raw_redis):
    ref = unique_jobs.sync_account.apply_async((42,), countdown=3600)
    assert raw_redis.llen(keys.queue("default")) == 0
    (member,) = raw_redis.zrange(keys.SCHEDULE, 0, -1)
    assert json.loads(member)["jid"] == ref.jid
    (lock,) = unique_keys(raw_redis)
    assert (3600 + 599) * 1000 < raw_redis.pttl(lock) <= (3600 + 600) * 1000
    # The queued copy and the scheduled one are the same job: one lock.
    assert unique_jobs.sync_account.delay(42).duplicate_of == ref.jid
    assert unique_jobs.sync_account.perform_in(60, 42).duplicate_of == ref.jid


def test_set_and_apply_async_make_one_call_unique_or_change_its_lock(raw_redis):
    plain = djwork.job(name="tests.test_unique.plain")(lambda x: x)
    first = plain.set(unique_for=30).delay(1)
    assert plain.apply_async((1,), unique_for=30).duplicate_of == first.jid
    assert plain.delay(1).enqueued  # without unique_for the job is not unique
    (lock,) = unique_keys(raw_redis)
    assert 29_000 < raw_redis.pttl(lock) <= 30_000
    unique_jobs.sync_account.set(unique_until="start").delay(1)
    assert queued(raw_redis)[-1]["unique_until"] == "start"
    unique_jobs.sync_account.apply_async((2,), unique_for=dt.timedelta(seconds=5))
    assert queued(raw_redis)[-1]["unique_for"] == 5


@pytest.mark.parametrize("options, wrong", [
    ({"unique_until": "start"}, "unique_until and unique_args need unique_for"),
    ({"unique_for": 0}, "unique_for must be a positive number of seconds"),
    ({"unique_for": -5}, "unique_for must be a positive number of seconds"),
    ({"unique_for": True}, "unique_for must be a positive number of seconds"),
    ({"unique_for": float("nan")}, "unique_for must be a positive number of seconds"),
    ({"unique_for": "600"}, "unique_for must be a positive number of seconds"),
    ({"unique_for": 2e9}, "below 1e9"),
    ({"unique_for": 60, "unique_until": "finish"}, 'unique_until must be "success" or "start"'),
    ({"unique_for": 60, "unique_args": [1]}, "unique_args must be a callable"),
])
def test_bad_unique_options_are_refused_at_decoration_naming_the_job(options, wrong):
    with pytest.raises(OptionError, match=wrong) as raised:
        djwork.job(name="tests.test_unique.bad", **options)(lambda x: x)
    assert "tests.test_unique.bad" in str(raised.value)


def test_bad_per_call_options_are_refused_and_nothing_is_written(raw_redis):
    with pytest.raises(OptionError, match="unique_for must be"):
        unique_jobs.sync_account.set(unique_for=-1).delay(1)
    with pytest.raises(OptionError, match="unique_until must be"):
        unique_jobs.sync_account.apply_async((1,), unique_until="never")
    with pytest.raises(OptionError, match=re.escape("tests.unique_jobs.sync_account")):
        unique_jobs.sync_account.apply_async((1,), unique_for=float("inf"))
    plain = djwork.job(name="tests.test_unique.plain2")(lambda x: x)
    with pytest.raises(OptionError, match="unique_until needs unique_for"):
        plain.set(unique_until="start").delay(1)
    assert raw_redis.dbsize() == 0


def test_unique_args_that_fail_or_return_non_json_are_refused_naming_the_job(raw_redis):
    broken = djwork.job(name="tests.test_unique.broken", unique_for=60, unique_args=lambda x: 1 / 0)(lambda x: x)
    with pytest.raises(OptionError, match=re.escape("tests.test_unique.broken: unique_args failed")):
        broken.delay(1)
    odd = djwork.job(name="tests.test_unique.odd", unique_for=60, unique_args=lambda x: {x})(lambda x: x)
    with pytest.raises(TypeError, match=re.escape("tests.test_unique.odd: what unique_args returned")):
        odd.delay(1)
    assert raw_redis.dbsize() == 0


def test_delay_many_takes_each_lock_in_the_same_round_trip(raw_redis):
    first = unique_jobs.sync_account.delay(1)
    refs = unique_jobs.sync_account.delay_many([(1,), (2,), (2,), (3,)])
    assert [ref.enqueued for ref in refs] == [False, True, False, True]
    assert refs[0].duplicate_of == first.jid
    assert refs[2].duplicate_of == refs[1].jid
    assert [job["args"] for job in queued(raw_redis)] == [[1], [2], [3]]
    assert len(unique_keys(raw_redis)) == 3


def test_a_lock_key_of_the_wrong_type_is_named_and_nothing_is_pushed(raw_redis):
    unique_jobs.sync_account.delay(5)
    (lock,) = unique_keys(raw_redis)
    raw_redis.delete(lock, keys.queue("default"))
    raw_redis.rpush(lock, "junk")
    with pytest.raises(djwork.WrongTypeKey, match=f"{lock} holds a list, not the string") as raised:
        unique_jobs.sync_account.delay(5)
    assert raised.value.keys == (lock,)
    assert raw_redis.llen(keys.queue("default")) == 0


def test_a_failed_push_gives_the_lock_back(raw_redis):
    raw_redis.set(keys.queue("default"), "not a list")
    with pytest.raises(djwork.WrongTypeKey, match="queue:default holds a string, not the list"):
        unique_jobs.sync_account.delay(6)
    # No lock without a job behind it: the copy pushed once the queue is fixed is accepted.
    assert unique_keys(raw_redis) == {}
    raw_redis.delete(keys.queue("default"))
    assert unique_jobs.sync_account.delay(6).enqueued


def test_a_flushed_script_cache_costs_one_eval_and_the_lock_still_holds(raw_redis):
    first = unique_jobs.sync_account.delay(9)
    raw_redis.script_flush()
    assert unique_jobs.sync_account.delay(9).duplicate_of == first.jid
    raw_redis.script_flush()
    refs = unique_jobs.sync_account.delay_many([(10,), (10,)])
    assert [ref.enqueued for ref in refs] == [True, False]


def test_a_unique_delay_is_one_round_trip_with_no_check_before_the_push(raw_redis, redis_url):
    with FaultProxy.in_front_of(redis_url) as proxy, \
            override_settings(DJWORK={**settings.DJWORK, "REDIS_URL": proxy.url}):
        unique_jobs.sync_account.delay(0)  # pools a connection and caches the script
        before = len(proxy.commands)
        first = unique_jobs.sync_account.delay(1)
        again = unique_jobs.sync_account.delay(1)
        # One round trip each: the script (lock and push) and the listing SADD, written together.
        assert proxy.commands[before:] == ["EVALSHA", "SADD", "EVALSHA", "SADD"]
    assert first.enqueued and again.duplicate_of == first.jid


def test_a_lost_reply_is_not_replayed_and_enqueueing_again_names_the_first(raw_redis, redis_url):
    fast = {"SOCKET_TIMEOUT": 0.5, "CONNECT_TIMEOUT": 0.5, "REDIS_BACKOFF_BASE": 0.01, "REDIS_BACKOFF_CAP": 0.05}
    with FaultProxy.in_front_of(redis_url) as proxy, \
            override_settings(DJWORK={**settings.DJWORK, "REDIS_URL": proxy.url, **fast}):
        unique_jobs.sync_account.delay(0)
        fired = proxy.drop_next("EVALSHA")
        with pytest.raises(djwork.EnqueueError) as raised:
            unique_jobs.sync_account.delay(1)
        assert fired.is_set() and raised.value.written is None
        assert proxy.count("EVALSHA") == 2  # sent once: not replayed
        (lost_jid,) = raised.value.jids
        # The caller may safely try again: the lock says the first push landed.
        assert unique_jobs.sync_account.delay(1).duplicate_of == lost_jid
    assert [job["jid"] for job in queued(raw_redis)][-1] == lost_jid


def test_expiry_of_a_scheduled_job_counts_from_its_scheduled_time(raw_redis):
    before = time.time()
    unique_jobs.sync_account.apply_async((1,), countdown=600, expires=30)
    djwork.job(name="tests.test_unique.expiring", expires=60)(lambda x: x).apply_async((1,), countdown=3600)
    jobs = {json.loads(member)["class"]: (json.loads(member), score)
            for member, score in raw_redis.zrange(keys.SCHEDULE, 0, -1, withscores=True)}
    job, score = jobs["tests.unique_jobs.sync_account"]
    assert job["expires_at"] == pytest.approx(score + 30, abs=0.01)
    assert before + 630 <= job["expires_at"] <= time.time() + 630
    job, score = jobs["tests.test_unique.expiring"]
    assert job["expires_at"] == pytest.approx(score + 60, abs=0.01)
    # A datetime stays what it says.
    deadline = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    unique_jobs.sync_account.apply_async((2,), countdown=60, expires=deadline)
    assert any(json.loads(member).get("expires_at") == deadline.timestamp()
               for member in raw_redis.zrange(keys.SCHEDULE, 0, -1))
