"""What a setting spec is, and the kinds of value a setting takes.

A kind is one strict parser: it returns the typed value the ``Config``
holds, or raises ``Invalid`` whose message completes "must be ...". The
same function serves both readers of a setting: ``SettingSpec.value``
falls back to the default's value when it raises (so a bad setting never
crashes ``manage.py check`` before it can be reported), and ``check_kind``
turns the refusal into a system-check error with the spec's id and hint.
Checks that look at more than one value, or report several problems of one
value, are in djwork.settings.value_checks.

This module imports nothing of djwork, so djwork.settings.conf can stand on it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, parse_qs, unquote

from django.core.checks import CheckMessage, Error

QUEUE_NAME = re.compile(r"\A[a-z_:.\-0-9]+\Z", re.IGNORECASE)

# (spec, merged settings, the keys the user gave) -> what `manage.py check` reports about the spec's key.
Check = Callable[["SettingSpec", Mapping[str, Any], Mapping[str, Any]], list[CheckMessage]]


class Invalid(ValueError):
    """A value a setting can't take; the message completes "DJWORK[key] must be ..."."""


def check_kind(spec: SettingSpec, values: Mapping[str, Any], _given: Mapping[str, Any]) -> list[CheckMessage]:
    """The one error of a key whose value its kind refuses."""
    value = values[spec.name]
    try:
        spec.parse(value)
    except Invalid as problem:
        return [Error(f"DJWORK[{spec.name!r}] must be {problem}, got {value!r}.", hint=spec.hint, id=spec.check_id)]
    return []


@dataclass(frozen=True)
class SettingSpec:
    """One key of ``settings.DJWORK``: its default, its kind, its check and its line in docs/settings.md."""

    name: str
    default: Any
    parse: Callable[[Any], Any]  # the kind: the typed value, or Invalid/ValueError/TypeError
    check_id: str
    hint: str
    section: str  # the doc's table the key is listed in
    doc: str
    check: Check = check_kind
    also: tuple[str, ...] = ()  # ids other checks raise about this key, listed beside check_id in the doc
    doc_default: str = ""  # the doc's Default cell, where the literal alone would not say enough

    @property
    def attribute(self) -> str:
        """The ``Config`` attribute that holds the parsed value."""
        return self.name.lower()

    def value(self, raw: Any) -> Any:
        """What the ``Config`` holds for ``raw``: its parse, or the default's when the kind refuses it."""
        try:
            return self.parse(raw)
        except (TypeError, ValueError):
            return self.parse(self.default)


# --- kinds ---------------------------------------------------------------------
def is_number(value: Any) -> bool:
    # bool is an int subclass; CONCURRENCY=True is a typo, not 1.
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def seconds(value: Any) -> float:
    if not is_number(value) or value <= 0:
        raise Invalid("a number > 0")
    return float(value)


def seconds_or_zero(value: Any) -> float:
    if not is_number(value) or value < 0:
        raise Invalid("a number >= 0")
    return float(value)


def optional_seconds(value: Any) -> float | None:
    if value is not None and (not is_number(value) or value <= 0):
        raise Invalid("None or a number > 0")
    return None if value is None else float(value)


def count(value: Any) -> int:
    if not is_integer(value) or value < 1:
        raise Invalid("an integer >= 1")
    return value


def count_or_zero(value: Any) -> int:
    if not is_integer(value) or value < 0:
        raise Invalid("an integer >= 0")
    return value


def optional_pool_size(value: Any) -> int | None:
    # One connection is usable (the replay-policy tests exhaust such a pool on
    # purpose); check_pool_size holds settings to the documented minimum of 2.
    if value is not None and (not is_integer(value) or value < 1):
        raise Invalid("None or an integer >= 1")
    return value


def optional_port(value: Any) -> int | None:
    if value is not None and (not is_integer(value) or not 0 < value < 65536):
        raise Invalid("None or a TCP port")
    return value


def flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Invalid("True or False")
    return value


def text(value: Any) -> str:
    if not isinstance(value, str):
        raise Invalid("a string")
    return value


def optional_text(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise Invalid("None or a string")
    return value


def address(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise Invalid("an address string")
    return value


def strings(value: Any) -> tuple[str, ...]:
    # A bare string would become one label per character.
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
        raise Invalid("a list of strings")
    return tuple(value)


def one_of(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if value not in choices:
            raise Invalid(" or ".join(repr(choice) for choice in choices))
        return value

    return parse


def keyword_arguments(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise Invalid("a dict of redis-py connection keyword arguments")
    return dict(value)


def name_map(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise Invalid("a dict mapping job names (e.g. a Ruby class name) to dotted paths")
    return dict(value)


def queue_routes(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) and QUEUE_NAME.match(v)
                                              for k, v in value.items()):
        raise Invalid("a dict mapping job names (or glob patterns such as 'reports.*') to queue names")
    return dict(value)


def queue_name(value: Any) -> str:
    if not isinstance(value, str) or not QUEUE_NAME.match(value):
        raise Invalid("a queue name (letters, digits, _ : . -)")
    return value


def sequence(value: Any) -> tuple[Any, ...]:
    if not isinstance(value, (list, tuple)):
        raise Invalid("a list of dotted paths or callables")
    return tuple(value)


def anything(value: Any) -> Any:
    return value


# --- Redis Sentinel URLs -------------------------------------------------------
SENTINEL_SCHEME = "redis+sentinel"
SENTINEL_PORT = 26379
SENTINEL_HINT = ("Use redis+sentinel://[:password@]host:port[,host:port...]/service_name[/db], e.g."
                 " redis+sentinel://s1:26379,s2:26379,s3:26379/mymaster/0.")
# Query options of a sentinel URL -> the parser of their value. Timeouts replace CONNECT_TIMEOUT and
# SOCKET_TIMEOUT for this server (a blocking fetch still gets FETCH_TIMEOUT on top) and are what the
# sentinels are asked with; sentinel_* authenticate to the sentinels, which keep passwords of their own.
SENTINEL_OPTIONS: dict[str, Callable[[str], Any]] = {
    "sentinel_username": str,
    "sentinel_password": str,
    "socket_timeout": float,
    "socket_connect_timeout": float,
    "master_check_interval": float,
}


@dataclass(frozen=True)
class SentinelUrl:
    """A parsed ``redis+sentinel://`` URL: where the sentinels are and which master they watch."""

    sentinels: tuple[tuple[str, int], ...]
    service_name: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    options: dict[str, Any] = field(default_factory=dict)  # SENTINEL_OPTIONS given in the query


def is_sentinel_url(value: Any) -> bool:
    return isinstance(value, str) and value.lower().startswith(f"{SENTINEL_SCHEME}://")


def split_host_list_url(value: str) -> SplitResult:
    """``value`` split as ``urlsplit`` would, for a URL whose netloc is a list of hosts.

    Python 3.13's ``urlsplit`` refuses a netloc with text before a ``[``, so
    ``h1:7000,[::1]:7001`` (an IPv6 host not first in the list) raised
    "Invalid IPv6 URL" there and parsed on 3.11.
    """
    scheme, _, rest = value.partition("://")
    rest, _, fragment = rest.partition("#")
    netloc, slash, tail = rest.partition("/")
    path, _, query = (slash + tail).partition("?")
    if not slash:
        netloc, _, query = netloc.partition("?")
    return SplitResult(scheme, netloc, path, query, fragment)


def query_options(query: str, known: dict[str, Callable[[str], Any]], what: str) -> dict[str, Any]:
    """A URL's query options, each parsed by its entry in ``known`` (the last value of a repeated one wins);
    ``Invalid`` naming ``what`` for an unknown option, a number that isn't one, or a timeout not above 0."""
    options: dict[str, Any] = {}
    for name, values in parse_qs(query, keep_blank_values=True).items():
        if name not in known:
            raise Invalid(f"a {what} URL whose query options are among {', '.join(known)}; {name!r} is not")
        try:
            options[name] = known[name](values[-1])
        except ValueError:
            raise Invalid(f"a {what} URL whose {name} is a number, not {values[-1]!r}") from None
        if isinstance(options[name], float) and not options[name] > 0:
            raise Invalid(f"a {what} URL whose {name} is a number > 0, not {values[-1]!r}")
    return options


def credentials_and_hosts(
    parts: SplitResult, default_port: int, what: str, host: str
) -> tuple[str, str, tuple[tuple[str, int], ...]]:
    """(username, password, hosts) of a URL naming a list of hosts (a sentinel's, a cluster's), the credentials
    still quoted; ``Invalid`` naming ``what`` for an empty list or an empty host between commas.

    urlsplit's .hostname/.port can't read a list of hosts: the netloc is split by hand.
    """
    credentials, _, hosts = parts.netloc.rpartition("@")
    username, _, password = credentials.partition(":")
    entries = [entry.strip() for entry in hosts.split(",")]
    if not any(entries):
        raise Invalid(f"a {what} URL naming at least one {host} host:port")
    if not all(entries):
        raise Invalid(f"a {what} URL without an empty host between commas")
    return username, password, tuple(host_and_port(entry, default_port, host) for entry in entries)


def host_and_port(entry: str, default_port: int, what: str) -> tuple[str, int]:
    """``host[:port]`` or ``[v6]:port`` of a list of hosts in a URL (a sentinel's, a cluster node's)."""
    host, port = entry, ""
    if entry.startswith("["):  # [::1]:26379
        host, _, rest = entry[1:].partition("]")
        port = rest.removeprefix(":")
    elif entry.count(":") == 1:
        host, _, port = entry.partition(":")
    if not host:
        raise Invalid(f"a {what} address with a host, not {entry!r}")
    if not port:
        return host, default_port
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise Invalid(f"a {what} address with a TCP port, not {entry!r}")
    return host, int(port)


def sentinel_url(value: Any) -> SentinelUrl:
    """``redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service_name[/db][?option=...]``.

    The user and password are the master's; a host without a port is on 26379.
    """
    if not is_sentinel_url(value):
        raise Invalid(f"a {SENTINEL_SCHEME}:// URL")
    parts = split_host_list_url(value)
    username, password, sentinels = credentials_and_hosts(parts, SENTINEL_PORT, "sentinel", "sentinel")
    path = parts.path.split("/")
    if len(path) < 2 or not path[1]:
        raise Invalid("a sentinel URL naming the master's service name after the hosts (.../mymaster/0)")
    if len(path) > 3 or (len(path) == 3 and not path[2].isdigit()):
        raise Invalid(f"a sentinel URL whose path is /service_name[/db] with a numeric db, not {parts.path!r}")
    options = query_options(parts.query, SENTINEL_OPTIONS, "sentinel")
    return SentinelUrl(sentinels, unquote(path[1]), int(path[2]) if len(path) == 3 else 0,
                       unquote(username) or None, unquote(password) or None, options)


def check_sentinel_url(url: str, what: str = "DJWORK['REDIS_URL']") -> list[CheckMessage]:
    """The one error (djwork.E002) of a ``redis+sentinel://`` URL that can't be used."""
    try:
        sentinel_url(url)
    except Invalid as problem:
        return [Error(f"{what} must be {problem}, got {url!r}.", hint=SENTINEL_HINT, id="djwork.E002")]
    return []


# --- queues and capsules -------------------------------------------------------
@dataclass(frozen=True)
class Capsule:
    """A named group of queues with its own processor threads (Sidekiq 7)."""

    name: str
    concurrency: int
    queues: tuple[tuple[str, int], ...]

    @property
    def queue_names(self) -> list[str]:
        return [name for name, _weight in self.queues]

    @property
    def weighted(self) -> bool:
        """Weights given -> random weighted order per fetch; none -> strict order."""
        return any(weight > 0 for _name, weight in self.queues)


def parse_queue(entry: Any) -> tuple[str, int]:
    """'name', ('name', weight), ['name', weight] or 'name,weight' -> (name, weight)."""
    if isinstance(entry, str):
        if "," in entry:
            name, _, weight = entry.partition(",")
            return name.strip(), int(weight)
        return entry, 0
    if isinstance(entry, (tuple, list)) and len(entry) == 2:
        name, weight = entry
        if not isinstance(name, str) or isinstance(weight, bool) or not isinstance(weight, int):
            raise ValueError(f"queue entry {entry!r} must be (name: str, weight: int)")
        return name, weight
    raise ValueError(f"queue entry {entry!r} must be a name or a (name, weight) pair")


def parse_queues(entries: Any) -> tuple[tuple[str, int], ...]:
    if isinstance(entries, str) or not isinstance(entries, (list, tuple)):
        raise ValueError("QUEUES must be a list of names or (name, weight) pairs")
    return tuple(parse_queue(entry) for entry in entries)


def queue_list(value: Any) -> tuple[tuple[str, int], ...]:
    queues = parse_queues(value)
    if not queues:
        raise Invalid("a list of at least one queue")
    return queues


def extra_capsules(value: Any) -> tuple[Capsule, ...]:
    """CAPSULES -> Capsules; a capsule that can't be read is left out (the check names it)."""
    if not isinstance(value, dict):
        raise Invalid("a dict of name -> {'QUEUES': [...], 'CONCURRENCY': n}")
    capsules = []
    for name, spec in value.items():
        try:
            concurrency = spec.get("CONCURRENCY", 1)
            capsules.append(Capsule(str(name), concurrency if is_integer(concurrency) and concurrency > 0 else 1,
                                    parse_queues(spec.get("QUEUES", []))))
        except (ValueError, TypeError, AttributeError):
            continue
    return tuple(capsules)
