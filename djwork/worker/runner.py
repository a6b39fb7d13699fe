"""Running a Launcher as the process's main job: signal handlers, the main loop, the exit.

Signal handlers only enqueue the signal (and, for a second TERM/INT, pull
the drain deadline in); the main thread does the work, so nothing heavy
runs inside a handler. TERM/INT: graceful stop; a second one: stop now,
after requeueing. TSTP: quiet. TTIN: dump every thread's stack to the log.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import sys
from typing import Any

from djwork.settings.conf import Config
from djwork.worker.launcher import Launcher, deliver_to_self, dump_threads

logger = logging.getLogger("djwork.worker")

HANDLED = ("TERM", "INT", "TSTP", "TTIN")


def run(config: Config, launcher: Launcher | None = None) -> int:
    """Run a worker until TERM/INT; returns the exit code (0 on a clean stop)."""
    signals: queue.SimpleQueue[str] = queue.SimpleQueue()
    launcher = launcher or Launcher(config, deliver_signal=deliver_to_self)
    shutting_down = False

    def on_signal(number: int, _frame: Any) -> None:
        name = signal.Signals(number).name[3:]
        if name in ("TERM", "INT"):
            # The main thread may still be in start(), retrying an unreachable
            # Redis, and would never read the queue below: end that loop.
            launcher.boot_sleeper.stop()
            if shutting_down:
                launcher.hurry()
        signals.put(name)

    previous = {name: signal.signal(getattr(signal, f"SIG{name}"), on_signal) for name in HANDLED}
    # A swarm child is forked with these blocked, so one sent before the handlers
    # above existed waits instead of reaching the parent's inherited handler (lost).
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [getattr(signal, f"SIG{name}") for name in HANDLED])
    try:
        launcher.start()
        while True:
            try:
                name = signals.get(timeout=1.0)
            except queue.Empty:
                continue
            if name in ("TERM", "INT"):
                logger.info("djwork: received %s, shutting down (timeout %.0fs)", name, config.timeout)
                shutting_down = True
                launcher.stop()
                return 0
            if name == "TSTP":
                logger.info("djwork: received TSTP, no longer accepting new work")
                launcher.quiet()
            elif name == "TTIN":
                logger.warning("djwork thread dump:\n%s", dump_threads())
    finally:
        for name, handler in previous.items():
            try:
                signal.signal(getattr(signal, f"SIG{name}"), handler)
            except (TypeError, ValueError):
                pass


def exit_process(code: int) -> None:
    """Exit without waiting on threads a drain abandoned (they are daemons, and their jobs requeued)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
