"""Inside a swarm child: its whole life (``child_main``), what it reports to the parent, and its orphan guard.

A child is a full standalone worker (``runner.run`` with its own Launcher:
own identity, own signal handlers, own Redis pools). Besides, it:

* posts readiness and its busy count to the ``Board``, shared memory the
  parent reads for its ``/ready`` and its process title;
* stops by itself when its parent is gone (``kill -9`` of the parent):
  PR_SET_PDEATHSIG delivers TERM on Linux, and a getppid() watch thread
  covers other kernels and the fork/prctl race; past TIMEOUT + grace the
  watcher ends the process itself, since no parent is left to SIGKILL it;
* takes a process group of its own, so a terminal's Ctrl-C (sent to the
  whole foreground group) reaches the parent only: were it also delivered
  straight to the children, the parent's forwarded TERM would be their
  *second* one, which means "stop now" and skips the drain.
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import mmap
import os
import signal
import struct
import sys
import threading
import time

from djwork.settings.conf import Config
from djwork.worker import runner
from djwork.worker.component import JOIN_TIMEOUT, PeriodicComponent, Sleeper, safe_thread
from djwork.worker.launcher import Launcher, deliver_to_self
from djwork.worker.probes import HealthServer

logger = logging.getLogger("djwork.worker")

SHUTDOWN_GRACE = 10.0  # past TIMEOUT: a child's own teardown steps (joins, clears) run after the drain
REPORT_INTERVAL = 1.0
ORPHAN_CHECK_INTERVAL = 1.0
PR_SET_PDEATHSIG = 1
# A child that stopped itself to be replaced (a job's thread stuck past its hard time limit):
# the parent respawns it at once and counts no crash.
RECYCLE_EXIT_CODE = 75

try:
    from setproctitle import setproctitle as _setproctitle
except ImportError:  # pragma: no cover - a declared dependency; titles are cosmetic
    _setproctitle = None


def set_title(title: str) -> None:
    if _setproctitle is not None:
        try:
            _setproctitle(title)
        except Exception:  # pragma: no cover - cosmetic, never fatal
            pass


class Board:
    """One record per slot in shared anonymous memory: children write, the parent reads.

    (pid, ready_at, busy): ``ready_at`` is CLOCK_MONOTONIC, which is
    system-wide on Linux, so the parent can age a child's report. Shared
    memory rather than Redis or a pipe: the parent stays free of Redis
    connections it would carry into the next fork, and a child that hangs
    can't block the parent on a full pipe.
    """

    RECORD = struct.Struct("=qdq")

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._map = mmap.mmap(-1, self.RECORD.size * max(1, slots))  # anonymous mappings are MAP_SHARED

    def write(self, slot: int, pid: int, ready_at: float, busy: int) -> None:
        self.RECORD.pack_into(self._map, slot * self.RECORD.size, pid, ready_at, busy)

    def read(self, slot: int) -> tuple[int, float, int]:
        return self.RECORD.unpack_from(self._map, slot * self.RECORD.size)

    def clear(self, slot: int) -> None:
        self.write(slot, 0, 0.0, 0)


def child_main(config: Config, slot: int, parent_pid: int, board: Board, health: HealthServer | None) -> None:
    """The forked child's whole life; always ends in os._exit, never back in the parent's stack."""
    code = 1
    try:
        try:
            os.setpgid(0, 0)
        except OSError as error:
            logger.warning("djwork swarm: child could not take its own process group: %s", error)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGCHLD])
        if health is not None:
            health.close_inherited()
        config = dataclasses.replace(config, health_port=None)
        launcher = Launcher(config, deliver_signal=deliver_to_self)
        launcher.recycle_on_time_limit = True
        reporter = ChildReporter(launcher, board, slot)
        guard = OrphanGuard(parent_pid, launcher, config.timeout)
        guard.start()
        reporter.start()
        try:
            code = runner.run(config, launcher)
            if code == 0 and launcher.recycle_requested:
                code = RECYCLE_EXIT_CODE
        finally:
            reporter.stop()
            guard.stop()
    except BaseException:
        logger.exception("djwork swarm: child in slot %d failed", slot)
        code = 1
    finally:
        runner.exit_process(code)




class ChildReporter(PeriodicComponent):
    """In a child: posts readiness and busy count to the board, and shows them in the process title."""

    name = "swarm-report"

    def __init__(self, launcher: Launcher, board: Board, slot: int) -> None:
        super().__init__()
        self.launcher = launcher
        self.board = board
        self.slot = slot
        self.pid = os.getpid()

    def interval(self) -> float:
        return REPORT_INTERVAL

    def first_delay(self) -> float:
        return 0.0

    def tick(self) -> None:
        launcher = self.launcher
        ready, _reason = launcher.probes.ready()
        busy = launcher.busy
        self.board.write(self.slot, self.pid, time.monotonic() if ready else 0.0, busy)
        state = " stopping" if launcher.state.stopping else " quiet" if launcher.state.quieted else ""
        process = launcher.process
        tag = f" {process.tag}" if process.tag else ""
        set_title(f"djwork {process.version}{tag} [{busy} of {process.concurrency} busy]{state} {process.identity}")


class OrphanGuard:
    """In a child: stop when the parent is gone, since nobody else will supervise or SIGKILL us."""

    def __init__(self, parent_pid: int, launcher: Launcher, timeout: float) -> None:
        self.parent_pid = parent_pid
        self.launcher = launcher
        self.timeout = timeout
        self._sleeper = Sleeper()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        arm_parent_death_signal(signal.SIGTERM)
        self._thread = safe_thread("orphan-guard", self._watch)

    def _watch(self) -> None:
        # Checked once before the first wait: the parent may have died between
        # our fork and the prctl, which then never fires.
        while os.getppid() == self.parent_pid:
            if self._sleeper.wait(ORPHAN_CHECK_INTERVAL):
                return
        logger.warning("djwork swarm: parent %d is gone; stopping this child", self.parent_pid)
        # Give the kernel's PDEATHSIG TERM a moment to start the drain: a TERM of
        # ours on top of it would be a second one, which skips the drain.
        if self._sleeper.wait(1.0):
            return
        if not self.launcher.state.stopping:
            os.kill(os.getpid(), signal.SIGTERM)
        if self._sleeper.wait(self.timeout + SHUTDOWN_GRACE):
            return
        logger.error("djwork swarm: orphaned child did not stop within %.0fs; exiting",
                     self.timeout + SHUTDOWN_GRACE)
        runner.exit_process(1)

    def stop(self) -> None:
        self._sleeper.stop()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(JOIN_TIMEOUT)


def arm_parent_death_signal(number: int) -> bool:
    """Linux: have the kernel send ``number`` to us when the parent (thread that forked us) dies."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(number), 0, 0, 0) != 0:
            logger.warning("djwork swarm: prctl(PR_SET_PDEATHSIG) failed: errno %d", ctypes.get_errno())
            return False
    except (OSError, AttributeError) as error:
        logger.warning("djwork swarm: prctl unavailable (%s); relying on the getppid() watch", error)
        return False
    return True
