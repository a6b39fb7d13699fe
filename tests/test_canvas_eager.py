"""``apply()`` of a signature and of every canvas shape: run now, in this process, with nothing sent."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ImproperlyConfigured

import djwork
from tests import canvas_jobs as cj


def test_apply_runs_each_shape_in_process_and_sends_nothing(raw_redis):
    assert cj.add.s(1, 2).apply().get() == 3
    assert cj.add.s(2).apply((1,)).get() == 3  # a partial, as apply_async
    assert djwork.chain(cj.add.s(1, 2), cj.mul.s(10)).apply().get() == 30
    assert djwork.group(cj.add.s(1, 1), djwork.chain(cj.add.s(1, 2), cj.mul.s(2))).apply().get() == [2, 6]
    assert djwork.chord([cj.add.s(1, 1), cj.add.s(2, 2)], cj.tsum.s()).apply().get() == 6
    nested = djwork.chain(cj.add.s(1, 1), djwork.group(cj.add.s(1), cj.mul.s(3)), cj.tsum.s())
    assert nested.apply().get() == 3 + 6
    # replace() in an eager run returns the replacement's value, run eagerly too (Celery's on_replace)
    assert cj.replaced_by.apply((1, "chain")).get() == 20
    with pytest.raises(ImproperlyConfigured, match="Cannot replace with an empty chain"):  # Celery's error
        cj.replaced_by.apply((1, "empty")).get()
    assert raw_redis.keys("*") == [b"t:canvas:calls"]  # only what the jobs noted: no queue, no batch


def test_apply_stops_at_a_failure_and_reraises_it():
    result = djwork.chain(cj.add.s(1, 1), cj.fails.s(), cj.mul.s(2)).apply()
    assert result.state == "FAILURE"
    with pytest.raises(cj.ExpectedError):
        result.get()
    with pytest.raises(cj.ExpectedError):
        djwork.group(cj.add.s(1, 1), cj.fails.s("x")).apply().get()


def test_freeze_reserves_the_id_the_job_will_run_as():
    sig = cj.add.s(1, 2)
    assert sig.id is None
    frozen = sig.freeze()
    assert frozen is sig and len(frozen.id) == 24 and sig.freeze().id == frozen.id  # reserved once
    assert sig.apply().id == frozen.id


def test_freezing_a_canvas_reserves_every_tasks_id():
    steps = djwork.chain(cj.add.s(1, 2), djwork.group(cj.add.s(1), cj.mul.s(2)), cj.tsum.s()).freeze()
    assert steps.tasks[0].id and all(task.id for task in steps.tasks[1].tasks)
    assert steps.id == steps.tasks[-1].id  # the chain's id is its last task's
    chorded = djwork.chord([cj.add.s(1, 1)], cj.tsum.s()).freeze()
    assert chorded.header[0].id and chorded.body.id


def test_task_apply_runs_its_errback_in_process_old_style_with_the_id_new_style_with_the_request(raw_redis):
    old = cj.fails.apply(("old",), link_error=cj.errback_old.s())
    new = cj.fails.apply(("new",), task_id="f" * 24, link_error=cj.errback_new.s(tag="eager"))
    linked = cj.add.apply((2, 3), link=cj.record.s("after"))
    assert (old.state, new.state, linked.get()) == ("FAILURE", "FAILURE", 5)
    assert isinstance(old.get(propagate=False), cj.ExpectedError)
    errors = [json.loads(raw) for raw in raw_redis.lrange(cj.ERRORS, 0, -1)]
    assert errors[0] == {"tag": "old", "task_id": old.id}
    assert (errors[1]["task_id"], errors[1]["exc"], errors[1]["traceback"]) == ("f" * 24, "ExpectedError", True)
    assert "after 5" in [raw.decode() for raw in raw_redis.lrange(cj.CALLS, 0, -1)]
    with pytest.raises(TypeError, match="only task_id="):
        cj.fails.apply(("x",), link_error=cj.errback_old.s(), throw=True)
