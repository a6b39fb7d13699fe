"""Timestamps along each request's path in bench/embedded_gunicorn.py's gunicorn worker (--profile).

perf_counter is CLOCK_MONOTONIC on Linux, so the client's and the server's marks are comparable.
The client sends one request at a time, so the server's list of paths lines up with the client's
requests one for one; it is written to $BENCH_PROFILE as JSON when the worker exits.
"""

import json
import os
import time

from gunicorn.workers.sync import SyncWorker

MARKS = ("woke", "accepted", "pre_request", "view", "post_request", "closed")
current: dict[str, float] = {}
paths: list[list[float]] = []


def mark(name: str) -> None:
    current[name] = time.perf_counter()


def dump() -> None:
    with open(os.environ["BENCH_PROFILE"], "w") as out:
        json.dump(paths, out)


def profiled(base: type) -> type:
    """A gunicorn worker class marking when its select() returns, the accept and the close."""

    class Profiled(base):
        def wait(self, timeout):
            ready = super().wait(timeout)
            mark("woke")
            return ready

        def handle(self, listener, client, addr):
            mark("accepted")
            try:
                return super().handle(listener, client, addr)
            finally:
                mark("closed")
                # No select() before this accept (gunicorn accepts again at once after a request): woken then.
                if current.get("woke", 0.0) <= (paths[-1][-1] if paths else 0.0):
                    current["woke"] = current["accepted"]
                paths.append([current.get(name, 0.0) for name in MARKS])
                current.clear()

    Profiled.__name__ = f"Profiled{base.__name__}"
    return Profiled


ProfiledSyncWorker = profiled(SyncWorker)
