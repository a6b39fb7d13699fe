"""Heartbeat: how a process shows itself to the cluster, exactly as a Sidekiq process does (docs/wire.md, Processes).

Each beat is three separate writes (and a read), because they have different
replay rules:

1. the stat counters (INCRBY), with the execution metrics' counters when
   they are on (djwork/worker/metrics.py): never replayed — a replay after a
   lost reply counts the window twice; a lost window is accepted instead, as
   Sidekiq does;
2. the presence write (SADD processes, the ``<identity>`` hash, the work
   hashes under both ``:work`` and Sidekiq 6.4.1's ``:workers``, the
   Redis-clock beat stamp): idempotent, it converges on the same state
   however often it lands, so it rides out a blip;
3. the signal drain (RPOP ``<identity>-signals``): destructive, its result is
   in the reply, so never replayed — a replay would discard a TERM or TSTP
   the first attempt already took. It runs after the presence write, so a
   signal only leaves Redis once the write that reports us alive has landed.
   A look at the list (LRANGE) comes first, and the pop takes only what the
   look saw: for a TSTP or TERM waiting there the process quiets on the
   beat's thread and publishes quiet=true before the pop takes it, so a
   reader always sees the request or its effect, and quiet=true is said only
   once no job is taken any more.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from typing import Any

import orjson

from djwork import redis as redis_layer
from djwork.redis import cluster as redis_cluster
from djwork.redis import keys, scripts
from djwork.redis.outage import tracker as outage
from djwork.settings.conf import Config
from djwork.worker.component import PeriodicComponent
from djwork.worker.memory import rss_kb
from djwork.worker.metrics import ExecutionMetrics, queue_writes
from djwork.worker.process import ProcessInfo, RunState, WorkState

logger = logging.getLogger("djwork.worker")

# The signals that end in quiet (TERM drains and stops): either makes the process say quiet=true.
QUIETING = frozenset({"TSTP", "TERM"})

SIGNALS_PER_BEAT = 10


class Heartbeat(PeriodicComponent):
    """Beats every HEARTBEAT_INTERVAL; keeps its own record of the last beat, which the health probes read."""

    name = "heartbeat"

    def __init__(self, config: Config, process: ProcessInfo, run_state: RunState, work: WorkState,
                 take_counts: Callable[[], tuple[int, int, int]], in_progress_keys: list[str],
                 on_signal: Callable[[str], None], metrics: ExecutionMetrics | None = None,
                 quiet_now: Callable[[], None] = lambda: None) -> None:
        super().__init__()
        self.metrics = metrics
        self.config = config
        self.process = process
        self.identity = process.identity
        self.run_state = run_state
        self.work = work
        self.take_counts = take_counts
        self.in_progress_keys = in_progress_keys
        self.on_signal = on_signal
        self.quiet_now = quiet_now  # the process's quiet, run on the beat's thread (Launcher.quiet)
        self.rtt_us = 0
        self.beats = 0
        self.last_beat_monotonic: float | None = None
        self.failing_since: float | None = None  # monotonic time of the first failed beat of an outage
        self.outage_declared = False  # djwork.redis.outage said the outage (and will say, or said, its end)
        self._info: str | None = None

    def interval(self) -> float:
        return self.config.heartbeat_interval

    def tick(self) -> None:
        try:
            self.beat()
        except Exception:
            if self.failing_since is None:
                self.failing_since = time.monotonic()
            self.outage_declared = self.outage_declared or outage.declared
            raise

    def info_json(self) -> str:
        if self._info is None:
            self._info = self.process.info_json()
        return self._info

    def beat(self) -> None:
        """One beat; raises if the presence write failed (so boot can retry the first one)."""
        self.flush_stats()
        self.write_presence()
        # The presence write reached Redis: proof it is back, for every loop waiting on the outage.
        said_back = outage.succeeded("heartbeat") or self.outage_declared
        self.outage_declared = False
        if self.failing_since is not None and not said_back:
            # The outage's end deserves a line too: without it the log shows a
            # run of failed beats and then silence, and nobody knows it recovered.
            # (A declared outage's end is said by djwork.redis.outage: one line, not two.)
            logger.warning("djwork: Redis reachable again: the heartbeat is back after %.1fs of failed beats",
                           time.monotonic() - self.failing_since)
        self.failing_since = None
        self.beats += 1
        self.last_beat_monotonic = time.monotonic()
        # A TSTP or TERM waiting: quiet on this thread, then say so, then take the signal. Said before the pop,
        # a page reads the request or its effect, never neither ("running" just after a Quiet click, seen
        # under load); said after the quiet, quiet=true means no job is taken any more (said first, a job
        # pushed on seeing it was taken before the main thread had quieted the process).
        waiting = self.pending_signals()
        published = bool(QUIETING & set(waiting)) and self.quiet_and_publish()
        taken = self.drain_signals(len(waiting)) if waiting else []
        for signal_name in taken:
            self.on_signal(signal_name)
        if QUIETING & set(taken) and not published:  # the early publish failed: say it once Redis answers
            self.quiet_and_publish()

    def quiet_and_publish(self) -> bool:
        """Quiet the process now (idempotent: the signal's own handling finds it done), then say quiet=true."""
        self.quiet_now()
        return self.publish_quiet()

    def flush_stats(self) -> None:
        processed, failed, expired = self.take_counts()
        window = self.metrics.take() if self.metrics is not None else None
        if not processed and not failed and not expired and not window:
            return
        now = dt.datetime.now(dt.UTC)
        day = now.strftime("%Y-%m-%d")

        def write(conn: Any) -> None:
            pipe = conn.pipeline(transaction=False)
            for key, value in ((keys.STAT_PROCESSED, processed), (keys.stat_processed_day(day), processed),
                               (keys.STAT_FAILED, failed), (keys.stat_failed_day(day), failed),
                               (keys.STAT_EXPIRED, expired)):
                if value:
                    pipe.incrby(key, value)
            for key, value in ((keys.stat_processed_day(day), processed), (keys.stat_failed_day(day), failed)):
                if value:
                    pipe.expire(key, keys.STATS_TTL)
            if window:
                queue_writes(pipe, window, now)
            return pipe.execute(raise_on_error=False)

        try:
            replies = redis_layer.run(write, purpose="heartbeat")
        except Exception as error:
            logger.warning("djwork: stats window lost (processed=%d failed=%d expired=%d): %s", processed, failed,
                           expired, error)
            return
        # A pipeline runs every command: one refused write (a key of the wrong type, named and
        # reported to the key guard by djwork.redis.naming) loses only its own counts, not the window.
        refused = list(dict.fromkeys(str(reply) for reply in replies if isinstance(reply, Exception)))
        if refused:
            logger.error("djwork: %d stats write(s) refused, the others written: %s", len(refused),
                         "; ".join(refused))

    def write_presence(self) -> None:
        work = self.work.snapshot()
        work_fields = {
            tid: orjson.dumps({"queue": queue, "payload": raw, "run_at": run_at}).decode()
            for tid, (queue, raw, run_at) in work.items()
        }
        identity = self.identity
        process_fields = {
            "info": self.info_json(),
            "busy": str(len(work_fields)),
            "beat": repr(time.time()),
            "quiet": "true" if self.run_state.quieted else "false",
            "rss": str(rss_kb()),
            "rtt_us": str(self.rtt_us),
            "concurrency": str(self.process.concurrency),
        }

        def write(conn: Any) -> None:
            pipe = redis_cluster.transaction(conn)
            # One key per UNLINK: on a cluster the two names hash to different slots.
            pipe.unlink(keys.work(identity))
            pipe.unlink(keys.workers_legacy(identity))
            if work_fields:
                for key in (keys.work(identity), keys.workers_legacy(identity)):
                    pipe.hset(key, mapping=work_fields)
                    pipe.expire(key, keys.PROCESS_TTL)
            pipe.sadd(keys.PROCESSES, identity)
            pipe.hset(keys.process(identity), mapping=process_fields)
            pipe.expire(keys.process(identity), keys.PROCESS_TTL)
            scripts.queue_evaluate(pipe, "beat", [keys.BEATS], [identity])
            if self.in_progress_keys:
                pipe.sadd(keys.IN_PROGRESS_REGISTRY, *self.in_progress_keys)
            scripts.execute(pipe)

        started = time.perf_counter()
        redis_layer.run(write, idempotent=True, purpose="heartbeat")
        self.rtt_us = int((time.perf_counter() - started) * 1_000_000)

    def publish_quiet(self) -> bool:
        """Say quiet=true now, not at the next beat: the dashboard shows "quiet requested" only while the
        signal waits in the list, so without this a Quiet click looked undone for a whole interval."""
        key = keys.process(self.identity)

        def write(conn: Any) -> None:
            # EXPIRE too: a hash that lapsed meanwhile must not come back without its TTL.
            conn.pipeline(transaction=True).hset(key, "quiet", "true").expire(key, keys.PROCESS_TTL).execute()

        try:
            redis_layer.run(write, idempotent=True, purpose="heartbeat")
        except Exception as error:
            logger.warning("djwork: could not publish quiet=true early (the next beat will): %s", error)
            return False
        return True

    def pending_signals(self) -> list[str]:
        """The oldest signals waiting in ``<identity>-signals`` (up to SIGNALS_PER_BEAT, newest first, as the
        list holds them), left there (a read: safe to repeat)."""
        try:
            waiting = redis_layer.run(
                lambda conn: conn.lrange(keys.signals(self.identity), -SIGNALS_PER_BEAT, -1),
                idempotent=True, purpose="heartbeat")
        except Exception as error:
            logger.warning("djwork: could not read %s: %s", keys.signals(self.identity), error)
            return []
        return [value.decode() if isinstance(value, bytes) else value for value in waiting or []]

    def drain_signals(self, seen: int) -> list[str]:
        """Take the ``seen`` oldest signals, the ones the look found. Senders push at the head and this pops
        the tail, so a signal that arrived after the look stays for the next beat, which looks first: popped
        now, it was taken with neither it nor its effect published, for as long as the pop's reply took."""
        try:
            popped = redis_layer.run(
                lambda conn: conn.rpop(keys.signals(self.identity), seen), purpose="heartbeat")
        except Exception as error:
            logger.warning("djwork: could not read %s: %s", keys.signals(self.identity), error)
            return []
        return [value.decode() if isinstance(value, bytes) else value for value in popped or []]

    def clear(self) -> None:
        """Clean stop: leave the process set, drop the work hashes; the identity hash expires (as Sidekiq)."""
        identity = self.identity

        def write(conn: Any) -> None:
            pipe = redis_cluster.transaction(conn)
            pipe.srem(keys.PROCESSES, identity)
            pipe.unlink(keys.work(identity))
            pipe.unlink(keys.workers_legacy(identity))
            pipe.hset(keys.process(identity), mapping={"quiet": "true", "busy": "0"})
            pipe.zrem(keys.BEATS, identity)
            pipe.execute()

        redis_layer.run(write, idempotent=True, purpose="heartbeat")
        # A beat that ran after the shutdown requeue re-registered our emptied
        # lists. Only empty ones go: a failed requeue left jobs that orphan
        # recovery must still find through the registry.
        for list_key in self.in_progress_keys:
            redis_layer.run(lambda conn, list_key=list_key: scripts.unregister_if_empty(
                conn, list_key, keys.IN_PROGRESS_REGISTRY), idempotent=True, purpose="heartbeat")
