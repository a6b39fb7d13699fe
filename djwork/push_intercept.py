"""Where a push goes instead of Redis while a testing mode is on (djwork.testing) or ``ALWAYS_EAGER`` is set.

The client asks ``divert_for`` on every push (one list read when nothing is
on): the innermost ``djwork.testing.fake()``/``inline()`` block wins, then
``ALWAYS_EAGER``. This module imports nothing of djwork, so the client can
consult it and djwork.testing can fill it without an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# (payload, run-at epoch or None) -> the jid the push reports.
Divert = Callable[[dict[str, Any], "float | None"], "str | None"]

active: list[Divert] = []  # the open testing-mode blocks, innermost last
eager: Divert | None = None  # ALWAYS_EAGER's runner, registered by djwork.testing.modes at app start


def divert_for(always_eager: bool) -> Divert | None:
    if active:
        return active[-1]
    if always_eager:
        if eager is None:
            raise RuntimeError("DJWORK['ALWAYS_EAGER'] is set but djwork.testing.modes was not imported: add "
                               "'djwork' to INSTALLED_APPS (its ready() registers the eager runner)")
        return eager
    return None


def runs_at_push(always_eager: bool) -> bool:
    """Whether a push now runs the job at once (``ALWAYS_EAGER``, ``inline()``), not collects or writes it."""
    divert = active[-1] if active else (eager if always_eager else None)
    return divert is not None and divert is eager
