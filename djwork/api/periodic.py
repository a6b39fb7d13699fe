"""Periodic entries (docs/periodic.md): what each one is, when it fires next, what it did; pause, unpause, run now.

``Periodic()`` lists the entries this deploy configures (``PERIODIC`` and
``@djwork.periodic`` declarations imported here) together with those the
leader recorded in ``djwork:periodic:entries``: an entry no longer
configured keeps its history, marked ``configured=False``. Times come from
Redis's clock (simulated under ``TEST_CLOCK``). A run's outcome is looked up
in the recent execution history; an empty outcome means not finished as far
as that history shows (queued, running, or older than it reaches).

Writes: ``pause``/``unpause`` set a flag the claim script reads, so they
take effect on the next slot with no leader involved; ``run_now`` pushes
the entry's job with its configured arguments at once (refused while a
no-overlap entry's run holds its lock), outside the schedule and the
watermark. The dashboard gates them behind ``manage_dashboard``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from redis.exceptions import ResponseError

from djwork.api import access
from djwork.api.cluster_actions import RunNowSteps
from djwork.api.cluster_entries import by_mode
from djwork.api.errors import ApiError, StaleEntry
from djwork.api.history import runs_before
from djwork.api.records import text, to_datetime, to_int
from djwork.dead import ScriptCall
from djwork.jobs import resolve
from djwork.periodic import claim as claims
from djwork.periodic.entries import Entry, EntryError, configured, parse_entry
from djwork.periodic.locks import RELEASE_SCRIPT
from djwork.periodic.schedule import from_ms
from djwork.redis import key_layout, keys, scripts
from djwork.redis.cluster import is_cluster, pipeline_with_time
from djwork.settings.conf import Config, get_config

HISTORY_SCAN = 2000  # execution-history runs searched for the outcome of the runs shown
COUNTERS = ("fired", "run_now", "skipped_missed", "skipped_paused", "skipped_overlap", "skipped_middleware")


@dataclass(frozen=True)
class PeriodicRun:
    kind: str  # "slot" | "run-now" | "skipped"
    jid: str
    slot: dt.datetime | None  # the slot decided (None for a run now)
    at: dt.datetime | None  # when it was decided, on Redis's clock
    skipped: int  # slots skipped: missed ones before a fired slot, or this skip's
    reason: str  # a skip's: "missed", "paused", "overlap", "middleware"
    holder: str  # an overlap skip's: the jid of the run still holding the lock
    outcome: str  # the run's last status in the execution history ("ok", "retry", "dead", ...); "" if not there


@dataclass(frozen=True)
class PeriodicEntry:
    id: str
    cron: str
    tz: str
    job: str
    queue: str
    args: list[Any]
    kwargs: dict[str, Any]
    catch_up: str
    max_lookback: float
    overlap: bool
    lock_ttl: float
    configured: bool  # False: no longer configured anywhere (it stopped firing; its history stays)
    paused: bool
    paused_at: dt.datetime | None
    next_run: dt.datetime | None  # in the entry's time zone
    next_run_utc: dt.datetime | None
    overdue: bool  # the next slot is past and not decided yet (no leader is running)
    last_slot: dt.datetime | None  # the watermark: the last slot decided
    watching_since: dt.datetime | None
    running_jid: str  # a no-overlap entry's run still queued, running or retrying
    counters: dict[str, int]  # fired, run_now, skipped_missed, skipped_paused, skipped_overlap, skipped_middleware
    runs: list[PeriodicRun] = field(default_factory=list)  # newest first
    problems: tuple[str, ...] = ()

    @property
    def missed(self) -> int:
        """Slots skipped because no leader fired them in time (catch_up decided)."""
        return self.counters.get("skipped_missed", 0)


class Periodic:
    """The periodic entries; ``Periodic().entries()``, ``.get(id)``, ``.pause(id)``, ``.run_now(id)``..."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or get_config()
        self.clock = self.config.test_clock
        self.default_tz = getattr(settings, "TIME_ZONE", None) or "UTC"
        local, problems = configured(self.config.periodic, self.default_tz)
        self.local = {entry.id: entry for entry in local}
        self.problems = [str(problem) for problem in problems]  # entries of this deploy that can't be used

    def __iter__(self) -> Iterator[PeriodicEntry]:
        return iter(self.entries())

    def entries(self, runs: int = 10) -> list[PeriodicEntry]:
        """Every entry, configured ones first, by id; each with its ``runs`` newest runs and skips."""
        registry, synced = self._registry()
        ids = sorted(set(self.local) | set(registry))
        found = self._read(ids, registry, synced, runs)
        return sorted(found, key=lambda entry: (not entry.configured, entry.id))

    def get(self, entry_id: str, runs: int = claims.HISTORY_KEPT) -> PeriodicEntry:
        registry, synced = self._registry()
        if entry_id not in self.local and entry_id not in registry:
            raise StaleEntry(f"no periodic entry {entry_id!r}")
        return self._read([entry_id], registry, synced, runs)[0]

    # --- writes -----------------------------------------------------------------------
    def pause(self, entry_id: str) -> None:
        """Skip the entry's slots from now on (counted, not queued up: unpausing fires no backlog)."""
        self._known(entry_id)
        ms = self._now_ms_real()
        access.write(lambda conn: conn.hset(keys.periodic_state(entry_id), mapping={"paused": "1", "paused_at": ms}),
                     replay=True)

    def unpause(self, entry_id: str) -> None:
        self._known(entry_id)
        access.write(lambda conn: conn.hdel(keys.periodic_state(entry_id), "paused", "paused_at"), replay=True)

    def run_now(self, entry_id: str) -> str:
        """Push the entry's job now with its configured arguments; returns the jid. Paused or not."""
        entry = self.local.get(entry_id)
        if entry is None:
            raise StaleEntry(f"periodic entry {entry_id!r} is not configured in this deploy; it can't run")
        job = resolve(entry.job)
        if job is None:
            raise ApiError(f"periodic entry {entry_id!r} names no djwork job {entry.job!r}")
        try:
            call = claims.run_now_call(entry, job, self.config, self.clock)
        except TypeError as error:
            raise ApiError(f"periodic entry {entry_id!r} could not be enqueued: {error}") from error
        if call is None:
            raise ApiError(f"client middleware stopped the push of {entry_id!r}")
        # One script, or a cluster's steps (claim pending, push once, clear: djwork/api/cluster_actions.py).
        run = by_mode(ScriptCall(claims.SCRIPT, call.keys, call.args), RunNowSteps(entry_id, call.args, call.jid))
        # Not replayed: a run now that landed and lost its reply would run twice.
        reply = access.write(run.evaluate, replay=False)
        status, value = claims.status_of(reply)
        if status == "busy":
            raise ApiError(f"periodic entry {entry_id!r} does not overlap runs, and its run {value} is still queued, "
                           "running or retrying")
        return call.jid

    def release_lock(self, entry_id: str, holder: str | None = None) -> bool:
        """Free a no-overlap entry's running lock by hand (its run was deleted, say); True if one was released.

        With ``holder`` (the jid the operator saw), only that job's lock is released, in one
        compare-and-delete: a lock passed to the next run meanwhile is that run's.
        """
        lock = key_layout.layout(is_cluster(get_config())).periodic_lock(entry_id)
        if holder is None:
            held = access.read(lambda conn: conn.get(lock))
            if held is None:
                return False
            holder = text(held)
        released = access.write(lambda conn: scripts.evaluate(conn, RELEASE_SCRIPT, [lock], [holder]),
                                replay=True)
        return released == 1

    # --- reading ----------------------------------------------------------------------
    def _known(self, entry_id: str) -> None:
        if entry_id not in self.local and entry_id not in self._registry()[0]:
            raise StaleEntry(f"no periodic entry {entry_id!r}")

    def _now_ms_real(self) -> int:
        seconds, micros = access.read(lambda conn: conn.time())
        return int(seconds * 1000 + micros // 1000)

    def _registry(self) -> tuple[dict[str, dict[str, Any]], int]:
        """The entries the leaders recorded, and when the last one wrote (epoch ms)."""
        raw = access.read(lambda conn: conn.pipeline(transaction=False).hgetall(keys.PERIODIC_ENTRIES)
                          .execute(raise_on_error=False)[0])
        found = {}
        synced = 0
        for entry_id, definition in (raw.items() if isinstance(raw, dict) else ()):
            if text(entry_id) == keys.PERIODIC_SYNCED_FIELD:
                synced = to_int(definition)
                continue
            try:
                value = json.loads(text(definition))
            except ValueError:
                value = {}
            found[text(entry_id)] = value if isinstance(value, dict) else {}
        return found, synced

    def _read(self, ids: list[str], registry: dict[str, dict[str, Any]], synced: int,
              runs: int) -> list[PeriodicEntry]:
        def read(conn: Any) -> list[Any]:
            pipe = pipeline_with_time(conn)  # TIME first (a cluster asks one primary)
            layout = key_layout.layout_of(conn)  # a cluster keeps the history in its state's slot
            for entry_id in ids:
                pipe.hgetall(keys.periodic_state(entry_id))
                pipe.lrange(layout.periodic_history(entry_id), 0, max(0, runs - 1))
                pipe.get(layout.periodic_lock(entry_id))
            return pipe.execute(raise_on_error=False)

        replies = access.read(read)
        seconds, micros = replies[0]
        now_ms = self.clock.simulated_ms(seconds + micros / 1_000_000)
        newest_sync = max([synced, *(to_int(value.get("seen")) for value in registry.values())])
        rows = []
        for index, entry_id in enumerate(ids):
            state, history, holder = replies[1 + 3 * index: 4 + 3 * index]
            rows.append((entry_id, state if isinstance(state, dict) else {},
                         history if isinstance(history, list) else [], holder))
        outcomes = self._outcomes({record.get("jid") for _id, _state, history, _holder in rows
                                   for record in map(_record, history) if record.get("jid")})
        return [self._entry(entry_id, registry.get(entry_id, {}), newest_sync,
                            {text(k): text(v) for k, v in state.items()}, history, holder, outcomes, now_ms)
                for entry_id, state, history, holder in rows]

    def _outcomes(self, jids: set[Any]) -> dict[str, str]:
        if not jids:
            return {}

        def read(conn: Any) -> dict[str, str]:
            found: dict[str, str] = {}
            try:
                for examined, (_run_id, run) in enumerate(runs_before(conn), 1):
                    if run is not None and run.jid in jids and run.jid not in found:
                        found[run.jid] = run.status
                    if examined >= HISTORY_SCAN or len(found) == len(jids):
                        break
            except ResponseError:
                pass  # a wrong-type key: every outcome stays pending
            return found

        return access.read(read)

    def _entry(self, entry_id: str, recorded: dict[str, Any], newest_sync: int, state: dict[str, str],
               history: list[Any], holder: Any, outcomes: dict[str, str], now_ms: int) -> PeriodicEntry:
        problems: list[str] = []
        entry: Entry | None = self.local.get(entry_id)
        if entry is None:
            try:
                raw = {key: recorded[key] for key in ("cron", "job", "args", "kwargs", "queue", "tz", "catch_up",
                                                      "max_lookback", "overlap", "lock_ttl") if key in recorded}
                entry = parse_entry({**raw, "name": entry_id}, self.default_tz, f"recorded entry {entry_id}")
            except EntryError as error:
                problems.append(str(error))
        definition = entry.definition() if entry else {**recorded, "id": entry_id}
        watermark = to_int(state.get("last")) if state.get("last") else None
        next_ms = entry.schedule.next_after(watermark if watermark is not None else now_ms) if entry else None
        next_utc = from_ms(next_ms) if next_ms is not None else None
        job = resolve(entry.job) if entry else None
        return PeriodicEntry(
            id=entry_id, cron=str(definition.get("cron", "")), tz=str(definition.get("tz", "")),
            job=str(definition.get("job", "")),
            queue=(claims.job_queue(entry, job) if entry and job else str(definition.get("queue") or "")),
            args=list(definition.get("args") or []), kwargs=dict(definition.get("kwargs") or {}),
            catch_up=str(definition.get("catch_up", "")), max_lookback=float(definition.get("max_lookback") or 0),
            overlap=bool(definition.get("overlap", True)), lock_ttl=float(definition.get("lock_ttl") or 0),
            configured=entry_id in self.local or (bool(recorded) and to_int(recorded.get("seen")) >= newest_sync),
            paused="paused" in state, paused_at=_ms_time(state.get("paused_at")),
            next_run=next_utc.astimezone(entry.schedule.tz) if next_utc and entry else None, next_run_utc=next_utc,
            overdue=next_ms is not None and next_ms <= now_ms,
            last_slot=from_ms(watermark) if watermark is not None else None,
            watching_since=_ms_time(state.get("since")), running_jid=text(holder) if holder else "",
            counters={name: to_int(state.get(name)) for name in COUNTERS},
            runs=[_run(record, outcomes) for record in map(_record, history)], problems=tuple(problems))


def _record(raw: Any) -> dict[str, Any]:
    try:
        value = json.loads(text(raw))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _ms_time(value: Any) -> dt.datetime | None:
    return to_datetime(to_int(value) / 1000) if value else None


def _run(record: dict[str, Any], outcomes: dict[str, str]) -> PeriodicRun:
    jid = str(record.get("jid") or "")
    slot = record.get("slot")
    return PeriodicRun(kind=str(record.get("kind", "")), jid=jid,
                       slot=from_ms(int(slot)) if isinstance(slot, (int, float)) else None,
                       at=_ms_time(record.get("at")), skipped=to_int(record.get("skipped")),
                       reason=str(record.get("reason") or ""), holder=str(record.get("holder") or ""),
                       outcome=outcomes.get(jid, ""))
