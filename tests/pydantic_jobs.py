"""Jobs for tests/test_pydantic_jobs.py: ``pydantic=True`` (docs/celery.md, Options)."""

from __future__ import annotations

import pydantic

import djwork


class Point(pydantic.BaseModel):
    x: int
    y: int


class Total(pydantic.BaseModel):
    result: int


class Tagged(pydantic.BaseModel):
    name: str

    @pydantic.field_validator("name")
    @classmethod
    def prefixed(cls, value: str, info: pydantic.ValidationInfo) -> str:
        # The job's context reaches the model's validators, with the job's name.
        context = info.context or {}
        return f"{context.get('prefix', '')}{value}@{context.get('djwork_job_name')}"


@djwork.shared_task(pydantic=True, ignore_result=False)
def add_points(point: Point) -> Total:
    return Total(result=point.x + point.y)


@djwork.shared_task(pydantic=True, ignore_result=False)
def maybe_point(point: Point | None = None, scale: int = 1) -> Point | None:
    return None if point is None else Point(x=point.x * scale, y=point.y * scale)


@djwork.shared_task(pydantic=True, pydantic_strict=True, ignore_result=False)
def strict_points(point: Point) -> int:
    return point.x + point.y


@djwork.shared_task(pydantic=True, pydantic_context={"prefix": "job:"}, ignore_result=False)
def tag(tagged: Tagged) -> str:
    return tagged.name


@djwork.shared_task(pydantic=True, pydantic_dump_kwargs={"exclude": {"y"}}, ignore_result=False)
def only_x(point: Point) -> Point:
    return point


@djwork.shared_task(bind=True, pydantic=True, ignore_result=False)
def bound(self, point: Point) -> Total:
    return Total(result=point.x * 10 + len(self.request.id))


@djwork.shared_task(pydantic=True, ignore_result=False)
async def async_points(point: Point) -> Total:
    return Total(result=point.x - point.y)


@djwork.shared_task(pydantic=True, ignore_result=False)
def returns_another_model(point: Point) -> Total:
    # Not the annotated class: returned as it is (Celery's rule), not dumped.
    return point
