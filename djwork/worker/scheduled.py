"""Scheduled poller: due jobs move from `retry` and `schedule` onto their queues.

Each pass reads up to BATCH due entries (a pure read), builds each job's
queue payload in Python (enqueued_at restamped, "at" removed: docs/wire.md,
Jobs), and promotes them with one promote.lua call each, all in one pipeline.
promote.lua pushes before it removes and does nothing when the entry is
already gone, so the pipeline is safe to replay and a connection error
mid-drain loses nothing (a poller that pops the entry before pushing it
loses the job when the connection drops in between).

The interval is Sidekiq's: an average of AVERAGE_SCHEDULED_POLL_INTERVAL
(5 s) times the number of live processes, randomized, so a fleet polls the
sets about every 5 s in total; POLL_INTERVAL_AVERAGE fixes it instead. It
never sleeps past the earliest due entry it saw.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any

from djwork import dead
from djwork import redis as redis_layer
from djwork.payload import PayloadError, StoredPayload, dumps, loads, stored_payload
from djwork.redis import keys, lanes, scripts
from djwork.settings.conf import Config
from djwork.worker.component import PeriodicComponent

logger = logging.getLogger("djwork.worker")

BATCH = 100


class ScheduledPoller(PeriodicComponent):
    name = "scheduled"

    def __init__(self, config: Config) -> None:
        super().__init__()
        self.config = config
        self.process_count = 1
        self.next_due: float | None = None

    def average_interval(self) -> float:
        if self.config.poll_interval_average is not None:
            return self.config.poll_interval_average
        return self.config.average_scheduled_poll_interval * max(1, self.process_count)

    def interval(self) -> float:
        average = self.average_interval()
        if self.process_count < 10:
            wait = average * random.random() + average / 2
        else:
            wait = average * random.random() * 2
        if self.next_due is not None:
            wait = min(wait, max(0.05, self.next_due - time.time()))
        return wait

    def first_delay(self) -> float:
        return min(self.interval(), 1.0)

    def tick(self) -> None:
        self.enqueue_due()

    def enqueue_due(self, now: float | None = None) -> int:
        """Promote every due job of both sets; returns how many were promoted."""
        promoted = 0
        next_due: list[float] = []
        for set_key in (keys.RETRY, keys.SCHEDULE):
            # Entries that could not be moved (their queue key has the wrong
            # type, say) stay first in line: page past them, or a full batch
            # of them would be re-read forever and block everything behind.
            skipped = 0
            moment = time.time() if now is None else now
            while not self._sleeper.stopped or now is not None:
                moment = time.time() if now is None else now
                entries = redis_layer.run(
                    lambda conn, set_key=set_key, moment=moment, skipped=skipped: conn.zrangebyscore(
                        set_key, "-inf", moment, start=skipped, num=BATCH), idempotent=True)
                if not entries:
                    break
                pushed, moved = self._promote(set_key, entries)
                promoted += pushed
                skipped += len(entries) - moved
                if len(entries) < BATCH:
                    break
            # The next entry not yet due: a stuck due one must not pull the
            # interval down to the 0.05 s floor for good.
            upcoming = redis_layer.run(
                lambda conn, set_key=set_key, moment=moment: conn.zrangebyscore(
                    set_key, f"({moment}", "+inf", start=0, num=1, withscores=True), idempotent=True)
            if upcoming:
                next_due.append(float(upcoming[0][1]))
        self.next_due = min(next_due) if next_due else None
        try:
            self.process_count = int(redis_layer.run(lambda conn: conn.scard(keys.PROCESSES), idempotent=True))
        except Exception:
            self.process_count = 1
        return promoted

    def _promote(self, set_key: str, entries: list[bytes]) -> tuple[int, int]:
        """Promote (or bury) ``entries``; returns (pushed to a queue, gone from the set by this call)."""
        now = time.time()
        calls: list[tuple[str, list[str], list[Any]]] = []
        for entry in entries:
            # Not decoded leniently: a replacement character would quietly change
            # the job it promotes; undecodable bytes go to dead, escaped.
            raw = stored_payload(entry)
            try:
                job = loads(raw)
            except PayloadError as error:
                calls.append(self._bury_call(set_key, entry, raw, str(error), now))
                continue
            queue = job.get("queue") if isinstance(job.get("queue"), str) and job.get("queue") else "default"
            job.pop("at", None)
            job["enqueued_at"] = now
            # The member goes back as the exact bytes read: a decoded copy of a
            # non-UTF-8 member would never match it, and it would stay due forever.
            # A prioritised job goes back to its lane (docs/priority.md): a retried job keeps its priority.
            target, lane = lanes.promote_target(queue, job)
            calls.append(("promote", [set_key, *target], [entry, dumps(job), queue, lane]))

        def run(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for name, script_keys, args in calls:
                scripts.queue_evaluate(pipe, name, script_keys, args)
            return scripts.execute(pipe, raise_on_error=False)

        replies = redis_layer.run(run, idempotent=True)
        promoted = moved = 0
        for (name, _script_keys, _args), reply in zip(calls, replies, strict=True):
            if isinstance(reply, Exception):
                logger.error("djwork: could not promote a job from %s: %s", set_key, reply)
                continue
            if reply == 1:
                moved += 1
                promoted += name == "promote"
        return promoted, moved

    def _bury_call(self, set_key: str, member: bytes, raw: StoredPayload, reason: str,
                   now: float) -> tuple[str, list[str], list[Any]]:
        wrapper = dead.invalid_payload(raw, "default", f"unreadable entry in {set_key}: {reason}", now)
        logger.error("djwork: unreadable entry in %s moved to dead: %s", set_key, reason)
        return dead.move_to_dead(set_key, "zset", member, wrapper, config=self.config, now=now)
