"""Embedded mode: a djwork worker on threads inside a web process (gunicorn, uWSGI, a script).

    import djwork.embedded
    djwork.embedded.start()        # in the process that serves, after Django is set up (and after any fork)
    ...
    djwork.embedded.stop()         # on the host's graceful exit (also registered with atexit)

For gunicorn see ``djwork.gunicorn`` (one line in gunicorn.conf.py).

Contracts, each one against a way an embedded worker fails its host:

* The host owns the signals. We install no handler: a worker that took TERM
  would drain itself on a deploy but never stop the HTTP server. A TERM or
  TSTP from the dashboard (``<identity>-signals``) stops or quiets only the
  worker, in place, on a thread of its own; the web process keeps serving.
* Boot never blocks and never breaks the host. The Launcher boots on a
  background thread, because its first heartbeat retries for as long as
  Redis is unreachable; a web process starting during a Redis outage must
  serve HTTP meanwhile, and its worker joins in once Redis is back.
  ``start()`` logs failures instead of raising them into the host's boot.
* Shutdown is registered (atexit) *before* the boot starts anything, and a
  boot that fails half way rolls back what it started: otherwise threads
  and a presence in Redis would outlive the failure with nothing to drain
  them on exit.
* Fork-aware: an instance belongs to the process that started it. A forked
  copy (gunicorn ``preload_app``, multiprocessing) inherits the object but
  not its threads; its atexit copy must not stop, and ``start()`` there
  builds a fresh worker with its own identity and Redis pools.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Iterable
from typing import Any

from djwork.settings.conf import Config, get_config
from djwork.worker.component import JOIN_TIMEOUT, safe_thread
from djwork.worker.launcher import Launcher

logger = logging.getLogger("djwork.worker")

__all__ = ["Embedded", "current", "request_finished", "request_started", "start", "stop", "watch_listeners"]

# How long stop() waits for a boot in progress to notice it should end
# before stopping the launcher anyway (the launcher's own lock makes the two safe).
BOOT_JOIN_TIMEOUT = JOIN_TIMEOUT


class Embedded:
    """One embedded worker: a Launcher(embedded=True) plus the thread that boots it."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.pid = os.getpid()
        self.launcher: Launcher | None = None
        self._boot_thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._started = False
        self._stopped = False

    @property
    def identity(self) -> str | None:
        return self.launcher.identity if self.launcher is not None else None

    @property
    def running(self) -> bool:
        """Started here and not stopped (by the host or by a dashboard TERM)."""
        launcher = self.launcher
        return (self._started and not self._stopped and launcher is not None
                and not launcher.state.stopping and os.getpid() == self.pid)

    def start(self) -> None:
        """Begin the boot on a background thread and return at once. Idempotent."""
        with self._lock:
            if self._started or self._stopped:
                return
            self._started = True
        try:
            # No deliver_signal: the host owns the process's signals, so a
            # remote TERM/TSTP acts on this worker in place (Launcher.handle_remote_signal).
            self.launcher = Launcher(self.config, embedded=True)
            self._boot_thread = safe_thread("embedded-boot", self._boot)
        except BaseException:
            self._rollback()
            raise
        logger.info("djwork: embedded worker booting in pid %d (identity %s)", self.pid, self.launcher.identity)

    def _boot(self) -> None:
        launcher = self.launcher
        if launcher is None:
            return
        try:
            # Retries an unreachable Redis until stop(); rolls itself back on failure.
            launcher.start()
        except Exception:
            logger.exception("djwork: the embedded worker failed to boot; the web process keeps serving "
                             "without it")

    def _rollback(self) -> None:
        try:
            self.stop(timeout=0)
        except Exception:
            logger.exception("djwork: rollback of a failed embedded start failed")

    def stop(self, timeout: float | None = None) -> None:
        """Drain within ``timeout`` (default TIMEOUT) and clear the heartbeat. Idempotent, bounded."""
        if os.getpid() != self.pid:
            # A forked copy: the threads and the identity are the parent's, not ours.
            return
        with self._lock:
            self._stopped = True
        launcher = self.launcher
        if launcher is None:
            return
        timeout = self.config.timeout if timeout is None else max(0.0, timeout)
        deadline = time.monotonic() + timeout
        # End a boot still waiting for Redis, and let it return before stopping:
        # a first beat landing after the stop's clear would list a stopped process.
        launcher.boot_sleeper.stop()
        thread = self._boot_thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(min(BOOT_JOIN_TIMEOUT, max(0.5, timeout)))
            if thread.is_alive():
                logger.warning("djwork: embedded boot still busy after %.1fs; stopping anyway", BOOT_JOIN_TIMEOUT)
        launcher.stop(timeout=max(0.0, deadline - time.monotonic()))


_lock = threading.Lock()
_current: Embedded | None = None


def current() -> Embedded | None:
    """This process's embedded worker, if one was started here."""
    instance = _current
    return instance if instance is not None and instance.pid == os.getpid() else None


def start(config: Config | None = None) -> Embedded | None:
    """Start the embedded worker for this process (idempotent); never raises into the host.

    Call it where the serving process begins, after Django is set up and
    after any fork (gunicorn: post_worker_init). Returns the instance, or
    None if it could not even be created (the error is logged).
    """
    global _current
    with _lock:
        instance = _current
        if instance is not None and instance.pid == os.getpid() and not instance._stopped \
                and (instance.launcher is None or not instance.launcher.state.stopping):
            return instance
        try:
            instance = Embedded(config or get_config())
        except Exception:
            logger.exception("djwork: could not create the embedded worker; the web process keeps serving")
            return None
        _current = instance
        # Registered BEFORE the boot: whatever the boot starts before a failure
        # (or before the host exits mid-boot) is then still drained at exit.
        atexit.register(instance.stop)
    try:
        _autodiscover()
        instance.start()
    except Exception:
        logger.exception("djwork: the embedded worker failed to start; the web process keeps serving")
        return None
    return instance


def stop(timeout: float | None = None) -> None:
    """Stop this process's embedded worker (idempotent; a no-op if none runs here)."""
    instance = current()
    if instance is None:
        return
    try:
        instance.stop(timeout)
    finally:
        try:
            atexit.unregister(instance.stop)
        except Exception:  # pragma: no cover - unregister doesn't raise in practice
            pass


def request_started() -> None:
    """The host began serving a request: with EMBEDDED_YIELD set, the worker starts no job until it ends.

    Cheap and safe to call in every request (a no-op without an embedded worker
    or without EMBEDDED_YIELD / EMBEDDED_MAX_JOBS_PER_SECOND); pair it with
    ``request_finished()`` in a ``finally``. djwork.gunicorn's hooks call both.
    """
    instance = _current
    gate = instance.launcher.gate if instance is not None and instance.launcher is not None else None
    if gate is not None:
        gate.request_started()


def request_finished() -> None:
    instance = _current
    gate = instance.launcher.gate if instance is not None and instance.launcher is not None else None
    if gate is not None:
        gate.request_finished()


def watch_listeners(listeners: Iterable[Any]) -> None:
    """The host's listening sockets (or their fds): with EMBEDDED_YIELD set, a connection waiting on one
    counts as a request in flight, before the host has had the GIL to accept it (worker/yielding.py).

    Call it after ``start()``; djwork.gunicorn's post_worker_init passes gunicorn's listeners.
    """
    instance = current()
    gate = instance.launcher.gate if instance is not None and instance.launcher is not None else None
    if gate is not None:
        gate.watch(listeners)


def _autodiscover() -> None:
    # As runworkers does: jobs with custom names must be registered before the
    # first fetch, or their payloads would not resolve.
    from django.utils.module_loading import autodiscover_modules

    autodiscover_modules("tasks", "jobs")
