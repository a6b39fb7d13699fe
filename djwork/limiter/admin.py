"""Reset and delete a limiter by name, on a connection the caller chose (djwork.api uses its admin pool).

Both go through the limiter's Lua scripts: a concurrent limiter's holdings
are also listed in the global holdings index, and the slots a reset frees go
to its waiters at once.
"""

from __future__ import annotations

from typing import Any

from djwork.limiter.concurrency import script_keys, wake
from djwork.limiter.rate import rate_keys
from djwork.redis import scripts


def reset(conn: Any, name: str) -> int:
    """Forget what the limiter has used (slots held, the bucket's count, the window, the level).

    Stats are kept. Returns the number of concurrent slots freed.
    """
    scripts.evaluate(conn, "limiter_rate", rate_keys(name), ["reset", name])
    reply = list(scripts.evaluate(conn, "limiter_concurrent", script_keys(name), ["reset", name]))
    wake(conn, [(name, value.decode() if isinstance(value, bytes) else str(value)) for value in reply[2:]])
    return int(reply[0])


def delete(conn: Any, name: str) -> int:
    """Remove every key of the limiter and its registry entry; its next use registers it again."""
    freed = int(scripts.evaluate(conn, "limiter_concurrent", script_keys(name), ["delete", name])[0])
    scripts.evaluate(conn, "limiter_rate", rate_keys(name), ["delete", name])
    return freed
