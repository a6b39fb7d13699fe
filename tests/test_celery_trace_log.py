"""Celery's trace log records (``CELERY_TRACE_LOG``) and message properties under real ``runworkers``.

The worker's stderr carries the ``celery`` loggers' records with their ``data`` dict
(tests/settings_worker.py's ``celery_record`` format); each test waits for the records or the result.
"""

from __future__ import annotations

import ast
import re

import pytest

from tests import celery_demo_jobs as demo
from tests import celery_gap_jobs
from tests import celery_guide_jobs as guide
from tests.helpers_worker import wait_until

RECORD = re.compile(r"^celery-record (\S+) (\w+) data=(\{.*?\}) \| (.*)$", re.MULTILINE)
SECRET = "sk_live_do_not_show"


@pytest.fixture(autouse=True)
def results_on(settings):
    settings.DJWORK = {**settings.DJWORK, "RESULTS": True}


def records(worker, jid: str) -> list[tuple[str, str, dict, str]]:
    found = []
    for name, level, data, message in RECORD.findall(worker.log()):
        data = ast.literal_eval(data)
        if data["id"] == jid:
            found.append((name, level, data, message))
    return found


def test_the_worker_writes_celerys_records_with_the_reprs_in_place_of_the_arguments(workers):
    ok = demo.add.s(SECRET, "x").set(argsrepr="(<card>, 'x')", kwargsrepr="{}").delay()
    failing = guide.raising_task.apply_async(("bad",), argsrepr="CUSTOM ARGS", kwargsrepr="CUSTOM KWARGS")
    plain = demo.add.delay(2, 2)
    worker = workers.start(overrides={"CELERY_TRACE_LOG": True})
    assert ok.get(timeout=30) == SECRET + "x" and plain.get(timeout=30) == 4
    wait_until(lambda: len(records(worker, failing.id)) == 2, 30, "the failed job's two records")

    (received, succeeded) = records(worker, ok.id)
    assert received[:2] == ("celery.worker.strategy", "INFO")
    assert received[2] == {"id": ok.id, "name": "tests.celery_demo_jobs.add", "args": "(<card>, 'x')",
                           "kwargs": "{}", "eta": None}
    assert received[3] == f"Task tests.celery_demo_jobs.add[{ok.id}] received"
    assert succeeded[:2] == ("celery.app.trace", "INFO")
    data = succeeded[2]
    assert (data["args"], data["kwargs"], data["return_value"]) == ("(<card>, 'x')", "{}", repr(SECRET + "x"))
    assert isinstance(data["runtime"], float) and data["runtime"] >= 0
    assert succeeded[3] == (f"Task tests.celery_demo_jobs.add[{ok.id}] succeeded in {data['runtime']}s: "
                            f"{data['return_value']}")

    (received, raised) = records(worker, failing.id)
    assert received[2]["args"] == "CUSTOM ARGS" and received[2]["kwargs"] == "CUSTOM KWARGS"
    assert raised[:2] == ("celery.app.trace", "ERROR")
    assert raised[2]["exc"] == "ValueError('bad')" and raised[2]["description"] == "raised unexpected"
    assert raised[3] == f"Task tests.celery_guide_jobs.raising_task[{failing.id}] raised unexpected: ValueError('bad')"
    assert (raised[2]["args"], raised[2]["kwargs"]) == ("CUSTOM ARGS", "CUSTOM KWARGS")

    # Without reprs, Celery's repr of the arguments.
    assert [record[2]["args"] for record in records(worker, plain.id)] == ["(2, 2)", "(2, 2)"]
    # The secret is in no log line of the worker (the djwork logger's lines never carry arguments).
    assert SECRET not in "\n".join(line for line in worker.log().splitlines() if "return_value" not in line)


def test_records_are_off_by_default(workers):
    ref = demo.add.delay(1, 1)
    worker = workers.start()
    assert ref.get(timeout=30) == 2
    wait_until(lambda: f"done jid={ref.id}" in worker.log(), 10, "the job's done line")
    assert "celery-record" not in worker.log()


def test_a_job_reads_the_message_properties_its_call_gave(workers, raw_redis):
    ref = celery_gap_jobs.returns_properties.apply_async(app_id="1234", user_id="guest", delivery_mode=2,
                                                         priority=3)
    plain = celery_gap_jobs.returns_properties.delay()
    workers.start()
    assert ref.get(timeout=30) == {"correlation_id": ref.id, "app_id": "1234", "user_id": "guest",
                                   "delivery_mode": 2, "priority": 3}
    assert plain.get(timeout=30) == {"correlation_id": plain.id}
