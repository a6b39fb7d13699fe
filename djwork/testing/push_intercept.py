"""Where a push goes instead of Redis while a testing mode is on (djwork.testing) or ``ALWAYS_EAGER`` is set.

``DivertInTests`` is a hook of every push (djwork/client/push_hooks.py), asked
after client middleware where the Redis write would be (one list read when
nothing is on): the innermost ``djwork.testing.fake()``/``inline()`` block
wins, then ``ALWAYS_EAGER``. Of djwork this module imports only
djwork.client.push_hooks, so djwork.testing can fill it without an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from djwork.client.push_hooks import Pushed, PushHook

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


class DivertInTests(PushHook):
    """A push taken by the open testing mode, or by ``ALWAYS_EAGER``: collected or run, not written."""

    def route(self, payload: dict[str, Any], queue: str, later: float | None, now: float) -> Pushed | None:
        if not active and not self.config.always_eager:  # every push asks: no call when no mode is on
            return None
        divert = divert_for(self.config.always_eager)
        return None if divert is None else Pushed(divert(payload, later))
