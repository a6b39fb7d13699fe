"""This worker process as the cluster sees it: who it is, what it runs now, where it is in its life.

Plain values handed to the components that report them (heartbeat, health
probes, swarm reporter) instead of the whole Launcher: each component sees
only what it reports.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass

import orjson

from djwork import __version__
from djwork.settings.conf import Config

BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def base36(number: int) -> str:
    digits = []
    while True:
        number, remainder = divmod(number, 36)
        digits.append(BASE36[remainder])
        if number == 0:
            return "".join(reversed(digits))


_thread_ids = threading.local()


def thread_id() -> str:
    """Sidekiq's tid: base36 of the thread id xor the pid (computed once per thread)."""
    tid = getattr(_thread_ids, "tid", None)
    if tid is None:
        tid = _thread_ids.tid = base36(threading.get_ident() ^ os.getpid())
    return tid


@dataclass(frozen=True)
class ProcessInfo:
    """Who this process is: the fields of its heartbeat's ``info`` (docs/wire.md, Processes)."""

    identity: str
    hostname: str
    started_at: float
    tag: str
    labels: tuple[str, ...]
    concurrency: int
    queues: list[str]
    weights: list[dict[str, int]]
    embedded: bool
    version: str = __version__

    @classmethod
    def for_config(cls, config: Config, *, embedded: bool) -> ProcessInfo:
        hostname = os.environ.get("DYNO") or socket.gethostname()
        return cls(
            identity=f"{hostname}:{os.getpid()}:{os.urandom(6).hex()}",
            hostname=hostname,
            started_at=time.time(),
            tag=config.tag,
            labels=config.labels,
            concurrency=sum(capsule.concurrency for capsule in config.capsules),
            queues=config.queue_names,
            weights=[{name: weight for name, weight in capsule.queues} for capsule in config.capsules],
            embedded=embedded,
        )

    def info_json(self) -> str:
        return orjson.dumps({
            "hostname": self.hostname,
            "started_at": self.started_at,
            "pid": os.getpid(),
            "tag": self.tag,
            "concurrency": self.concurrency,
            "queues": self.queues,
            "weights": self.weights,
            "labels": list(self.labels),
            "identity": self.identity,
            "version": f"djwork {self.version}",
            "embedded": self.embedded,
        }).decode()


class WorkState:
    """What each processor thread runs now, by Sidekiq tid: the heartbeat publishes it as the work hash.

    Written by processor threads without a lock (a dict item set or pop is
    atomic), read by the heartbeat as a copy.
    """

    def __init__(self) -> None:
        self._running: dict[str, tuple[str, str, int]] = {}

    def begin(self, queue: str, raw: str, run_at: int, tid: str | None = None) -> str:
        """This thread (or the coroutine job with ``tid``) started a job; returns its tid for ``end``."""
        tid = tid or thread_id()
        self._running[tid] = (queue, raw, run_at)
        return tid

    def end(self, tid: str) -> None:
        self._running.pop(tid, None)

    def snapshot(self) -> dict[str, tuple[str, str, int]]:
        return dict(self._running)


class RunState:
    """Where the process is in its life: running, quiet (no new jobs), or stopping (draining until a deadline)."""

    def __init__(self) -> None:
        self.quieted = False
        self.shutdown_deadline: float | None = None  # monotonic; set once a stop began

    @property
    def stopping(self) -> bool:
        return self.shutdown_deadline is not None
