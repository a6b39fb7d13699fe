"""Jobs revoked now (``djwork.revoke``, docs/celery.md): the dashboard's short "Revoked" list.

Read from the ``djwork:revoked`` ZSET (jid -> until when the revoke holds),
newest first, with each job's result state where it has a record.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Any

from djwork.api import access
from djwork.api.records import text, to_datetime
from djwork.redis import keys
from djwork.results import record as result_record

SHOWN = 20  # a short list: revokes are rare, and each one is searchable by jid on the other pages


@dataclass(frozen=True)
class RevokedJob:
    jid: str
    until: dt.datetime | None  # when the revoke stops holding (a later fetch would run the job)
    state: str  # its result state (REVOKED, or SUCCESS/FAILURE when it had finished already)


class Revoked:
    @staticmethod
    def recent(count: int = SHOWN) -> list[RevokedJob]:
        now = time.time()

        def read(conn: Any) -> list[RevokedJob]:
            pipe = conn.pipeline(transaction=False)
            pipe.type(keys.REVOKED)
            pipe.zrevrangebyscore(keys.REVOKED, "+inf", f"({now}", start=0, num=count, withscores=True)
            kind, pairs = pipe.execute(raise_on_error=False)
            if text(kind) != "zset" or not isinstance(pairs, list):
                return []  # absent, or a wrong-type key: nothing to show
            jids = [text(member) for member, _score in pairs]
            states = conn.pipeline(transaction=False)
            for jid in jids:
                states.hget(keys.result(jid), "state")
            found = states.execute(raise_on_error=False)
            return [RevokedJob(jid, to_datetime(score), text(state) if isinstance(state, bytes) else
                               result_record.PENDING)
                    for jid, (_member, score), state in zip(jids, pairs, found, strict=True)]

        return access.read(read)
