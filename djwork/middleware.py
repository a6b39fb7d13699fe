"""Client and server middleware chains, built once from settings.

Client middleware: ``middleware(payload, queue, call_next) -> payload | None``.
It may edit the payload; returning None (not calling ``call_next``) stops the
push, as a Sidekiq client middleware that does not ``yield``.

Server middleware: ``middleware(job, payload, queue, call_next) -> result``;
it wraps the job's execution and must call ``call_next()`` for the job to run.

Entries in ``CLIENT_MIDDLEWARE`` / ``SERVER_MIDDLEWARE`` are dotted paths or
callables; a class is instantiated once with no arguments.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.utils.module_loading import import_string


def _resolve(entry: Any) -> Callable[..., Any]:
    item = import_string(entry) if isinstance(entry, str) else entry
    if isinstance(item, type):
        item = item()
    if not callable(item):
        raise TypeError(f"middleware {entry!r} is not callable")
    return item


def resolve_all(entries: tuple[Any, ...] | list[Any]) -> tuple[Callable[..., Any], ...]:
    return tuple(_resolve(entry) for entry in entries)


def run_client_chain(chain: tuple[Callable[..., Any], ...], payload: dict[str, Any],
                     queue: str) -> dict[str, Any] | None:
    if not chain:
        return payload

    def step(index: int, current: dict[str, Any]) -> dict[str, Any] | None:
        if index == len(chain):
            return current
        return chain[index](current, queue, functools.partial(step, index + 1, current))

    return step(0, payload)


def build_server_chain(chain: tuple[Callable[..., Any], ...],
                       execute: Callable[[], Any], job: Any, payload: dict[str, Any],
                       queue: str) -> Callable[[], Any]:
    """Wrap ``execute`` in the server middleware, outermost first."""
    call = execute
    for middleware in reversed(chain):
        call = functools.partial(middleware, job, payload, queue, call)
    return call
