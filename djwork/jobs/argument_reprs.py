"""Celery's ``argsrepr`` / ``kwargsrepr`` call options: what logs and pages show instead of the arguments.

A caller hides a secret argument (a token, a card number) by giving the text to show in its place:
``charge.apply_async((card,), argsrepr="(<card>,)")``. The texts ride in the payload's ``argsrepr`` and
``kwargsrepr`` fields (Sidekiq ignores extra fields); the job still receives its real arguments. The
dashboard, ``manage.py djwork job``/``jobs`` and Celery's trace log records (djwork/worker/trace_log.py)
show the texts, and never the arguments they replace. docs/celery.md.
"""

from __future__ import annotations

from typing import Any

from djwork.options import OptionError

NAMES = ("argsrepr", "kwargsrepr")


def take(options: dict[str, Any], where: str) -> dict[str, Any]:
    """Pop ``argsrepr``/``kwargsrepr`` out of a call's ``options``: the payload fields they add."""
    fields: dict[str, Any] = {}
    for name in NAMES:
        value = options.pop(name, None)
        if value is None:
            continue
        if not isinstance(value, str):
            # A tuple or dict here is usually the real arguments passed by mistake: they would be shown.
            raise OptionError(f"{where}: {name} must be the text to show in place of the arguments (a string), "
                              f"got {type(value).__name__}")
        fields[name] = value
    return fields


def shown(payload: dict[str, Any], args: Any, kwargs: Any) -> tuple[str, str]:
    """The ``(args, kwargs)`` texts a log record shows: the reprs given, else Celery's repr of the arguments."""
    argsrepr = payload.get("argsrepr")
    kwargsrepr = payload.get("kwargsrepr")
    return (argsrepr if isinstance(argsrepr, str) and argsrepr else repr(tuple(args or ())),
            kwargsrepr if isinstance(kwargsrepr, str) and kwargsrepr else repr(dict(kwargs or {})))
