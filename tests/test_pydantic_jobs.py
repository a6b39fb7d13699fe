"""``pydantic=True``: model arguments validated from the JSON a job travels as, a model result dumped.

Run at the call (``apply``) for the rules, then by a real worker: the payload holds a plain dict, the stored
result a plain dict, as Celery's option gives them (docs/celery.md, Options).
"""

from __future__ import annotations

import json

import pydantic
import pytest

import djwork
from tests import pydantic_jobs as jobs


def test_a_dict_argument_is_validated_into_its_model_and_a_model_result_dumped():
    assert jobs.add_points.apply(({"x": 2, "y": 3},)).get() == {"result": 5}


def test_an_optional_model_takes_none_and_a_dict():
    assert jobs.maybe_point.apply(()).get() is None
    assert jobs.maybe_point.apply(({"x": 1, "y": 2},), {"scale": 3}).get() == {"x": 3, "y": 6}


def test_invalid_arguments_fail_the_job_with_pydantics_error():
    result = jobs.add_points.apply(({"x": "not a number", "y": 1},))
    assert result.state == "FAILURE"
    with pytest.raises(pydantic.ValidationError, match="x"):
        result.get()


def test_strict_refuses_what_lax_mode_coerces():
    assert jobs.add_points.apply(({"x": "2", "y": 3},)).get() == {"result": 5}
    with pytest.raises(pydantic.ValidationError):
        jobs.strict_points.apply(({"x": "2", "y": 3},)).get()


def test_the_context_and_the_jobs_name_reach_the_models_validators():
    assert jobs.tag.apply(({"name": "n"},)).get() == "job:n@tests.pydantic_jobs.tag"


def test_dump_kwargs_shape_the_stored_result():
    assert jobs.only_x.apply(({"x": 1, "y": 2},)).get() == {"x": 1}


def test_a_bound_job_and_a_coroutine_job_validate_too():
    assert jobs.bound.apply(({"x": 1, "y": 0},), task_id="a" * 24).get() == {"result": 34}
    assert jobs.async_points.apply(({"x": 5, "y": 2},)).get() == {"result": 3}


def test_a_model_of_another_class_than_the_annotation_is_returned_as_it_is():
    assert jobs.returns_another_model.apply(({"x": 1, "y": 2},)).get() == jobs.Point(x=1, y=2)


def test_a_model_instance_as_an_argument_is_refused_at_the_call_naming_it():
    # Arguments are JSON: a model crosses the queue as a dict (model_dump()), as with Celery's option.
    with pytest.raises(Exception, match="argument"):
        jobs.add_points.delay(jobs.Point(x=1, y=2))


def test_the_pydantic_options_are_checked_when_the_job_is_declared():
    with pytest.raises(TypeError, match="pydantic_context must be a dict"):
        djwork.shared_task(name="tests.pydantic.bad_context", pydantic=True, pydantic_context=["x"])(
            lambda point: point)


def test_a_worker_runs_it_from_a_payload_holding_a_plain_dict(workers, raw_redis):
    ref = jobs.add_points.delay({"x": 20, "y": 22})
    (payload,) = [json.loads(raw) for raw in raw_redis.lrange("queue:default", 0, -1)]
    assert payload["args"] == [{"x": 20, "y": 22}]
    workers.start("-c", "1")
    assert ref.get(timeout=30) == {"result": 42}
    failing = jobs.add_points.delay({"x": "twenty"})
    with pytest.raises(Exception, match="validation error"):
        failing.get(timeout=30)
    assert failing.state == "FAILURE"
