"""Where djwork connects, said without secrets: for the dashboard's footer and error messages.

A Redis URL may carry a password in its user part (``redis://:secret@host``)
or in its query (``?password=secret``, which redis-py reads), and a
sentinel URL a ``sentinel_password``; what is shown keeps only the scheme,
the host(s) and port(s), and the database (or the sentinel service name; a cluster's is always 0).
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from djwork.settings.conf import Config, get_config


def public_url(url: str) -> str:
    """``redis://:pw@host:6380/2?password=x`` -> ``redis://host:6380/2``; never raises."""
    try:
        parts = urlsplit(url)
        hosts = parts.netloc.rpartition("@")[2]
        db = parse_qs(parts.query).get("db", [""])[0]
        if parts.scheme == "unix":
            return f"unix://{parts.path}?db={db or '0'}"
        if parts.scheme == "redis+sentinel":
            return f"{parts.scheme}://{hosts}{parts.path}"
        if parts.scheme.endswith("+cluster"):  # a cluster has one database, 0
            return f"{parts.scheme}://{hosts}/0"
        if hosts and ":" not in hosts.rpartition("]")[2]:
            hosts += ":6379"
        return f"{parts.scheme}://{hosts}/{parts.path.strip('/') or db or '0'}"
    except (ValueError, TypeError, AttributeError):
        return "(a Redis URL that can't be read)"


def public_location(config: Config | None = None) -> str:
    """The Redis this process talks to (its CACHE alias's, else REDIS_URL), without any password."""
    from djwork.redis.connections import url_and_options

    url, _options = url_and_options(config or get_config())
    return public_url(url)
