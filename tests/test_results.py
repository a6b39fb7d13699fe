"""djwork.AsyncResult against the private Redis, without workers: one store shared with the Django Tasks
backend, the states read from a record, the clear errors (bad option, no job, timeout), and the result
specs the worker hands to its Lua steps.
"""

from __future__ import annotations

import pytest

import djwork
from djwork.redis import keys, scripts
from djwork.results import NoResult
from djwork.results import record as result_record
from djwork.settings.conf import get_config
from djwork.tasks_backend import DjworkBackend
from djwork.tasks_compat import TaskResultDoesNotExist, task_backends
from example import tasks as example_tasks
from tests import result_jobs


@pytest.fixture(autouse=True)
def results_on(settings):
    """These tests read jobs' states and results: stored, as in a Celery project with CELERY_RESULT_BACKEND
    set (RESULTS=True; results are opt-in, docs/celery.md). A test of results off turns them off itself."""
    settings.DJWORK = {**settings.DJWORK, "RESULTS": True}


def test_async_result_reads_a_django_tasks_record_from_the_same_store(raw_redis):
    task_result = example_tasks.multiply.enqueue(6, 7)
    ref = djwork.AsyncResult(task_result.id)
    assert ref.state == "PENDING"  # READY
    raw_redis.hset(keys.result(task_result.id), mapping={"status": "SUCCESSFUL", "return_value": "42"})
    assert ref.state == "SUCCESS" and ref.get(timeout=1) == 42


def test_the_django_backend_refuses_a_djwork_jobs_record(raw_redis):
    ref = result_jobs.add.delay(1, 1)
    raw_redis.hset(keys.result(ref.id), mapping={"state": "SUCCESS", "result": "2", "date_done": "1.5"})
    backend = task_backends["default"]
    assert isinstance(backend, DjworkBackend)
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result(ref.id)
    assert ref.get(timeout=1) == 2 and ref.date_done.timestamp() == 1.5


def test_get_of_a_pending_job_times_out_and_a_stopped_push_has_no_result(raw_redis):
    ref = result_jobs.add.delay(1, 1)
    with pytest.raises(djwork.ResultTimeout, match=ref.id):
        ref.get(timeout=0.2, interval=0.05)
    assert isinstance(djwork.ResultTimeout("x"), TimeoutError)
    with pytest.raises(NoResult, match="middleware"):
        djwork.JobRef(None).get(timeout=1)


def test_ignore_result_must_be_a_boolean():
    with pytest.raises(TypeError, match="ignore_result must be True or False"):
        result_jobs.add.apply_async((1, 1), ignore_result="yes")
    with pytest.raises(TypeError, match="ignore_result"):
        djwork.job(ignore_result=1)(lambda: None)
    with pytest.raises(TypeError, match="unknown option"):
        result_jobs.add.set(ignore_results=True)


def test_the_ack_keeps_a_revoked_record_and_writes_redis_time(raw_redis):
    spec = result_record.success_spec({"n": 1}, get_config())
    assert spec == "86400\nSUCCESS\n\n{\"n\":1}\n"
    raw_redis.hset("t:r", mapping={"state": "REVOKED"})
    raw_redis.zadd(keys.REVOKED, {"j1": 9e9})
    scripts.evaluate(raw_redis, "store_results", [keys.REVOKED, keys.RESULT_WAITERS],
                     ["j1", "t:r", spec, "j2", "t:s", spec])
    assert raw_redis.hget("t:r", "state") == b"REVOKED"
    assert raw_redis.hget("t:s", "state") == b"SUCCESS" and float(raw_redis.hget("t:s", "date_done")) > 1e9
    assert 0 < raw_redis.ttl("t:s") <= 86_400


def test_an_unstorable_value_becomes_a_clear_failure_spec(settings):
    settings.DJWORK = {**settings.DJWORK, "RESULT_MAX_BYTES": 10}
    assert "djwork.ResultNotStored" in result_record.success_spec(object(), get_config())
    too_big = result_record.success_spec("x" * 20, get_config())
    assert too_big.split("\n")[1] == "FAILURE" and "RESULT_MAX_BYTES (10)" in too_big


def test_one_call_writes_each_spec_as_its_own_record_and_ttl(raw_redis):
    # result_lib parses a spec once and reuses it for the acks after it that share it: a record
    # must never take a field or a TTL from the spec before it.
    config = get_config()
    none = result_record.success_spec(None, config)
    assert none == "86400\nSUCCESS\n\nnull\n" and result_record.success_spec(None, config) is none
    failure = result_record.spec(result_record.FAILURE, result_record.error_json("ValueError", "bad"), 100,
                                 "Traceback (most recent call last):\n  line 1\nValueError: bad")
    specs = [none, result_record.success_spec({"n": 1}, config), none, none, failure, none]
    args = [arg for number, spec in enumerate(specs) for arg in (f"j{number}", keys.result(f"j{number}"), spec)]
    assert scripts.evaluate(raw_redis, "store_results", [keys.REVOKED, keys.RESULT_WAITERS], args) == len(specs)
    records = [result_record.decode(raw_redis.hgetall(keys.result(f"j{number}"))) for number in range(len(specs))]
    assert [record["result"] for record in records] == ["null", '{"n":1}', "null", "null",
                                                        '{"exc_type":"ValueError","exc_message":"bad"}', "null"]
    assert [record["state"] for record in records] == ["SUCCESS"] * 4 + ["FAILURE", "SUCCESS"]
    assert records[4]["traceback"].endswith("ValueError: bad")
    assert ["traceback" in record for record in records] == [False] * 4 + [True, False]
    assert len({record["date_done"] for record in records}) == 1  # one TIME per call
    ttls = [raw_redis.ttl(keys.result(f"j{number}")) for number in range(len(specs))]
    assert 0 < ttls[4] <= 100 and all(86_000 < ttl <= 86_400 for i, ttl in enumerate(ttls) if i != 4)
    assert djwork.AsyncResult("j1").get(timeout=1) == {"n": 1} and djwork.AsyncResult("j5").get(timeout=1) is None
    assert djwork.AsyncResult("j4").state == "FAILURE" and djwork.AsyncResult("j4").traceback.endswith("bad")


def test_a_fetch_whose_acks_store_no_result_reads_no_result_guard(raw_redis):
    # The revoked/waiters EXISTS pair is read at a call's first result write, never for ignore_result acks.
    queue = keys.queue("guard")
    script_keys = [keys.PAUSED, keys.ORPHAN_COUNTS, keys.FINISHED_LATE, keys.REVOKED, keys.RESULT_WAITERS,
                   queue, f"{queue}:in-progress", f"{queue}:isolated", f"{queue}:lanes"]

    def exists_calls_of_an_ack(result_key: str, spec: str) -> int:
        raw_redis.config_resetstat()
        # The long form of an ack (a negative queue index: jid, locks, result key and spec follow).
        scripts.evaluate(raw_redis, "fetch", script_keys,
                         [0, "reliable", 1, 0, "guard", -1, '{"jid":"g1"}', "g1", "", result_key, spec])
        return raw_redis.info("commandstats").get("cmdstat_exists", {}).get("calls", 0)

    # One EXISTS per call guards the rarely present keys (fetch.lua); the result pair comes on top.
    assert exists_calls_of_an_ack("", "") == 1
    assert exists_calls_of_an_ack("t:g1", result_record.success_spec(None, get_config())) == 3
    assert raw_redis.hget("t:g1", "state") == b"SUCCESS"
