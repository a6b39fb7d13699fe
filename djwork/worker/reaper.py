"""Reaper: orphan recovery for reliable fetch.

Every REAPER_INTERVAL (and once at boot) any process looks at the registry
of in-progress lists; a list whose owner has not beaten for ORPHAN_THRESHOLD
seconds (Redis's clock) is requeued atomically by recover_orphans.lua. A job
recovered more than MAX_ORPHANINGS times is taken for one that kills
whatever runs it (a poison pill): it goes to `dead` instead, with an error
saying so, rather than crash every process that picks it up, forever. Every
job running in a crashed process is counted, so a job recovered twice is
isolated (recover_orphans.lua, fetch.lua): taken at most one per process at
a time, so that later crashes count against the one suspect running beside
fresh jobs, and the bystanders of a poison pill are not buried with it.
"""

from __future__ import annotations

import logging
import random
import time

from djwork import dead, job_locks, limiter
from djwork import redis as redis_layer
from djwork.payload import PayloadError, StoredPayload, dumps, loads, stored_payload
from djwork.redis import keys, scripts
from djwork.results import record as result_record
from djwork.settings.conf import Config
from djwork.worker.component import PeriodicComponent
from djwork.worker.fetch import ISOLATE_AFTER_RECOVERIES

logger = logging.getLogger("djwork.worker")

POISON_ERROR = "djwork.PoisonPill"


class Reaper(PeriodicComponent):
    name = "reaper"
    # How a poison pill is filed in `dead` (dead.file_failure's arguments); a cluster's reaper files in steps.
    file_failure = staticmethod(dead.file_failure)

    def __init__(self, config: Config, own_in_progress_keys: list[str]) -> None:
        super().__init__()
        self.config = config
        # This process's own lists are never orphans, however its beat looks.
        self.own_in_progress_keys = frozenset(own_in_progress_keys)

    def interval(self) -> float:
        return self.config.reaper_interval * (0.75 + random.random() / 2)

    def first_delay(self) -> float:
        return 0.0

    def tick(self) -> None:
        self.recover()

    def recover(self) -> int:
        """Requeue every orphaned in-progress list; returns the number of jobs requeued."""
        members = redis_layer.run(lambda conn: conn.smembers(keys.IN_PROGRESS_REGISTRY), idempotent=True)
        own = self.own_in_progress_keys
        total = 0
        for member in members:
            list_key = member.decode()
            if list_key in own:
                continue
            parsed = keys.parse_in_progress(list_key)
            if parsed is None:
                continue
            identity, queue = parsed
            try:
                total += self._recover_list(list_key, identity, queue)
            except Exception:
                logger.exception("djwork: orphan recovery of %s failed", list_key)
        return total

    def _recover_list(self, list_key: str, identity: str, queue: str) -> int:
        # Not replayed: a replay would count every job's orphaning twice.
        reply = redis_layer.run(lambda conn: scripts.evaluate(conn, "recover_orphans", [
            list_key, keys.queue(queue), keys.BEATS, keys.ORPHAN_COUNTS, keys.IN_PROGRESS_REGISTRY,
            keys.isolated(queue), keys.lanes(queue),
        ], [identity, self.config.orphan_threshold, self.config.max_orphanings, ISOLATE_AFTER_RECOVERIES, queue]))
        if int(reply[0]) == 0:
            return 0
        # The owner is dead (decided on Redis's clock above): its concurrent limiter slots go
        # now, in the same pass, rather than when each slot's lock_timeout runs out.
        try:
            limiter.release_slots_of(identity)
        except Exception:
            logger.exception("djwork: freeing the limiter slots of dead process %s failed", identity)
        requeued = int(reply[1])
        poison = [stored_payload(raw) for raw in reply[2:]]
        if requeued:
            logger.warning("djwork: recovered %d job(s) of dead process %s from queue %s",
                           requeued, identity, queue)
        for raw in poison:
            self._bury(list_key, raw, identity, queue)
        if poison:
            redis_layer.run(lambda conn: scripts.evaluate(
                conn, "unregister_if_empty", [list_key, keys.IN_PROGRESS_REGISTRY]), idempotent=True)
        return requeued

    def _bury(self, list_key: str, raw: StoredPayload, identity: str, queue: str) -> None:
        now = time.time()
        message = (f"recovered more than {self.config.max_orphanings} times from processes that died "
                   f"while running it (last: {identity}); sent to dead as a likely poison pill")
        result = ("", "")
        try:
            job = loads(raw)
            job.update({"error_class": POISON_ERROR, "error_message": message})
            job.setdefault("failed_at", now)
            job.setdefault("retry_count", 0)
            jid = job.get("jid") if isinstance(job.get("jid"), str) else ""
            # Buried, the job is over: its unique or running locks go in the same step.
            locks = job_locks.encode(job_locks.locks_of(job))
            buried = dumps(job)
            if jid and result_record.wants_result(job):  # FAILURE, saying why, in the burial's own step
                result = (keys.result(jid), result_record.spec(
                    result_record.FAILURE, result_record.error_json(POISON_ERROR, message), self.config.result_ttl))
        except PayloadError as error:
            jid, locks, buried = "", "", dumps(dead.invalid_payload(raw, queue, f"{message}; {error}", now))
        logger.error("djwork: job %s %s", jid, message)
        # fail.lua's dead filing: the same moves as a plain burial (add to dead, trim it, remove from the
        # list, clear the orphan count, end the locks and batch), plus the result record.
        redis_layer.run(self.file_failure(list_key, raw, "dead", buried, now, jid, from_in_progress=True,
                                          only_if_listed=True, config=self.config, now=now, locks=locks,
                                          result=result).evaluate,
                        idempotent=True)
