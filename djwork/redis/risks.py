"""Redis settings that lose jobs, read from the server itself (docs/deployment.md, Redis settings).

An evicting ``maxmemory-policy`` drops queued jobs, unique locks and batch
records without an error to anyone; a Redis near its ``maxmemory`` is about
to evict or (with ``noeviction``) to refuse every push; a Redis with neither
AOF nor RDB save points loses every queued job when it restarts. Nothing
in Redis's replies says so until jobs are gone, so the worker logs these at
boot and the dashboard shows them while they hold.

Both read through ``read(conn)``: INFO memory and persistence, plus
``CONFIG GET save`` (the only place RDB save points show), pipelined. A managed Redis
that renames INFO or CONFIG gives no verdict rather than a false alarm.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from redis.exceptions import ResponseError

from djwork.redis.cluster import servers

# Above this share of maxmemory a burst of pushes reaches the limit: an evicting
# Redis starts dropping keys, a noeviction one refuses writes (pushes fail).
MEMORY_WARNING_SHARE = 0.8

SAFE_POLICY = "noeviction"


@dataclass(frozen=True)
class RedisRisk:
    """One risky setting; ``kind`` is stable (tests and the dashboard key on it), ``text`` is for people."""

    kind: str  # "maxmemory-policy", "memory-full", "no-persistence"
    level: int  # logging.WARNING: jobs can be lost now; logging.INFO: only on a restart
    text: str

    @property
    def is_warning(self) -> bool:
        return self.level >= logging.WARNING


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _int(value: Any) -> int:
    try:
        return int(_text(value))
    except ValueError:
        return 0


def _megabytes(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MB"


def assess(info: Mapping[str, Any], save_points: str | None) -> list[RedisRisk]:
    """The risks in ``info`` (INFO memory + persistence fields) and ``save_points`` (CONFIG GET save; None: unknown).

    Warnings first, then the persistence note.
    """
    risks: list[RedisRisk] = []
    policy = _text(info.get("maxmemory_policy", SAFE_POLICY))
    if policy != SAFE_POLICY:
        risks.append(RedisRisk(
            "maxmemory-policy", logging.WARNING,
            f"Redis maxmemory-policy is {policy}: when memory fills, Redis evicts keys, queued jobs among them, "
            f"and nobody is told. Set maxmemory-policy to {SAFE_POLICY} "
            f"(CONFIG SET maxmemory-policy {SAFE_POLICY}, and in redis.conf)."))
    limit, used = _int(info.get("maxmemory", 0)), _int(info.get("used_memory", 0))
    if limit > 0 and used > MEMORY_WARNING_SHARE * limit:
        outcome = ("refuses every push" if policy == SAFE_POLICY else "evicts keys, queued jobs among them")
        risks.append(RedisRisk(
            "memory-full", logging.WARNING,
            f"Redis used_memory is {_megabytes(used)}, {used / limit:.0%} of maxmemory {_megabytes(limit)}: "
            f"at 100 % it {outcome}. Raise maxmemory, or free memory (dead set, queues nobody drains, "
            f"RESULT_TTL; docs/capacity.md)."))
    aof = _text(info.get("aof_enabled", "")) == "1"
    if save_points is not None and not save_points.strip() and "aof_enabled" in info and not aof:
        risks.append(RedisRisk(
            "no-persistence", logging.INFO,
            "Redis has no persistence (appendonly no, no save points): a restart loses every queued job. "
            "Fine for development; in production turn on appendonly yes or RDB save points."))
    return risks


def read(conn: Any) -> list[RedisRisk]:
    """Ask ``conn``'s server, or each primary of a cluster (its risks named by node), one round trip each."""
    risks = []
    for name, server in servers(conn):
        risks += [replace(risk, text=f"{name}: {risk.text}") if name else risk for risk in _read_server(server)]
    return risks


def _read_server(conn: Any) -> list[RedisRisk]:
    """Ask one server in one round trip; [] when INFO is not available (renamed on some managed Redis)."""
    pipe = conn.pipeline(transaction=False)
    pipe.info("memory")
    pipe.info("persistence")
    pipe.config_get("save")
    memory, persistence, save = pipe.execute(raise_on_error=False)
    if isinstance(memory, ResponseError) or isinstance(persistence, ResponseError):
        return []
    # CONFIG renamed or refused: no verdict on RDB save points, so no persistence note.
    save_points = None if isinstance(save, ResponseError) else _text(save.get("save", ""))
    return assess({**memory, **persistence}, save_points)


def log_risks(risks: list[RedisRisk], logger: logging.Logger) -> None:
    """One line per risk, at its level: the operator sees each once per boot."""
    for risk in risks:
        logger.log(risk.level, "djwork: %s", risk.text)
