"""Waiting, on Redis's clock, until a killed worker's in-progress jobs are orphans the next reaper pass recovers.

A reaper recovers a dead process's jobs only once its last beat is
ORPHAN_THRESHOLD seconds old on Redis's clock (lua/recover_orphans.lua). A
test that starts a rescuer right after a kill and waits for the job's result
puts the rescuer's boot, the threshold and the job itself under one deadline;
on a loaded machine the boot alone ate it. Waiting for the threshold first
(an event on Redis's clock) leaves the rescuer's boot-time reaper pass
nothing to wait for: recovery is the first thing it logs.
"""

from __future__ import annotations

import re
from typing import Any

from djwork.redis import keys
from tests.helpers_worker import LoggedProcess, wait_until

WORKER_ORPHAN_THRESHOLD = 3.0  # tests/settings_worker.py: ORPHAN_THRESHOLD for every worker the tests start
STARTING = re.compile(r" starting: identity=(\S+) ")


def logged_identity(process: LoggedProcess) -> str:
    """The identity a worker logged at start; still readable after the process died (its hash may be gone)."""
    found = STARTING.search(process.log())
    if found is None:
        raise AssertionError(f"{process.label} never logged its start:\n{process.log()[-3000:]}")
    return found.group(1)


def redis_time(redis: Any) -> float:
    seconds, micros = redis.time()
    return seconds + micros / 1_000_000


def wait_orphaned(redis: Any, identity: str, threshold: float = WORKER_ORPHAN_THRESHOLD,
                  timeout: float = 30.0) -> None:
    """Wait until the dead ``identity``'s last beat is ``threshold`` seconds old on Redis's clock."""
    def orphaned() -> bool:
        beat = redis.zscore(keys.BEATS, identity)
        return beat is None or redis_time(redis) - beat >= threshold

    wait_until(orphaned, timeout, f"the last beat of {identity} to be {threshold}s old")


def recovered_line(identity: str) -> str:
    """The reaper's log line (djwork/worker/reaper.py) for the jobs of ``identity`` it requeued."""
    return f"of dead process {identity} from queue"
