"""Sidekiq's remote signals (``<identity>-signals``) as a worker takes them: counted in beats, not timed."""

from __future__ import annotations

import signal
from typing import Any

from tests.helpers_worker import wait_until


def assert_quiet_with_the_beat_that_took_the_signal(redis: Any, identity: str, timeout: float = 30.0) -> None:
    """Wait for quiet=true in the process hash; check it came with the beat that drained the signal list.

    Sidekiq promises quiet within two beats. A beat drains the list, says
    quiet, then writes its own stamp: from the drain on, at most two stamps
    (the one before that beat and its own) may be seen before quiet=true,
    however late a loaded machine runs the beat. Stamps a slow poll missed are
    not counted, so the check can pass a late quiet but never fails an early one.
    """
    stamps: list[bytes | None] = []

    def quiet_reported() -> bool:
        pending, beat, quiet = (redis.pipeline(transaction=True).llen(f"{identity}-signals")
                                .hget(identity, "beat").hget(identity, "quiet").execute())
        if not pending and (not stamps or stamps[-1] != beat):
            stamps.append(beat)
        return quiet == b"true" and bool(stamps)

    wait_until(quiet_reported, timeout, f"{identity} to report quiet")
    assert len(stamps) <= 2, f"quiet=true came {len(stamps) - 1} beats after the one that took the signal"


def interruptible() -> None:
    """A ``preexec_fn``: the child starts with Ctrl-C's default action, as a command typed at a terminal does.

    A suite started in the background by a non-interactive shell (``./dev test &``, a CI runner) inherits
    SIGINT ignored, and an exec keeps an ignored signal: the child never saw the test's Ctrl-C (Python
    installs no handler, bash can't trap it), and the Ctrl-C tests timed out in every such run.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
