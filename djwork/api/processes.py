"""Processes (``processes`` SET + ``<identity>`` HASHes), their signals and their running jobs.

The keys are described in docs/wire.md, Processes, Work and Signals.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from djwork.api import access
from djwork.api.errors import EmbeddedProcess, StaleEntry
from djwork.api.records import JobRecord, text, to_datetime, to_float, to_int
from djwork.redis import keys

HASH_FIELDS = ("info", "busy", "beat", "quiet", "rss", "rtt_us", "concurrency")
CLEANUP_TTL = 60  # Sidekiq 7: prune members without a hash at most once a minute



@dataclass
class Process:
    """One process as its heartbeat last described it."""

    identity: str
    info: dict[str, Any]
    busy: int = 0
    beat: float | None = None
    quiet_flag: str = ""
    rss_kb: int = 0
    rtt_us: int = 0
    concurrency_field: int | None = None
    problems: list[str] = field(default_factory=list)
    pending_signals: list[str] = field(default_factory=list)  # still in <identity>-signals, not yet taken

    @classmethod
    def from_hash(cls, identity: str, values: list[Any]) -> Process | None:
        """From HMGET ``HASH_FIELDS``; None when there is no ``info`` (Sidekiq skips such members)."""
        info_raw, busy, beat, quiet, rss, rtt, concurrency = (list(values) + [None] * 7)[:7]
        if info_raw is None:
            return None
        problems = []
        try:
            info = json.loads(text(info_raw))
        except ValueError as error:
            info, problems = {}, [f"info is not valid JSON ({error})"]
        if not isinstance(info, dict):
            info, problems = {}, ["info is not a JSON object"]
        if info and info.get("identity") not in (None, identity):
            problems.append(f"info.identity {info.get('identity')!r} differs from the key")
        return cls(identity=identity, info=info, busy=to_int(busy), beat=to_float(beat),
                   quiet_flag=text(quiet), rss_kb=to_int(rss), rtt_us=to_int(rtt),
                   concurrency_field=to_int(concurrency) if concurrency is not None else None, problems=problems)

    def _info_str(self, name: str) -> str:
        value = self.info.get(name)
        return value if isinstance(value, str) else "" if value is None else text(value)

    @property
    def hostname(self) -> str:
        return self._info_str("hostname")

    @property
    def pid(self) -> int | None:
        value = self.info.get("pid")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def tag(self) -> str:
        return self._info_str("tag")

    @property
    def version(self) -> str:
        return self._info_str("version")

    @property
    def labels(self) -> list[str]:
        labels = self.info.get("labels")
        return [text(label) for label in labels] if isinstance(labels, list) else []

    @property
    def queues(self) -> list[str]:
        queues = self.info.get("queues")
        if isinstance(queues, list):
            return [text(name) for name in queues]
        return [part.strip() for part in queues.split(",")] if isinstance(queues, str) else []

    @property
    def weights(self) -> dict[str, int]:
        """Queue weights merged over capsules (7.0.2 wrote one Hash, 7.0.3+ an Array of Hashes)."""
        raw = self.info.get("weights")
        merged: dict[str, int] = {}
        for group in raw if isinstance(raw, list) else [raw] if isinstance(raw, dict) else []:
            if isinstance(group, dict):
                for name, weight in group.items():
                    merged[text(name)] = to_int(weight)
        return merged

    @property
    def concurrency(self) -> int:
        """8.1.3+'s hash field wins over ``info.concurrency``, as in Sidekiq 8's ProcessSet."""
        if self.concurrency_field is not None:
            return self.concurrency_field
        return to_int(self.info.get("concurrency"))

    @property
    def embedded(self) -> bool:
        return self.info.get("embedded") is True

    @property
    def started_at(self) -> dt.datetime | None:
        return to_datetime(to_float(self.info.get("started_at")))

    @property
    def last_beat(self) -> dt.datetime | None:
        return to_datetime(self.beat)

    @property
    def stopping(self) -> bool:
        """Exactly ``quiet == "true"``, as Sidekiq's Process#stopping? (docs/wire.md, check P4)."""
        return self.quiet_flag == "true"

    @property
    def requested(self) -> str:
        """"stop" or "quiet" while such a signal waits for the process's next beat to take it, else ""."""
        if "TERM" in self.pending_signals:
            return "stop"
        if "TSTP" in self.pending_signals and not self.stopping:
            return "quiet"
        return ""

    @property
    def rss_mb(self) -> float:
        return self.rss_kb / 1024

    @property
    def rtt_ms(self) -> float:
        return self.rtt_us / 1000

    # --- signals ------------------------------------------------------------------
    def quiet(self) -> None:
        """Stop fetching new jobs (TSTP); visible as quiet within two beats."""
        self.signal("TSTP")

    def stop(self) -> None:
        """Finish or requeue running jobs and exit (TERM)."""
        self.signal("TERM")

    def dump_threads(self) -> None:
        self.signal("TTIN")

    @property
    def takes_remote_signals(self) -> bool:
        """Whether Quiet/Stop may be sent: any standalone process, and djwork's embedded workers.

        A djwork embedded worker acts on a signal from the list in place (the
        host application keeps running: docs/deployment.md). Sidekiq 7's
        embedded mode passes it to ``Process.kill`` on its own pid, stopping the
        host application itself, which is why Sidekiq 7 refuses: so do we, for
        every embedded process that is not djwork's.
        """
        return not self.embedded or self.version.startswith("djwork ")

    def signal(self, name: str) -> None:
        """MULTI LPUSH ``<identity>-signals`` + EXPIRE 60, as Sidekiq's Process#signal.

        Refused (``EmbeddedProcess``) for an embedded process other than djwork's (``takes_remote_signals``).
        """
        if not self.takes_remote_signals:
            raise EmbeddedProcess(f"{self.identity} is a Sidekiq process embedded in another application: a "
                                  "signal would stop that application too, so quiet or stop it from there")
        key = keys.signals(self.identity)

        def write(conn: Any) -> None:
            pipe = conn.pipeline(transaction=True)
            pipe.lpush(key, name)
            pipe.expire(key, keys.PROCESS_TTL)
            pipe.execute()

        # Not replayed after a lost reply: a second TERM means "stop draining now".
        access.write(write, replay=False)


class ProcessSet:
    """Every live process, sorted by identity. Reading prunes dead members at most once a minute."""

    def __init__(self, cleanup: bool = True) -> None:
        if cleanup:
            self.cleanup()

    @staticmethod
    def cleanup() -> int:
        """SREM members whose hash has no ``info`` (expired); rate-limited by ``process_cleanup`` SET NX EX 60."""

        def write(conn: Any) -> int:
            if not conn.set(keys.PROCESS_CLEANUP, "1", nx=True, ex=CLEANUP_TTL):
                return 0
            pipe = conn.pipeline(transaction=False)
            pipe.smembers(keys.PROCESSES)
            members = pipe.execute(raise_on_error=False)[0]
            if not isinstance(members, set) or not members:
                return 0
            members = sorted(members)
            pipe = conn.pipeline(transaction=False)
            for member in members:
                pipe.hget(keys.process(text(member)), "info")
            infos = pipe.execute(raise_on_error=False)
            # A wrong-type key errors here: not proof the process is gone, so it is left alone.
            gone = [member for member, info in zip(members, infos, strict=True) if info is None]
            return conn.srem(keys.PROCESSES, *gone) if gone else 0

        # Replayed: a second run finds the guard set (or nothing left to prune) and removes nothing more.
        return access.write(write, replay=True)

    @staticmethod
    def identities() -> list[str]:
        reply = access.read(lambda conn: conn.pipeline(transaction=False).smembers(keys.PROCESSES)
                            .execute(raise_on_error=False)[0])
        return sorted(text(member) for member in reply) if isinstance(reply, set) else []

    def __iter__(self):
        return iter(self.all())

    def all(self) -> list[Process]:
        identities = self.identities()

        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for identity in identities:
                pipe.hmget(keys.process(identity), list(HASH_FIELDS))
                pipe.lrange(keys.signals(identity), 0, -1)
            return pipe.execute(raise_on_error=False)

        replies = access.read(read) if identities else []
        out = []
        for index, identity in enumerate(identities):
            values, signals = replies[2 * index], replies[2 * index + 1]
            if isinstance(values, Exception):
                continue
            process = Process.from_hash(identity, values)
            if process is not None:
                # Signals wait in the list until the process's next beat (up to a heartbeat
                # interval): showing them makes a Quiet click visible at once.
                if isinstance(signals, list):
                    process.pending_signals = [text(name) for name in signals]
                out.append(process)
        return out

    def size(self) -> int:
        return len(self.identities())

    def total_concurrency(self) -> int:
        return sum(process.concurrency for process in self.all())

    def total_rss_kb(self) -> int:
        return sum(process.rss_kb for process in self.all())

    @staticmethod
    def get(identity: str) -> Process | None:
        """A member of ``processes`` with an ``info`` field, else None (Sidekiq 7's ProcessSet[])."""

        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            pipe.sismember(keys.PROCESSES, identity)
            pipe.hmget(keys.process(identity), list(HASH_FIELDS))
            return pipe.execute(raise_on_error=False)

        member, values = access.read(read)
        if member not in (True, 1) or isinstance(values, Exception):
            return None
        return Process.from_hash(identity, values)

    @classmethod
    def signal(cls, identity: str, name: str) -> Process:
        """Signal one process by identity; StaleEntry if it is gone, EmbeddedProcess if embedded."""
        process = cls.get(identity)
        if process is None:
            raise StaleEntry(f"no running process {identity} (it may have stopped)")
        process.signal(name)
        return process

    def signal_all(self, name: str) -> list[Process]:
        """Signal every process that takes remote signals (the Web UI's Quiet All / Stop All)."""
        done = []
        for process in self.all():
            if process.takes_remote_signals:
                process.signal(name)
                done.append(process)
        return done

    @staticmethod
    def leader() -> str:
        """``dear-leader`` (Enterprise) or ""."""
        reply = access.read(lambda conn: conn.pipeline(transaction=False).get(keys.LEADER)
                            .execute(raise_on_error=False)[0])
        return text(reply) if isinstance(reply, bytes) else ""


@dataclass
class Work:
    """One running job: which process and thread, since when, and the job itself."""

    identity: str
    tid: str
    queue: str
    run_at: dt.datetime | None
    job: JobRecord
    problems: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, identity: str, tid: str, raw: Any) -> Work:
        problems: list[str] = []
        try:
            value = json.loads(text(raw))
        except ValueError as error:
            value, problems = {}, [f"work entry is not valid JSON ({error})"]
        if not isinstance(value, dict):
            value, problems = {}, problems or ["work entry is not a JSON object"]
        payload = value.get("payload")
        # 7.x stores the job JSON as a string inside the JSON; an object (6.4-era writers) reads too.
        job = JobRecord.parse(payload if isinstance(payload, (str, dict)) else "", text(value.get("queue")))
        if payload is None and value:
            problems.append("work entry has no payload")
        run_at = to_float(value.get("run_at"))
        if run_at is None and value:
            problems.append("work entry has no numeric run_at")
        return cls(identity, tid, text(value.get("queue")) or job.queue, to_datetime(run_at), job,
                   problems + job.problems)

    @property
    def runtime(self) -> float:
        if self.run_at is None:
            return 0.0
        return max(0.0, (dt.datetime.now(dt.UTC) - self.run_at).total_seconds())


class WorkSet:
    """Running jobs from every process's ``<identity>:work`` hash, else Sidekiq 6.4.1's ``:workers``."""

    def all(self, processes: list[Process] | None = None) -> list[Work]:
        identities = [process.identity for process in processes] if processes is not None \
            else ProcessSet.identities()

        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for identity in identities:
                pipe.hgetall(keys.work(identity))
                pipe.hgetall(keys.workers_legacy(identity))
            return pipe.execute(raise_on_error=False)

        replies = access.read(read) if identities else []
        out = []
        for index, identity in enumerate(identities):
            current, legacy = replies[2 * index], replies[2 * index + 1]
            entries = current if isinstance(current, dict) and current else legacy
            if not isinstance(entries, dict):
                continue
            for tid, raw in sorted(entries.items()):
                out.append(Work.parse(identity, text(tid), raw))
        out.sort(key=lambda work: (work.run_at or dt.datetime.max.replace(tzinfo=dt.UTC)))
        return out

    def __iter__(self):
        return iter(self.all())

    @staticmethod
    def size() -> int:
        """Sum of the processes' ``busy`` fields, as Sidekiq's Workers#size."""
        identities = ProcessSet.identities()

        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for identity in identities:
                pipe.hget(keys.process(identity), "busy")
            return pipe.execute(raise_on_error=False)

        replies = access.read(read) if identities else []
        return sum(to_int(value) for value in replies if not isinstance(value, Exception))
