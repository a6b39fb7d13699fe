"""Iterable jobs' saved progress (docs/iterable.md): what the Busy page shows beside a running iterable job."""

from __future__ import annotations

from collections.abc import Sequence

from djwork.api.access import read
from djwork.iterable.state import Progress, parse
from djwork.redis import keys


class Iterations:
    @staticmethod
    def of(jids: Sequence[str]) -> dict[str, Progress]:
        """The saved progress of each of ``jids`` that has one, in one round trip (MGET); a state that is
        not djwork's is left out rather than break the page."""
        wanted = [jid for jid in dict.fromkeys(jids) if jid]
        if not wanted:
            return {}
        values = read(lambda conn: conn.mget([keys.iteration(jid) for jid in wanted]))
        found: dict[str, Progress] = {}
        for jid, raw in zip(wanted, values, strict=True):
            if raw is None:
                continue
            try:
                found[jid] = parse(jid, raw)
            except ValueError:
                continue
        return found
