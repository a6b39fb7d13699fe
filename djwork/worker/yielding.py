"""Yielding to the web: an embedded worker that steps aside while its host serves requests.

An embedded worker shares its web process's GIL. A request thread that
wants the GIL while a worker thread runs Python waits up to the switch
interval (5 ms by default) for it, once per hand-over: under a drain that
is the request's tail latency. So, with ``EMBEDDED_YIELD`` set, the host
counts its requests in flight (djwork.gunicorn's pre_request/post_request
hooks, or ``djwork.embedded.request_started``/``request_finished``), and
while any is in flight the worker's threads wait before starting their next
job and the dispatcher waits before fetching: jobs already running finish,
no new one starts. Each wait is bounded by ``EMBEDDED_YIELD`` seconds, so a
request that never ends (a long poll, a stream) delays the worker but never
stops it. ``EMBEDDED_MAX_JOBS_PER_SECOND`` caps the job starts on top.

A request counted only from gunicorn's ``pre_request`` is counted too late:
by then the request thread has waited for the GIL behind the job threads
after select() woke it and again after accept() (docs/performance.md,
Embedded worker, measured). So the gate
also watches the host's listening sockets (``watch``): a connection
waiting to be accepted counts as a request in flight, seen by the job
threads themselves with a zero-timeout select() that needs nothing from
the request thread. Once accepted, the connection is counted by the worker
class (djwork.gunicorn.EmbeddedWorker) until it is closed.
"""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Iterable
from typing import Any

# How often a thread waiting on a connection not yet accepted looks again. Normally the request's
# end wakes it first (request_finished), but another process sharing the listener may take the
# connection, and a request may never reach pre_request. Not shorter: each look takes the GIL
# from the request thread (2 ms measured worse than no listener watch at all: docs/performance.md).
LISTENER_POLL = 0.05


class RequestGate:
    """Requests in flight, and the pause the worker takes for them (and for the job-rate cap)."""

    def __init__(self, max_pause: float, max_jobs_per_second: float | None = None) -> None:
        self.max_pause = max_pause  # 0: never wait for requests
        self.interval = 1.0 / max_jobs_per_second if max_jobs_per_second else 0.0
        self._condition = threading.Condition()
        self.in_flight = 0
        self._next_start = 0.0  # monotonic: the earliest the next job may start under the rate cap
        self._closed = False
        self.listeners: list[int] = []  # the host's listening sockets' file descriptors

    def watch(self, listeners: Iterable[Any]) -> None:
        """Count a connection waiting on any of these listening sockets (or fds) as a request in flight."""
        self.listeners = [each if isinstance(each, int) else each.fileno() for each in listeners]

    def _connection_waiting(self) -> bool:
        listeners = self.listeners
        if not listeners:
            return False
        try:
            # select(), not a poll object: one of those raises when two threads poll it at once.
            return bool(select.select(listeners, (), (), 0)[0])
        # OSError: the host closed its listener (shutting down); ValueError: an fd select() cannot take
        # (above FD_SETSIZE). Either way no more watching, rather than an error before every job.
        except (OSError, ValueError):
            self.listeners = []
            return False

    @property
    def busy(self) -> bool:
        """A request in flight, or a connection waiting to be accepted (lock-free: read before every job)."""
        # The listener first, then the count. The host counts a connection before it accepts it, so one
        # gone from the listener is counted by then; read the other way round, an accept between the two
        # reads showed neither, and a job started under a request (seen once in the suite).
        return self._connection_waiting() or bool(self.in_flight)

    def request_started(self) -> None:
        with self._condition:
            self.in_flight += 1

    def request_finished(self) -> None:
        with self._condition:
            self.in_flight = max(0, self.in_flight - 1)
            if not self.in_flight:
                self._condition.notify_all()

    def close(self) -> None:
        """The worker is stopping: no more waits (a drain must not wait on the web)."""
        with self._condition:
            self._closed = True
            self._condition.notify_all()

    def pause(self) -> None:
        """Before a fetch: wait (bounded) while requests are in flight."""
        if not self.max_pause or not self.busy:
            return
        deadline = time.monotonic() + self.max_pause
        with self._condition:
            while not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                # Here the count may be read first: while this lock is held the host cannot count (and so
                # cannot accept) a connection, which stays on the listener for the second read.
                if self.in_flight:
                    self._condition.wait(remaining)  # request_finished notifies
                elif self._connection_waiting():
                    self._condition.wait(min(remaining, LISTENER_POLL))
                else:
                    break

    def before_job(self) -> None:
        """Before a job starts: the pause for requests, then a turn under the job-rate cap."""
        self.pause()
        if not self.interval:
            return
        with self._condition:
            now = time.monotonic()
            start = max(now, self._next_start)
            self._next_start = start + self.interval
            while not self._closed and time.monotonic() < start:
                self._condition.wait(start - time.monotonic())
