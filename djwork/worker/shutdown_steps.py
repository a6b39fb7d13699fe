"""The steps of a worker's shutdown, each guarded on its own, and one line for what Redis being gone left undone.

Every step runs whatever the previous one did: one failing release must never
skip the ones after it. A step that failed because Redis is unreachable is not
a bug worth a traceback: it is logged at DEBUG and named, with the others, in
one WARNING when the shutdown ends (a Redis gone during a drain wrote 26
tracebacks in 2 s, none saying more than "unreachable").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from djwork.redis.outage import is_outage_error
from djwork.redis.outage import tracker as outage

logger = logging.getLogger("djwork.worker")


# What a step left undone, in words, when Redis could not be reached for it.
UNDONE = {
    "leader": "release the leader lease (it lapses on its own)",
    "stats": "write the last stats window",
    "heartbeat-clear": "remove this process from `processes` (its entry expires on its own)",
    "history": "write the last history entries",
    "limiter-identity": "forget this process's limiter slots (the reaper frees them)",
}


class ShutdownSteps:
    """One Launcher's guarded steps, and the steps an unreachable Redis left undone during its shutdown."""

    def __init__(self) -> None:
        self.unreached: list[str] = []  # labels of the steps Redis being unreachable left undone, in order
        self.shutting_down = False  # a quiet (TSTP) runs these steps too, and its failures keep their traceback

    def begin(self) -> None:
        """The shutdown started: from here on a step Redis could not be reached for is said in report()."""
        self.shutting_down = True

    def run(self, label: str, step: Callable[..., Any], *args: Any) -> None:
        """Run ``step(*args)``; a failure is logged (or, for an unreachable Redis, remembered), never raised."""
        try:
            step(*args)
        except Exception as error:
            if self.shutting_down and is_outage_error(error):
                outage.failed(f"shutdown {label}", error)  # declares the outage on the first one (shutting_down)
                if label not in self.unreached:
                    self.unreached.append(label)
                logger.debug("djwork: shutdown step %s failed: Redis unreachable", label, exc_info=True)
            else:
                logger.exception("djwork: shutdown step %s failed", label)

    def report(self) -> None:
        """The one line naming what the shutdown could not do for want of Redis (nothing if it did it all)."""
        if self.unreached:
            logger.warning("djwork: Redis at %s unreachable during the shutdown; could not %s", outage.location,
                           "; ".join(UNDONE.get(label, f"finish its {label} step") for label in self.unreached))
            self.unreached = []
