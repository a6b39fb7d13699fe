"""Cluster health at a glance: are processes taking jobs, and which queues wait on nobody.

The dashboard shows this strip on every page (docs/dashboard.md, Cluster
health). It is derived from two reads the pages already make (the process
hashes and the queue summaries), so it costs two pipelined round trips and
writes nothing. Sidekiq's Web UI shows none of it: with the only worker quiet
it shows "Busy 0" and a growing latency, and nobody sees that no one is
fetching.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from djwork.api import access
from djwork.api.processes import Process, ProcessSet
from djwork.api.queues import Queue, QueueSummary
from djwork.redis import risks as redis_risks
from djwork.redis.risks import RedisRisk

# A beat is "late" once this many intervals passed without one: one missed beat
# is a slow Redis round trip, two in a row are a stuck or partitioned process.
LATE_BEATS = 2.0


@dataclass(frozen=True)
class HealthWarning:
    """One problem; ``kind`` is stable (tests and CSS key on it), ``text`` is for people."""

    kind: str  # "no-process", "no-listener", "latency", "late-beat", "maxmemory-policy", "memory-full"
    text: str
    queue: str = ""
    identity: str = ""


@dataclass(frozen=True)
class Health:
    running: int
    quiet: int
    warnings: list[HealthWarning] = field(default_factory=list)

    @property
    def processes(self) -> int:
        return self.running + self.quiet

    @classmethod
    def fetch(cls, latency_threshold: float, heartbeat_interval: float) -> Health:
        """Read the processes, queues and Redis's memory settings now; see ``assess``."""
        return cls.assess(ProcessSet(cleanup=False).all(), Queue.all(), latency_threshold, heartbeat_interval,
                          time.time(), access.read(redis_risks.read))

    @classmethod
    def assess(cls, processes: list[Process], queues: list[QueueSummary], latency_threshold: float,
               heartbeat_interval: float, now: float, risks: list[RedisRisk] | None = None) -> Health:
        """The warnings, worst first: Redis settings that lose jobs, no process at all, queues nobody takes
        from, high latency, late beats.

        A process that has been asked to quiet or stop (its signal is still
        queued) no longer counts as taking jobs: it will not, in a beat or two.
        Paused queues are left out of "nobody listens": pausing them was the
        point.
        """
        takers = [p for p in processes if not p.stopping and not p.requested]
        # Only the risks that lose jobs now; a Redis without persistence is a note on the Overview's Redis card.
        warnings = [HealthWarning(risk.kind, risk.text) for risk in risks or () if risk.is_warning]
        waiting = [q for q in queues if q.size > 0 and not q.paused]
        if not processes:
            total = sum(q.size for q in waiting)
            warnings.append(HealthWarning(
                "no-process", f"No process is running: nothing takes jobs ({total:,} enqueued)."
                if total else "No process is running: a job enqueued now will wait."))
        else:
            listened = {name for p in takers for name in p.queues}
            for q in waiting:
                if q.name not in listened:
                    why = ("every process is quiet or asked to quiet" if not takers
                           else "no running process listens to it")
                    warnings.append(HealthWarning(
                        "no-listener", f"Queue {q.name} has {q.size:,} job{'s' if q.size != 1 else ''} "
                        f"but {why}.", queue=q.name))
        for q in queues:
            if q.latency > latency_threshold and q.size > 0:
                warnings.append(HealthWarning(
                    "latency", f"Queue {q.name}: the oldest job has waited {_human(q.latency)} "
                    f"(warning above {_human(latency_threshold)}).", queue=q.name))
        late_after = LATE_BEATS * heartbeat_interval
        for p in processes:
            if p.beat is not None and now - p.beat > late_after:
                warnings.append(HealthWarning(
                    "late-beat", f"Process {p.identity} last beat {_human(now - p.beat)} ago "
                    f"(expected every {_human(heartbeat_interval)}).", identity=p.identity))
        # Counted as the Busy page's rows show them: a process asked to quiet or stop is not "running"
        # (the strip said "2 running" beside two rows reading "quiet requested").
        return cls(running=len(takers), quiet=len(processes) - len(takers), warnings=warnings)


def _human(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m {int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h {int(seconds % 3600 // 60):02d}m"
