"""Periodic scenarios run by more than one test module: on one server and on a Redis Cluster."""

from __future__ import annotations

import itertools
import signal

from tests import periodic_jobs
from tests.helpers_worker import wait_until
from tests.support.periodic_clock import fast_clock, overrides, redis_now


def no_overlap_entry_survives_a_killed_worker(workers, raw_redis) -> None:
    """A no-overlap entry on two workers, the one running its job killed with ``kill -9``: the run is recovered and
    finishes, a later slot fires, no two runs overlap, and a slot was skipped while the lock was held. Shared by
    one server's test and the cluster's (``raw_redis`` may be a cluster client)."""
    entry = {"cron": "* * * * *", "job": "tests.periodic_jobs.long_tick", "name": "guarded", "args": [7],
             "overlap": False}
    clock = fast_clock(raw_redis)
    options = overrides(clock, entry)
    first = workers.start("-c", "3", "-q", "periodic-work", overrides=options, label="first")
    second = workers.start("-c", "3", "-q", "periodic-work", overrides=options, label="second")
    (start,) = wait_until(lambda: periodic_jobs.runs(raw_redis), 30, "the first run to start")
    victim = first if start["pid"] == first.pid else second
    victim.send(signal.SIGKILL)
    assert victim.wait_exit(10) == -signal.SIGKILL
    killed_at = redis_now(raw_redis)

    def fresh_run_started() -> bool:
        starts = [run["jid"] for run in periodic_jobs.runs(raw_redis) if run["event"] == "start"]
        return len(set(starts)) >= 2

    wait_until(fresh_run_started, 60, "a run of a later slot, after the recovered run finished")
    runs = periodic_jobs.runs(raw_redis)
    intervals = []
    for run in runs:
        if run["event"] != "start":
            continue
        end = next((other["at"] for other in runs if other["event"] == "end" and other["jid"] == run["jid"]
                    and other["pid"] == run["pid"] and other["at"] > run["at"]),
                   killed_at if run["pid"] == victim.pid else float("inf"))
        intervals.append((run["at"], end, run["jid"]))
    intervals.sort()
    for (_start, end, jid), (next_start, _end, next_jid) in itertools.pairwise(intervals):
        assert next_start >= end, f"{next_jid} started while {jid} still ran"
    assert intervals[0][2] == start["jid"] and any(jid == start["jid"] for _s, _e, jid in intervals[1:])
    assert int(raw_redis.hget("djwork:periodic:state:guarded", "skipped_overlap") or 0) >= 1
