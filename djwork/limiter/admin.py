"""Reset and delete a limiter by name, on a connection the caller chose (djwork.api uses its admin pool).

Both go through the limiter's Lua scripts: a concurrent limiter's holdings
are also listed in the global holdings index, and the slots a reset frees go
to its waiters at once.
"""

from __future__ import annotations

from typing import Any

from djwork.limiter.concurrency import script_keys, wake
from djwork.limiter.rate import rate_keys
from djwork.redis import keys, scripts
from djwork.redis.key_layout import layout_of


def reset(conn: Any, name: str) -> int:
    """Forget what the limiter has used (slots held, the bucket's count, the window, the level).

    Stats are kept. Returns the number of concurrent slots freed.
    """
    layout = layout_of(conn)
    scripts.evaluate(conn, "limiter_rate", rate_keys(layout.limiter(name)), ["reset", name])
    reply = list(scripts.evaluate(conn, "limiter_concurrent", script_keys(layout, name), ["reset", name]))
    wake(conn, [(name, value.decode() if isinstance(value, bytes) else str(value)) for value in reply[2:]])
    return int(reply[0])


def delete(conn: Any, name: str) -> int:
    """Remove every key of the limiter and its registry entry; its next use registers it again.

    On a cluster the registry entry goes last, in its own slot: a crash before leaves a listed limiter
    with no keys, which the listing shows as empty and which leaves the registry by its ttl.
    """
    layout = layout_of(conn)
    freed = int(scripts.evaluate(conn, "limiter_concurrent", script_keys(layout, name), ["delete", name])[0])
    scripts.evaluate(conn, "limiter_rate", rate_keys(layout.limiter(name)), ["delete", name])
    if layout.cluster:
        conn.zrem(keys.LIMITERS, name)
    return freed
