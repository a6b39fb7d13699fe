"""``pydantic=True`` on a job (Celery 5.5's option): arguments validated into their models, a model returned dumped.

A job's arguments travel as JSON, so a pydantic model crosses the queue as a
dict. With ``pydantic=True``, every argument annotated with a ``BaseModel``
subclass (or ``Model | None``) is validated into that model as the job starts
(``model_validate``, ``strict=pydantic_strict``, ``context=pydantic_context``
plus the job's name), and a returned model whose class is the return
annotation is stored as ``model_dump(mode="json", **pydantic_dump_kwargs)``.
A validation error is the job's exception, retried or failed by its rules.
docs/celery.md, Options.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any


def validating(func: Callable[..., Any], name: str, *, strict: bool = False,
               context: dict[str, Any] | None = None,
               dump_kwargs: dict[str, Any] | None = None) -> Callable[..., Any]:
    """``func`` wrapped to validate its model arguments and dump its model result (sync or async alike)."""
    try:
        import pydantic
    except ImportError as missing:
        raise ImportError(f"{name}: pydantic=True needs pydantic installed (pip install pydantic)") from missing
    if context is not None and not isinstance(context, dict):
        raise TypeError(f"{name}: pydantic_context must be a dict, got {context!r}")
    if dump_kwargs is not None and not isinstance(dump_kwargs, dict):
        raise TypeError(f"{name}: pydantic_dump_kwargs must be a dict, got {dump_kwargs!r}")
    dump = {"mode": "json", **(dump_kwargs or {})}
    validation_context = {**(context or {}), "djwork_job_name": name}
    signature = inspect.signature(func)
    hints = _hints(func)
    models = {parameter: model for parameter in signature.parameters
              if (model := _model_of(hints.get(parameter), pydantic.BaseModel)) is not None}
    returned_model = _model_of(hints.get("return"), pydantic.BaseModel)

    def arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        bound = signature.bind(*args, **kwargs)
        for parameter, model in models.items():
            value = bound.arguments.get(parameter)
            if parameter in bound.arguments and value is not None:
                bound.arguments[parameter] = model.model_validate(value, strict=strict, context=validation_context)
        return bound.args, bound.kwargs

    def result(value: Any) -> Any:
        # Only a model of the annotated class: a job that returns some other model meant to return it as is.
        if returned_model is not None and isinstance(value, returned_model):
            return value.model_dump(**dump)
        return value

    if inspect.iscoroutinefunction(func):
        @functools.wraps(func)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            args, kwargs = arguments(args, kwargs)
            return result(await func(*args, **kwargs))
        return run_async

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        args, kwargs = arguments(args, kwargs)
        return result(func(*args, **kwargs))
    return run


def _hints(func: Callable[..., Any]) -> dict[str, Any]:
    # Resolved, so a module with `from __future__ import annotations` (strings) works too; an annotation that
    # can't be resolved leaves its parameter unvalidated rather than failing the import.
    try:
        return typing.get_type_hints(func)
    except Exception:
        return {name: parameter.annotation for name, parameter in inspect.signature(func).parameters.items()}


def _model_of(annotation: Any, base: type) -> type | None:
    """The model class an annotation names: ``Model`` or ``Model | None`` (``Optional[Model]``), else None."""
    if isinstance(annotation, type) and issubclass(annotation, base):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [member for member in typing.get_args(annotation) if member is not type(None)]
        if len(members) == 1 and isinstance(members[0], type) and issubclass(members[0], base):
            return members[0]
    return None
