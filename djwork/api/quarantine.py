"""Keys the key guard moved aside: a key that held the wrong type, kept 30 days under djwork:quarantine:*.

Shown on the dashboard's overview: a wrong-type key means somebody wrote to
djwork's keys by hand or with a bug, and the jobs or entries it held are in
the copy, not lost, until someone looks.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from djwork.api import access
from djwork.api.records import text
from djwork.redis import keys
from djwork.redis.key_layout import Layout, layout_of


@dataclass(frozen=True)
class QuarantinedKey:
    copy: str  # where it is now: djwork:quarantine:<key>:<ms>:<random> (a cluster's: <key> maybe {<key>})
    key: str  # the key it was
    moved_at: dt.datetime | None
    type: str  # what the copy holds ("none" once it expired)


class Quarantine:
    @staticmethod
    def recent(count: int = 20) -> list[QuarantinedKey]:
        """The newest moves first, from the guard's index (two round trips, reads only)."""
        layouts: list[Layout] = []

        def index(conn: Any) -> Any:
            layouts[:] = [layout_of(conn)]
            return conn.pipeline(transaction=False).zrevrange(keys.QUARANTINE_INDEX, 0, count - 1, withscores=True) \
                .execute(raise_on_error=False)[0]

        entries = access.read(index)
        if not isinstance(entries, list) or not entries:
            return []
        copies = [text(member) for member, _score in entries]

        def types(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for copy in copies:
                pipe.type(copy)
            return pipe.execute(raise_on_error=False)

        found = access.read(types)
        out = []
        for (_member, score), copy, kind in zip(entries, copies, found, strict=True):
            # A cluster's copy may carry its key wrapped in braces, to stay in the key's slot.
            original = layouts[0].quarantined_key(copy)
            moved = dt.datetime.fromtimestamp(float(score) / 1000, tz=dt.UTC) if score else None
            out.append(QuarantinedKey(copy, original, moved, text(kind) if not isinstance(kind, Exception) else "?"))
        return out
