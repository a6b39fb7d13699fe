"""Keys a WRONGTYPE was met on, reported for a worker's key guard to move aside.

The guard's sweep checks keys it can list (the fixed ones, the queues, the
processes); a key under a prefix (``unique:<digest>``,
``djwork:limiter:<name>``, ``djwork:periodic:state:<entry>``) can't be
listed without scanning the keyspace, so a ``unique:`` lock rewritten as a
HASH made its job's ``delay()`` raise forever. Instead, whoever meets the
WRONGTYPE (a client's push, a script, a worker's pipeline) has already
named the key (djwork.redis.key_types.name_culprits); ``report_commands`` gives
the writes that record it in ``djwork:key-guard:reported``, sent by the
caller on the connection it already holds, and the worker's guard
(djwork/worker/key_guard.py) checks the reported keys every few seconds.
The cost is one ZADD per error and one ZRANGE per guard tick, whatever
the number of keys in Redis.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from djwork.redis import keys
from djwork.redis.key_types import WrongTypeKey

logger = logging.getLogger("djwork.key_guard")

REPORTS_KEPT = 1000  # a flood of distinct bad keys keeps the newest reports, not an unbounded set


def report_commands(error: WrongTypeKey) -> list[tuple[Any, ...]]:
    """The commands that report ``error``'s culprits djwork's table places (none for the others)."""
    culprits = [key for key in error.keys if error.expected.get(key)]
    if not culprits:
        return []
    now_ms = int(time.time() * 1000)
    pairs = [part for key in culprits for part in (now_ms, key)]
    return [("ZADD", keys.KEY_GUARD_REPORTED, *pairs),
            ("ZREMRANGEBYRANK", keys.KEY_GUARD_REPORTED, 0, -(REPORTS_KEPT + 1))]


def report(error: WrongTypeKey, send: Callable[[list[tuple[Any, ...]]], Any]) -> None:
    """Record ``error``'s culprits through ``send(commands)``; a failure is logged, never raised.

    The WRONGTYPE being reported is the error the caller must see: a report
    that can't be written (Redis gone, the reports key itself the wrong
    type, which the guard's sweep repairs) must not replace it.
    """
    report_all(report_commands(error), send)


def report_all(commands: list[tuple[Any, ...]], send: Callable[[list[tuple[Any, ...]]], Any]) -> None:
    """Send report commands (``report_commands`` of one or more errors) in one round trip; never raises."""
    if not commands:
        return
    try:
        send(commands)
    except Exception as failure:
        reported = [str(part) for command in commands if command[0] == "ZADD" for part in command[3::2]]
        logger.warning("djwork: could not report %s to the key guard: %s", ", ".join(reported), failure)


def on_client(conn: Any) -> Callable[[list[tuple[Any, ...]]], Any]:
    """A ``send`` for ``report`` that pipelines the commands on a redis-py client (one round trip)."""
    def send(commands: list[tuple[Any, ...]]) -> Any:
        pipe = conn.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return pipe.execute(raise_on_error=False)

    return send
