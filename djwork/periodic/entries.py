"""Periodic entries: ``DJWORK["PERIODIC"]`` dicts and ``@djwork.periodic`` declarations, parsed one by one.

Each entry is parsed on its own, so one bad entry is reported (a system check
at deploy, an ERROR line in a running worker) and skipped, and never takes
the others, or the worker, down with it. Whether the job exists is not
decided here (``djwork.periodic.checks`` at deploy, the ticker at run time):
this module imports nothing that imports the settings.

An entry's id (its ``name``, by default the job) names its Redis keys: its
watermark, pause flag and history follow the id across deploys, whatever
else about the entry changes.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from djwork.payload import ArgumentError, check_json_native
from djwork.periodic.schedule import Schedule, ScheduleError

CATCH_UPS = ("none", "latest", "all")
DEFAULT_CATCH_UP = "latest"
DEFAULT_MAX_LOOKBACK = 24 * 3600.0
DEFAULT_LOCK_TTL = 24 * 3600.0
# No ':' in an id: it ends the entry's key names, and must not let one id's
# keys collide with another's (djwork/redis/keys.py).
ENTRY_ID = re.compile(r"\A[A-Za-z0-9_.\-]{1,200}\Z")
QUEUE_NAME = re.compile(r"\A[a-z_:.\-0-9]+\Z", re.IGNORECASE)
ENTRY_KEYS = ("name", "cron", "job", "args", "kwargs", "queue", "tz", "catch_up", "max_lookback", "overlap",
              "lock_ttl")

# Check ids (docs/settings.md): stable, one per kind of problem.
STRUCTURE = "djwork.E041"
BAD_CRON = "djwork.E042"
UNKNOWN_JOB = "djwork.E043"
BAD_ZONE = "djwork.E044"
DUPLICATE = "djwork.E045"
EXAMPLE = ("{'cron': '*/5 * * * *', 'job': 'myapp.tasks.refresh', 'args': [1], 'tz': 'Europe/Berlin', "
           "'catch_up': 'latest'}")


class EntryError(ValueError):
    """One entry's problem: the message names the entry, ``check_id`` and ``hint`` are the system check's."""

    def __init__(self, message: str, check_id: str = STRUCTURE, hint: str = f"An entry looks like {EXAMPLE}.") -> None:
        super().__init__(message)
        self.check_id = check_id
        self.hint = hint


@dataclass(frozen=True)
class Entry:
    id: str
    cron: str
    job: str
    tz: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    queue: str | None = None  # None: the job's own queue
    catch_up: str = DEFAULT_CATCH_UP
    max_lookback: float = DEFAULT_MAX_LOOKBACK
    overlap: bool = True
    lock_ttl: float = DEFAULT_LOCK_TTL
    source: str = ""
    schedule: Schedule = field(default=None, compare=False, repr=False)  # type: ignore[assignment]

    def definition(self) -> dict[str, Any]:
        """The entry as JSON-able data: what the registry in Redis keeps and the read model shows."""
        return {"id": self.id, "cron": self.cron, "job": self.job, "tz": self.tz, "args": list(self.args),
                "kwargs": dict(self.kwargs), "queue": self.queue, "catch_up": self.catch_up,
                "max_lookback": self.max_lookback, "overlap": self.overlap, "lock_ttl": self.lock_ttl,
                "source": self.source}


def _number(raw: Mapping[str, Any], key: str, default: float, where: str) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise EntryError(f"{where}: {key!r} must be a number of seconds > 0, got {value!r}")
    return float(value)


def parse_entry(raw: Any, default_tz: str, where: str) -> Entry:
    """One entry from its dict; EntryError naming ``where`` (e.g. ``PERIODIC[2]``) and the problem."""
    if not isinstance(raw, Mapping):
        raise EntryError(f"{where} must be a dict, got {raw!r}")
    for key in raw:
        if key not in ENTRY_KEYS:
            close = difflib.get_close_matches(str(key), ENTRY_KEYS, n=1)
            raise EntryError(f"{where} has an unknown key {key!r}",
                             hint=f"Did you mean {close[0]!r}?" if close else f"Known keys: {', '.join(ENTRY_KEYS)}.")
    for key in ("cron", "job"):
        if key not in raw:
            raise EntryError(f"{where} has no {key!r}")
    job = raw["job"]
    if not isinstance(job, str) or not job:
        raise EntryError(f"{where}: 'job' must be the dotted path or name of a djwork job, got {job!r}")
    if job not in where:
        where = f"{where} ({job})"
    name = raw.get("name", job)
    if not isinstance(name, str) or not ENTRY_ID.match(name):
        raise EntryError(f"{where}: the entry id {name!r} must be 1-200 of A-Z a-z 0-9 _ . -",
                         hint="Give the entry a 'name' of letters, digits, '_', '.' and '-' (no ':').")
    args, kwargs = raw.get("args", ()), raw.get("kwargs", {})
    if not isinstance(args, (list, tuple)):
        raise EntryError(f"{where}: 'args' must be a list, got {args!r}")
    if not isinstance(kwargs, Mapping) or not all(isinstance(key, str) for key in kwargs):
        raise EntryError(f"{where}: 'kwargs' must be a dict with string keys, got {kwargs!r}")
    try:
        check_json_native(list(args), f"{where}: args")
        check_json_native(dict(kwargs), f"{where}: kwargs")
    except ArgumentError as error:
        raise EntryError(str(error), hint="Arguments travel as JSON: pass ids and ISO date strings.") from None
    queue = raw.get("queue")
    if queue is not None and (not isinstance(queue, str) or not QUEUE_NAME.match(queue)):
        raise EntryError(f"{where}: 'queue' must be a queue name of a-z 0-9 _ : . -, got {queue!r}")
    catch_up = raw.get("catch_up", DEFAULT_CATCH_UP)
    if catch_up not in CATCH_UPS:
        raise EntryError(f"{where}: 'catch_up' must be one of {', '.join(map(repr, CATCH_UPS))}, got {catch_up!r}",
                         hint="'none' skips missed slots, 'latest' runs the most recent one, 'all' every one.")
    overlap = raw.get("overlap", True)
    if not isinstance(overlap, bool):
        raise EntryError(f"{where}: 'overlap' must be True or False, got {overlap!r}")
    tz = raw.get("tz", default_tz)
    try:
        schedule = Schedule(raw["cron"], tz)
    except ScheduleError as error:
        zone_problem = "time zone" in str(error)
        raise EntryError(f"{where}: {error}", BAD_ZONE if zone_problem else BAD_CRON,
                         "Use an IANA zone name such as 'Europe/Berlin' or 'UTC'." if zone_problem else
                         "Five fields (minute hour day-of-month month day-of-week) or @hourly, @daily, @weekly, "
                         "@monthly, @yearly; e.g. '*/5 * * * *'.") from None
    return Entry(id=name, cron=schedule.cron, job=job, tz=tz, args=tuple(args), kwargs=dict(kwargs), queue=queue,
                 catch_up=catch_up, max_lookback=_number(raw, "max_lookback", DEFAULT_MAX_LOOKBACK, where),
                 overlap=overlap, lock_ttl=_number(raw, "lock_ttl", DEFAULT_LOCK_TTL, where),
                 source=where, schedule=schedule)


def parse_all(raws: Iterable[tuple[Any, str]], default_tz: str) -> tuple[list[Entry], list[EntryError]]:
    """Every usable entry, and the problem of each one that is not (a second entry with a taken id is one)."""
    entries: list[Entry] = []
    problems: list[EntryError] = []
    taken: dict[str, str] = {}
    for raw, where in raws:
        try:
            entry = parse_entry(raw, default_tz, where)
        except EntryError as problem:
            problems.append(problem)
            continue
        if entry.id in taken:
            problems.append(EntryError(
                f"{entry.source}: entry id {entry.id!r} is already taken by {taken[entry.id]}", DUPLICATE,
                "Give one of them a distinct 'name' (the id that names its state in Redis)."))
            continue
        taken[entry.id] = entry.source
        entries.append(entry)
    return entries, problems


# --- @djwork.periodic -------------------------------------------------------------
# Declarations made by importing a module (runworkers and embedded workers import
# every app's tasks and jobs modules at boot), keyed so re-importing a module
# re-declares, rather than duplicates, its entries.
declared: dict[str, tuple[dict[str, Any], str]] = {}


def periodic(cron: str, **options: Any) -> Callable[[Any], Any]:
    """Decorator: run a djwork job on a cron schedule. Put it above ``@djwork.job``.

    Options are an entry's keys (``name``, ``args``, ``kwargs``, ``queue``,
    ``tz``, ``catch_up``, ``max_lookback``, ``overlap``, ``lock_ttl``). A bad
    value is not raised here: like a bad ``PERIODIC`` entry it is a system
    check error, and a running worker skips the entry with an ERROR line.
    """

    def decorate(target: Any) -> Any:
        raw = {"cron": cron, **options}
        if isinstance(getattr(target, "name", None), str) and hasattr(target, "build_payload"):
            raw["job"] = job = target.name
        else:
            # Not a job (@djwork.periodic below @djwork.job, say): the check says so, under an id it can name.
            raw["job"] = job = f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}"
            raw.setdefault("name", re.sub(r"[^A-Za-z0-9_.\-]", "_", job)[:200])
        declared[repr(sorted(raw.items(), key=lambda item: item[0]))] = (raw, f"@djwork.periodic on {job}")
        return target

    return decorate


def configured(settings_entries: Iterable[Any], default_tz: str) -> tuple[list[Entry], list[EntryError]]:
    """The entries of ``DJWORK["PERIODIC"]`` and every ``@djwork.periodic`` declared so far."""
    raws = [(raw, f"PERIODIC[{index}]") for index, raw in enumerate(settings_entries)]
    raws += list(declared.values())
    return parse_all(raws, default_tz)
