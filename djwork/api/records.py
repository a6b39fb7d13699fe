"""Reading one stored job without ever raising: JobRecord, the value coercions, error_backtrace decoding.

Everything here reads data some other program wrote (a djwork worker, a
Ruby Sidekiq 6.4/7/8 process, a person with redis-cli), so each reader
returns what it can and records what it could not read in ``problems``
instead of raising (Sidekiq's Web UI answers 500 on most of these; docs/wire.md,
Checks, lists them).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import orjson

from djwork.backtrace import decode_backtrace
from djwork.backtrace import encode_backtrace as encode_backtrace  # re-exported by djwork.api

T = TypeVar("T")

# Sidekiq 8 writes Integer epoch milliseconds; no epoch in seconds reaches this before the year 5138.
MS_THRESHOLD = 1e11
ACTIVEJOB_WRAPPERS = ("ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper", "Sidekiq::ActiveJob::Wrapper")
MAILER_JOBS = ("ActionMailer::DeliveryJob", "ActionMailer::MailDeliveryJob")


def text(value: Any) -> str:
    """bytes or anything else -> str (invalid UTF-8 replaced, never raised)."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def to_int(value: Any) -> int:
    """Ruby's ``to_i``: leading integer part, 0 for junk ("12.5" -> 12, "abc" -> 0)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else 0
    raw = text(value).strip()
    digits = ""
    for index, char in enumerate(raw):
        if char.isdigit() or (index == 0 and char in "+-"):
            digits += char
        else:
            break
    try:
        return int(digits)
    except ValueError:
        return 0


def to_float(value: Any) -> float | None:
    """A finite float, or None when the value is not a number."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(text(value) if isinstance(value, bytes) else value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def epoch_seconds(value: Any) -> float | None:
    """A payload timestamp in epoch seconds: Float seconds (6.x/7.x) or Integer milliseconds (8.x)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    if not math.isfinite(number):
        return None
    return number / 1000.0 if number > MS_THRESHOLD else number


def to_datetime(epoch: float | None) -> dt.datetime | None:
    if epoch is None:
        return None
    try:
        return dt.datetime.fromtimestamp(epoch, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        return None


def parse_json(raw: Any) -> tuple[Any, str | None]:
    """(value, None) or (None, problem)."""
    try:
        return orjson.loads(raw), None
    except orjson.JSONDecodeError as error:
        # The worker's rule (djwork.payload.loads): past orjson's depth a payload is unreadable on every Python.
        if str(error).startswith("depth limit exceeded"):
            return None, "nested too deep for a JSON reader"
    except TypeError:
        pass
    try:  # what orjson refuses but the lenient stdlib reader reads (NaN, integers past 64 bits)
        return json.loads(raw), None
    except (ValueError, TypeError) as error:
        return None, f"not valid JSON ({error})"
    except RecursionError:  # a payload nested thousands deep: shown as unreadable, not a 500
        return None, "nested too deep for a JSON reader"


@dataclass
class JobRecord:
    """One job as stored (queue entry, sorted-set member or work payload), read leniently.

    ``item`` is the parsed object ({} when unreadable); ``problems`` names
    every field that could not be read as Sidekiq defines it.
    """

    raw: str
    item: dict[str, Any]
    problems: list[str] = field(default_factory=list)
    queue_hint: str = ""
    # The value exactly as stored, for LREM/ZREM and the scripts: ``raw`` is
    # text for showing, and for bytes that are not UTF-8 it differs from the
    # member, so a delete by ``raw`` never found the entry.
    member: str | bytes = ""
    # The priority lane a queued job was read from (docs/priority.md), 0 for the queue's own list: where a
    # delete must look for it, whatever its payload says.
    lane: int = 0

    @classmethod
    def parse(cls, raw: Any, queue: str = "", lane: int = 0) -> JobRecord:
        undecodable = False
        if isinstance(raw, dict):
            item, problem, raw_text = raw, None, json.dumps(raw, separators=(",", ":"))
        else:
            if isinstance(raw, bytes):
                try:
                    raw_text = raw.decode()
                except UnicodeDecodeError:
                    raw_text, undecodable = raw.decode("utf-8", "backslashreplace"), True
            else:
                raw_text = text(raw)
            item, problem = parse_json(raw_text)
            if problem:
                problem = f"payload is {problem}"
        problems = [problem] if problem else []
        if undecodable:
            problems.insert(0, "payload is not valid UTF-8 (undecodable bytes shown escaped)")
        if not problem and not isinstance(item, dict):
            problems.append(f"payload is a JSON {type(item).__name__}, not an object")
        record = cls(raw=raw_text, item=item if isinstance(item, dict) else {}, problems=problems, queue_hint=queue,
                     member=raw if isinstance(raw, (str, bytes)) else raw_text, lane=lane)
        if record.item:
            record._check_fields()
        return record

    def _check_fields(self) -> None:
        item, problems = self.item, self.problems
        if not isinstance(item.get("class"), str) or not item.get("class"):
            problems.append("'class' is missing or not a string")
        if not isinstance(item.get("args", []), list):
            problems.append("'args' is not an array")
        if not isinstance(item.get("jid"), str) or not item.get("jid"):
            problems.append("'jid' is missing or not a string")
        for name in ("created_at", "enqueued_at", "failed_at", "retried_at"):
            if name in item and epoch_seconds(item[name]) is None:
                problems.append(f"'{name}' is not a number ({item[name]!r:.40})")
        if "retry_count" in item and (isinstance(item["retry_count"], bool)
                                      or not isinstance(item["retry_count"], int)):
            problems.append("'retry_count' is not an integer")
        if "error_backtrace" in item:
            _lines, problem = decode_backtrace(item["error_backtrace"])
            if problem:
                problems.append(problem)

    # --- identity ---------------------------------------------------------------
    @property
    def jid(self) -> str:
        jid = self.item.get("jid")
        return jid if isinstance(jid, str) else ""

    @property
    def ident(self) -> str:
        """The jid, or for an entry without one a stable stand-in, so even junk can be addressed and deleted."""
        return self.jid or "~" + hashlib.sha1(self.raw.encode("utf-8", "replace")).hexdigest()[:16]

    def matches(self, ident: str) -> bool:
        return bool(ident) and ident == self.ident

    def contains(self, needle: str) -> bool:
        """``needle`` (lower case) in the class, jid, error or arguments, as the pages show them."""
        return any(needle in field.lower() for field in (
            self.jid, self.klass, self.display_class, self.error_class, self.error_message, self.args_text))

    @property
    def valid(self) -> bool:
        """Readable enough to be pushed back to a queue."""
        return bool(self.item) and isinstance(self.item.get("class"), str) and bool(self.item.get("class")) \
            and isinstance(self.item.get("args", []), list)

    # --- what the pages show --------------------------------------------------------
    @property
    def priority(self) -> Any:
        """The ``priority`` the job was sent with through Celery's API, as stored; None when it has none."""
        return self.item.get("priority")

    @property
    def klass(self) -> str:
        value = self.item.get("class")
        return value if isinstance(value, str) else text(value) if value is not None else ""

    @property
    def args(self) -> list[Any]:
        args = self.item.get("args")
        return args if isinstance(args, list) else []

    @property
    def queue(self) -> str:
        value = self.item.get("queue")
        return value if isinstance(value, str) else self.queue_hint

    @property
    def display_class(self) -> str:
        """Sidekiq 7 ``JobRecord#display_class``: display_class, then the ActiveJob wrapped class."""
        shown = self.item.get("display_class")
        if isinstance(shown, str) and shown:
            return shown
        if self.klass in ACTIVEJOB_WRAPPERS:
            wrapped = self.item.get("wrapped")
            job_class = wrapped if isinstance(wrapped, str) else text(self.args[0]) if self.args else ""
            arguments = self._activejob_arguments()
            if job_class in MAILER_JOBS and len(arguments) >= 2:
                return f"{text(arguments[0])}#{text(arguments[1])}"
            return job_class or self.klass
        return self.klass or "(unknown class)"

    def _activejob_arguments(self) -> list[Any]:
        first = self.args[0] if self.args else None
        arguments = first.get("arguments") if isinstance(first, dict) else None
        return arguments if isinstance(arguments, list) else []

    @property
    def _reprs(self) -> tuple[str | None, str | None]:
        """The call's ``argsrepr``/``kwargsrepr`` (djwork/jobs/argument_reprs.py): shown in place of the
        arguments, which every page and the CLI then never show (they may be secrets)."""
        argsrepr, kwargsrepr = self.item.get("argsrepr"), self.item.get("kwargsrepr")
        return (argsrepr if isinstance(argsrepr, str) else None, kwargsrepr if isinstance(kwargsrepr, str) else None)

    def _shown_with_reprs(self) -> list[tuple[Any, bool]] | None:
        """Each shown argument and whether it is a repr (text shown as it is); None without reprs."""
        argsrepr, kwargsrepr = self._reprs
        if argsrepr is None and kwargsrepr is None:
            return None
        kwargs = self.item.get("kwargs")
        shown = [(argsrepr, True)] if argsrepr is not None else [(arg, False) for arg in self.args]
        if kwargsrepr is not None:
            shown.append((kwargsrepr, True))
        elif isinstance(kwargs, dict) and kwargs:
            shown.append((kwargs, False))
        return shown

    @property
    def display_args(self) -> list[Any]:
        with_reprs = self._shown_with_reprs()
        if with_reprs is not None:
            return [value for value, _ in with_reprs]
        if self.klass in ACTIVEJOB_WRAPPERS and self.item.get("wrapped"):
            args = self._activejob_arguments()
            if self.item.get("wrapped") in MAILER_JOBS:
                args = args[3:]  # drops MailerClass, method and 'deliver_now' as Sidekiq does
        else:
            args = list(self.args)
        kwargs = self.item.get("kwargs")
        if isinstance(kwargs, dict) and kwargs:
            args = [*args, kwargs]
        if self.item.get("encrypt") and args:
            args = [*args[:-1], "[encrypted data]"]  # Enterprise: the last argument is ciphertext
        return args

    @property
    def args_text(self) -> str:
        with_reprs = self._shown_with_reprs()
        if with_reprs is None:
            with_reprs = [(arg, False) for arg in self.display_args]
        return ", ".join(value if is_repr else json.dumps(value, ensure_ascii=False, default=str)
                         for value, is_repr in with_reprs)

    @property
    def shown_item(self) -> dict[str, Any]:
        """The payload as pages and the CLI show it: ``args``/``kwargs`` replaced by the call's reprs, if any."""
        argsrepr, kwargsrepr = self._reprs
        if argsrepr is None and kwargsrepr is None:
            return self.item
        shown = dict(self.item)
        if argsrepr is not None:
            shown["args"] = argsrepr
        if kwargsrepr is not None:
            shown["kwargs"] = kwargsrepr
        return shown

    def _time(self, name: str) -> dt.datetime | None:
        return to_datetime(epoch_seconds(self.item.get(name)))

    @property
    def created_at(self) -> dt.datetime | None:
        return self._time("created_at") or self._time("enqueued_at")

    @property
    def enqueued_at(self) -> dt.datetime | None:
        return self._time("enqueued_at")

    @property
    def failed_at(self) -> dt.datetime | None:
        return self._time("failed_at")

    @property
    def retried_at(self) -> dt.datetime | None:
        return self._time("retried_at")

    @property
    def retry_count(self) -> int | None:
        value = self.item.get("retry_count")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def error_class(self) -> str:
        return text(self.item.get("error_class")) if self.item.get("error_class") is not None else ""

    @property
    def error_message(self) -> str:
        return text(self.item.get("error_message")) if self.item.get("error_message") is not None else ""

    @property
    def error_backtrace(self) -> list[str] | None:
        return decode_backtrace(self.item.get("error_backtrace"))[0]

    @property
    def tags(self) -> list[str]:
        tags = self.item.get("tags")
        return [text(tag) for tag in tags] if isinstance(tags, list) else []

    @property
    def latency(self) -> float:
        """Seconds since it was enqueued (0 when unknown), as Sidekiq's Queue#latency."""
        enqueued = epoch_seconds(self.item.get("enqueued_at"))
        if enqueued is None:
            return 0.0
        return max(0.0, dt.datetime.now(dt.UTC).timestamp() - enqueued)

    @property
    def pretty(self) -> str:
        """The full payload for the detail page: indented JSON, or the raw text when unreadable."""
        if not self.item:
            return self.raw
        return json.dumps(self.shown_item, indent=2, ensure_ascii=False, sort_keys=True, default=str)


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing: ``items`` plus what the pager needs."""

    items: list[T]
    total: int
    number: int
    per_page: int

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / self.per_page))

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def has_next(self) -> bool:
        return self.number < self.pages

    @property
    def start_index(self) -> int:
        return (self.number - 1) * self.per_page

