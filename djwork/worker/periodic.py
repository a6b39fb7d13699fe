"""PeriodicTicker: while this process holds the leader lease, fire the periodic entries' due slots.

Each tick is two round trips: Redis's TIME with every entry's watermark and
pause flag, then one pipeline of ``lua/periodic_claim.lua`` calls (the plan
of ``djwork.periodic.plan`` for each entry). The script decides, on Redis's
clock; the ticker only decides when to ask. It sleeps until the next slot
of any entry, measured on Redis's clock through this host's offset from it
(read on every tick), so a host clock that is wrong only moves that
measurement, never a slot.

Entries are read once, on the first tick (``runworkers`` and embedded workers
import the apps' tasks and jobs modules, where ``@djwork.periodic`` declares
its entries, before they start). A bad entry, or one whose job can't be
found, is logged once and left out; the others run.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson
from django.conf import settings

from djwork import redis as redis_layer
from djwork.jobs import resolve
from djwork.periodic import claim as claims
from djwork.periodic.entries import Entry, configured
from djwork.periodic.plan import plan
from djwork.redis import keys, scripts
from djwork.redis.cluster import pipeline_with_time
from djwork.settings.conf import Config
from djwork.worker.component import PeriodicComponent
from djwork.worker.leader import Leader

logger = logging.getLogger("djwork.periodic")

FOLLOWER_POLL = 0.5  # real seconds between looks at the (in-memory) lease while following
MAX_SLEEP = 5.0  # real seconds: a leader looks at least this often (a slot on a new term, a drifting host clock)
SYNC_EVERY = 600.0  # seconds between writes of the entry registry while leading
WAKE_MARGIN = 0.005  # real seconds after a slot: a wake-up a hair early would find nothing due


def default_zone() -> str:
    return getattr(settings, "TIME_ZONE", None) or "UTC"


class PeriodicTicker(PeriodicComponent):
    name = "periodic"

    def __init__(self, config: Config, leader: Leader, identity: str) -> None:
        super().__init__()
        self.config = config
        self.leader = leader
        self.identity = identity
        self.clock = config.test_clock
        self._entries: list[tuple[Entry, Any]] | None = None
        self._wake_in: float | None = None
        self._synced: tuple[int, float] | None = None  # (leader term, simulated seconds) of the last registry write

    def start(self) -> None:
        if not self.leader.enabled:
            return  # it could never lead: nothing to tick for
        super().start()

    def interval(self) -> float:
        if self._wake_in is None:
            return FOLLOWER_POLL
        return min(max(self._wake_in, WAKE_MARGIN), MAX_SLEEP)

    def first_delay(self) -> float:
        return min(FOLLOWER_POLL, 0.05)

    def tick(self) -> None:
        if not self.leader.is_leader():
            self._wake_in = None
            return
        self._wake_in = self.run_once()

    def entries(self) -> list[tuple[Entry, Any]]:
        """The usable entries and their jobs; the others are logged once, here."""
        if self._entries is None:
            parsed, problems = configured(self.config.periodic, default_zone())
            for problem in problems:
                logger.error("djwork periodic: entry left out: %s", problem)
            usable = []
            for entry in parsed:
                job = resolve(entry.job)
                if job is None:
                    logger.error("djwork periodic: entry %s left out: no djwork job %r (see `manage.py check`)",
                                 entry.id, entry.job)
                    continue
                usable.append((entry, job))
            self._entries = usable
        return self._entries

    def run_once(self) -> float:
        """Plan and claim every entry's due slots; returns real seconds until the next slot of any entry."""
        active = self.entries()

        def read(conn: Any) -> list[Any]:
            pipe = pipeline_with_time(conn)  # TIME first (a cluster asks one primary for it, apart)
            for entry, _job in active:
                pipe.hmget(keys.periodic_state(entry.id), "last", "paused")
            # A state key of the wrong type comes back as a WrongTypeKey naming it, reported to the
            # key guard (djwork.redis.naming), not as a bare WRONGTYPE logged every pass.
            return pipe.execute(raise_on_error=False)

        host_before = self.clock.host_now()
        replies = redis_layer.run(read, idempotent=True)
        host_after = self.clock.host_now()
        seconds, micros = replies[0]
        redis_real = seconds + micros / 1_000_000
        offset = redis_real - (host_before + host_after) / 2
        now_ms = self.clock.simulated_ms(redis_real)
        calls = self._calls(active, replies[1:], now_ms)
        self._sync_registry(active, redis_real)
        if calls:
            self._claim(calls)
        upcoming = [slot for entry, _job in active if (slot := entry.schedule.next_after(now_ms)) is not None]
        if not upcoming:
            return MAX_SLEEP
        simulated_now = self.clock.simulated(self.clock.host_now() + offset)
        return self.clock.real_duration(min(upcoming) / 1000 - simulated_now) + WAKE_MARGIN

    def _calls(self, active: list[tuple[Entry, Any]], states: list[Any],
               now_ms: int) -> list[tuple[Entry, claims.ClaimCall]]:
        calls = []
        for (entry, job), state in zip(active, states, strict=True):
            if isinstance(state, Exception):
                logger.error("djwork periodic: could not read the state of entry %s: %s", entry.id, state)
                continue
            watermark = int(state[0]) if state[0] is not None else None
            try:
                for step in plan(entry, watermark, now_ms, paused=state[1] is not None):
                    calls.append((entry, claims.call(entry, job, step, self.config, self.clock)))
            except Exception as error:
                # The job refused its configured arguments, a middleware raised...: this entry waits.
                logger.error("djwork periodic: entry %s could not be enqueued: %s", entry.id, error)
        return calls

    def _sync_registry(self, active: list[tuple[Entry, Any]], redis_real: float) -> None:
        """Record the entries this leader runs, and when (the read model tells those no longer configured)."""
        simulated = self.clock.simulated(redis_real)
        if self._synced is not None and self._synced[0] == self.leader.term and \
                simulated - self._synced[1] < SYNC_EVERY:
            return
        seen = int(redis_real * 1000)
        mapping = {entry.id: orjson.dumps({**entry.definition(), "seen": seen, "leader": self.identity}).decode()
                   for entry, _job in active}
        mapping[keys.PERIODIC_SYNCED_FIELD] = str(seen)
        try:
            redis_layer.run(lambda conn: conn.hset(keys.PERIODIC_ENTRIES, mapping=mapping), idempotent=True)
            self._synced = (self.leader.term, simulated)
        except Exception as error:
            logger.warning("djwork periodic: could not record the entries in %s: %s", keys.PERIODIC_ENTRIES, error)

    def _claim(self, calls: list[tuple[Entry, claims.ClaimCall]]) -> None:
        def run(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for _entry, call in calls:
                claims.queue_call(pipe, call)
            return scripts.execute(pipe, raise_on_error=False)

        # Replayable: a claim that already landed answers "done" the second time.
        replies = redis_layer.run(run, idempotent=True)
        for (entry, call), reply in zip(calls, replies, strict=True):
            if isinstance(reply, Exception):
                logger.error("djwork periodic: claim of entry %s failed: %s", entry.id, reply)
                continue
            self._report(entry, call, *claims.status_of(reply))

    def _report(self, entry: Entry, call: claims.ClaimCall, status: str, value: str) -> None:
        step = call.claim
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(step.slot / 1000))
        if status == "fired":
            extra = f" ({step.skipped} missed slot(s) before it skipped)" if step.skipped else ""
            logger.info("djwork periodic: enqueued %s for %s, jid %s (entry %s)%s", entry.job, when, call.jid,
                        entry.id, extra)
        elif status == "skipped":
            logger.warning("djwork periodic: entry %s skipped %d slot(s) up to %s (%s, catch_up=%s)", entry.id,
                           step.skipped + 1, when, step.reason, entry.catch_up)
        elif status == "overlap":
            logger.info("djwork periodic: entry %s skipped %s: its previous run is still queued, running or "
                        "retrying (overlap=False)", entry.id, when)
        elif status == "initialized":
            logger.info("djwork periodic: watching entry %s (%s %s, %s) from now", entry.id, entry.cron, entry.tz,
                        entry.job)
        else:
            logger.debug("djwork periodic: entry %s slot %s: %s", entry.id, when, status)
