"""Celery's twelve most common idioms, one by one, each with only the import swapped (issue #34, docs/celery.md).

The tasks (tests/celery_idiom_jobs.py) are written as in a Celery project; what Celery needs an app object for
(``app = Celery(...)``) raises at import, naming the change.
"""

from __future__ import annotations

import json

import pytest
from django.core import checks
from django.test import override_settings

import djwork
from djwork import chain, chord, group
from djwork.exceptions import TaskRevokedError
from djwork.schedules import crontab
from djwork.settings.conf import get_config
from djwork.worker.retry import decide
from tests import celery_idiom_jobs as tasks
from tests.helpers_worker import wait_until

NOW = 1_000_000.0


def test_1_autoretry_with_exponential_backoff_and_full_jitter():
    payload = {"class": tasks.flaky.name, "jid": "j", "queue": "default", "args": [],
               "retry": tasks.flaky.payload_retry}
    for retries, cap in ((0, 2), (1, 4), (2, 8), (3, 16)):
        waits = {decide({**payload, "retry_count": retries - 1} if retries else payload, tasks.Flaky(), tasks.flaky,
                        "default", 25, now=NOW).score - NOW for _ in range(200)}
        assert waits <= set(range(cap + 1)) and len(waits) > 1  # whole seconds in [0, 2 * 2**n], jittered
    assert decide({**payload, "retry_count": 3}, tasks.Flaky(), tasks.flaky, "default", 25).target == "dead"
    # Not an autoretry_for exception: Celery fails the task at once.
    assert decide(payload, ValueError(), tasks.flaky, "default", 25).target == "dead"


def test_2_apply_async_options_and_link_error_run_the_errback(workers, raw_redis):
    ref = tasks.fail.apply_async(("linked",), countdown=0.1, queue="low", expires=600,
                                 link_error=tasks.errback.s())
    workers.start("-c", "2", "-q", "low", "-q", "default")  # the errback runs on its own queue
    wait_until(lambda: raw_redis.lrange(tasks.NOTES, 0, -1), 30, "the errback to run")
    assert ref.id


def test_3_async_result_status_result_and_traceback(workers):
    ok = tasks.add.apply_async((2, 3), ignore_result=False)
    bad = tasks.fail.apply_async(("status",), ignore_result=False)
    workers.start("-c", "2")
    assert ok.get(timeout=30) == 5
    with pytest.raises(ValueError, match="task failed: status"):
        bad.get(timeout=30)
    result = djwork.AsyncResult(bad.id)
    assert (result.status, result.ready(), result.failed()) == ("FAILURE", True, True)
    assert isinstance(result.result, ValueError) and "task failed: status" in result.traceback
    assert (djwork.AsyncResult(ok.id).status, djwork.AsyncResult(ok.id).result) == ("SUCCESS", 5)


def test_4_5_6_group_chord_and_chain_get(workers):
    workers.start("-c", "4")
    assert group(tasks.add.s(i, i) for i in range(4)).apply_async().get(timeout=30) == [0, 2, 4, 6]
    assert chord(tasks.add.s(i, i) for i in range(4))(tasks.tsum.s()).get(timeout=30) == 12
    assert chain(tasks.add.s(1, 2), tasks.add.s(10)).apply_async().get(timeout=30) == 13
    assert (tasks.add.s(1, 1) | tasks.add.s(1) | tasks.add.s(1))().get(timeout=30) == 4


def test_7_set_queue_routes_one_call(raw_redis):
    ref = tasks.add.set(queue="low").delay(1, 2)
    queued = [json.loads(raw) for raw in raw_redis.lrange("queue:low", 0, -1)]
    assert [job["jid"] for job in queued] == [ref.id]


def test_8_revoke_before_it_runs():
    ref = tasks.add.apply_async((1, 2), countdown=3600, ignore_result=False)
    assert ref.revoke() is True
    assert djwork.AsyncResult(ref.id).state == "REVOKED"
    with pytest.raises(TaskRevokedError):  # celery.exceptions.TaskRevokedError, with the import swapped
        ref.get(timeout=5)


def test_9_beat_schedule_with_crontab_becomes_periodic_entries():
    schedule = {"nightly": {"task": tasks.nightly_report.name, "schedule": crontab(minute=30, hour=2),
                            "args": ("today",), "options": {"queue": "low"}},
                "every-five": {"task": tasks.add.name, "schedule": 300.0, "args": (1, 2)}}
    with override_settings(CELERY_BEAT_SCHEDULE=schedule, CELERY_TIMEZONE="Europe/Berlin"):
        entries = {entry["name"]: entry for entry in get_config().periodic}
        assert entries["nightly"] == {"name": "nightly", "cron": "30 2 * * *", "job": tasks.nightly_report.name,
                                      "args": ["today"], "kwargs": {}, "queue": "low", "tz": "Europe/Berlin"}
        assert entries["every-five"]["cron"] == "*/5 * * * *"
        assert [m for m in checks.run_checks() if m.id and m.id.startswith("djwork.")] == []


def test_10_task_routes_send_a_task_to_its_queue(raw_redis):
    routes = {tasks.add.name: {"queue": "low"}, "tests.celery_idiom_jobs.*": "critical"}
    with override_settings(CELERY_TASK_ROUTES=routes):
        added, summed = tasks.add.delay(1, 2), tasks.tsum.delay([1])
        explicit = tasks.add.apply_async((1, 2), queue="default")
    queued = {queue: [json.loads(raw)["jid"] for raw in raw_redis.lrange(f"queue:{queue}", 0, -1)]
              for queue in ("low", "critical", "default")}
    assert queued == {"low": [added.id], "critical": [summed.id], "default": [explicit.id]}


def test_11_always_eager_runs_tasks_and_canvases_with_no_redis():
    with override_settings(CELERY_TASK_ALWAYS_EAGER=True, DJWORK={"REDIS_URL": "redis://127.0.0.1:1/0"}):
        assert tasks.add.delay(2, 2).get() == 4
        assert group(tasks.add.s(i, 1) for i in range(3)).apply_async().get() == [1, 2, 3]
        assert chord([tasks.add.s(1, 1), tasks.add.s(2, 2)])(tasks.tsum.s()).get() == 6
        assert (tasks.add.s(1, 1) | tasks.add.s(5)).delay().get() == 7
        with pytest.raises(ValueError, match="task failed: eager"):
            tasks.fail.delay("eager")


def test_12_task_prerun_postrun_and_failure_receivers_connected_by_decorator():
    tasks.SIGNALLED.clear()
    assert callable(tasks.on_prerun) and callable(tasks.on_postrun) and callable(tasks.on_failure)
    tasks.add.apply((1, 1))
    tasks.fail.apply(("signalled",))
    assert [
        ("task_prerun", tasks.add.name), ("task_postrun", f"{tasks.add.name} SUCCESS"),
        ("task_prerun", tasks.fail.name), ("task_failure", f"{tasks.fail.name} task failed: signalled"),
        ("task_postrun", f"{tasks.fail.name} FAILURE")] == tasks.SIGNALLED


def test_the_celery_app_object_raises_at_import_naming_the_change():
    with pytest.raises(ImportError, match=r"djwork has no app object: delete the project's celery\.py"):
        from djwork import Celery  # noqa: F401


def test_a_celery_setting_djwork_does_not_read_is_a_warning_with_the_equivalent():
    with override_settings(CELERY_WORKER_PREFETCH_MULTIPLIER=4, CELERY_TASK_ANNOTATIONS={"*": {}},
                           CELERY_TASK_SERIALIZER="pickle", CELERY_TASK_ROUTES=lambda *a: None,
                           CELERY_TASK_ACKS_LATE=True, CELERY_BEAT_SCHEDULE={"x": {"task": "t", "schedule": 7}}):
        found = {(m.id, m.msg.split(" ")[0]): m.hint for m in checks.run_checks() if m.id.startswith("djwork.W01")}
    assert "each free thread takes one job" in found[("djwork.W010", "CELERY_WORKER_PREFETCH_MULTIPLIER")]
    assert "decorator" in found[("djwork.W010", "CELERY_TASK_ANNOTATIONS")]
    assert ("djwork.W011", "CELERY_TASK_SERIALIZER") in found
    assert ("djwork.W011", "CELERY_TASK_ROUTES") in found
    assert ("djwork.W011", "CELERY_BEAT_SCHEDULE") in found
    assert not any(setting == "CELERY_TASK_ACKS_LATE" for _id, setting in found)
