"""Writing cluster data the way djwork and Ruby Sidekiq (6.4.1 and 7.x) write it, for the dashboard's tests.

Shapes follow docs/wire.md: compact JSON, Float epoch seconds,
``<identity>`` hashes with ``info busy beat quiet rss rtt_us``, work hashes
whose ``payload`` is the job JSON as a string and ``run_at`` an Integer, and
``error_backtrace`` as strict (7.x) or MIME (6.4) base64 of zlib-deflated JSON.
"""

from __future__ import annotations

import base64
import json
import os
import time
import zlib
from typing import Any

from djwork.worker.history import append

XSS_SCRIPT = "<script>alert(1)</script>"
XSS_IMG = '"><img src=x onerror=alert(1)>'
XSS_CLASS = f"Evil{XSS_SCRIPT}"


def dumps(value: Any) -> str:
    """Ruby's JSON.generate: compact."""
    return json.dumps(value, separators=(",", ":"))


def jid() -> str:
    return os.urandom(12).hex()


new_jid = jid  # for the functions whose ``jid`` parameter hides this one


def job(klass: str = "HardJob", args: list[Any] | None = None, queue: str = "default", **fields: Any) -> dict:
    """A Sidekiq 7 queue entry, with the fields and key order Sidekiq 7.3 writes (docs/wire.md, Jobs)."""
    now = time.time()
    payload = {"retry": True, "queue": queue, "class": klass, "args": [1, "two"] if args is None else args,
               "jid": jid(), "created_at": now - 5, "enqueued_at": now - 5}
    payload.update(fields)
    return payload


def strict_backtrace(lines: list[str]) -> str:
    """Sidekiq 7: Base64.strict_encode64(Zlib::Deflate.deflate(JSON.generate(lines)))."""
    return base64.b64encode(zlib.compress(dumps(lines).encode())).decode()


def mime_backtrace(lines: list[str]) -> str:
    """Sidekiq 6.4: Base64.encode64 of the same bytes: a newline every 60 characters and at the end."""
    encoded = base64.b64encode(zlib.compress(dumps(lines).encode())).decode()
    return "".join(encoded[i:i + 60] + "\n" for i in range(0, len(encoded), 60))


def failed(payload: dict, count: int = 0, error_class: str = "RuntimeError", message: str = "boom",
           backtrace: str | None = None) -> dict:
    """What Sidekiq's JobRetry adds on the (count+1)th failure (docs/wire.md, Checks: R1-R5)."""
    now = time.time()
    payload = {**payload, "error_class": error_class, "error_message": message, "retry_count": count,
               "failed_at": now - 60}
    if count > 0:
        payload["retried_at"] = now - 10
    if backtrace is not None:
        payload["error_backtrace"] = backtrace
    payload.pop("enqueued_at", None)
    return payload


def push(redis: Any, payload: dict | str, queue: str = "default") -> str:
    raw = payload if isinstance(payload, str) else dumps(payload)
    pipe = redis.pipeline()
    pipe.sadd("queues", queue)
    pipe.lpush(f"queue:{queue}", raw)
    pipe.execute()
    return raw


def zadd(redis: Any, key: str, payload: dict | str, score: float) -> str:
    raw = payload if isinstance(payload, str) else dumps(payload)
    redis.zadd(key, {raw: score})
    return raw


def process(redis: Any, identity: str, *, version: str = "7.3.10", queues: list[str] | None = None,
            busy_jobs: list[dict] | None = None, quiet: str = "false", embedded: bool | None = False,
            tag: str = "app", concurrency: int = 5, legacy_work_key: bool = False, labels: list[str] | None = None,
            extra_hash: dict | None = None) -> dict:
    """A live process's heartbeat as Sidekiq 7 writes it (``version=None``: 6.4.1, no version/weights/embedded)."""
    now = time.time()
    hostname, pid = identity.split(":")[0], int(identity.split(":")[1]) if identity.count(":") >= 1 else 1
    queues = queues or ["default", "low"]
    info: dict[str, Any] = {"hostname": hostname, "started_at": now - 3600, "pid": pid, "tag": tag,
                            "concurrency": concurrency, "queues": queues, "labels": labels or [],
                            "identity": identity}
    if version is not None:
        info.update(weights=[dict.fromkeys(queues, 0)], version=version, embedded=bool(embedded))
    busy_jobs = busy_jobs or []
    fields = {"info": dumps(info), "busy": str(len(busy_jobs)), "beat": repr(now - 1), "quiet": quiet,
              "rss": "27272", "rtt_us": "96", **(extra_hash or {})}
    pipe = redis.pipeline()
    pipe.sadd("processes", identity)
    pipe.hset(identity, mapping=fields)
    pipe.expire(identity, 60)
    if busy_jobs:
        work_key = f"{identity}:workers" if legacy_work_key else f"{identity}:work"
        for index, payload in enumerate(busy_jobs):
            pipe.hset(work_key, f"t{index}", dumps({"queue": payload.get("queue", "default"),
                                                    "payload": dumps(payload), "run_at": int(now) - 30}))
        pipe.expire(work_key, 60)
    pipe.execute()
    return info


def history(redis: Any, *, klass: str = "HardJob", status: str = "ok", queue: str = "default",
            duration_ms: float = 12.5, error_class: str = "", error_message: str = "", started: float | None = None,
            identity: str = "host:1:abc", jid: str | None = None, resumed: bool = False) -> str:
    """One run appended to djwork:history by the worker's own writer (docs/history.md); returns its run id."""
    append(redis, identity, 10_000, [(jid or new_jid(), klass, queue, status,
                                      time.time() if started is None else started, duration_ms, error_class,
                                      error_message, 1 if resumed else 0)])
    ((entry_id, _fields),) = redis.xrevrange("djwork:history", count=1)
    return f"{entry_id.decode() if isinstance(entry_id, bytes) else entry_id}/0"

