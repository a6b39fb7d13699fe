"""Health probes: ``/live`` and ``/ready`` over a tiny threaded HTTP server, for Kubernetes and friends.

``/live``  200 while the process's loop is alive (a worker: not stopping, and
           its heartbeat thread running or its boot still waiting for Redis;
           a swarm parent: the supervisor loop ticked recently). A Redis
           outage keeps a process live on purpose: restarting it won't bring
           Redis back, and it recovers by itself once Redis does.
``/ready`` 200 when the heartbeat was written within the last interval (plus
           a little slack for the beat's own round trip) *and* Redis answers
           a PING now; a swarm parent is ready when at least one child is.

Both answer 503 otherwise, with a one-line reason as the body. The server is
one listening socket plus a daemon thread per request (so a stuck client
can't block the next probe), every request bounded by a socket timeout.
``stop()`` always closes the socket, even when the serving thread won't join:
a leaked listener keeps kubelet getting answers from a process that is
already gone.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

from djwork.worker.component import JOIN_TIMEOUT, safe_thread

if TYPE_CHECKING:
    from djwork.settings.conf import Config
    from djwork.worker.heartbeat import Heartbeat
    from djwork.worker.process import RunState

logger = logging.getLogger("djwork.worker")

Probe = Callable[[], tuple[bool, str]]

DEFAULT_HOST = "0.0.0.0"  # the kubelet probes the pod IP, not loopback
REQUEST_TIMEOUT = 5.0
POLL_INTERVAL = 0.2
# A beat lands every interval plus its own round trip; without slack a probe
# landing just before the next beat would flap to 503 on a healthy process.
READY_SLACK = 1.0


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # server_close() must not wait for in-flight probe requests: teardown is bounded.
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], live: Probe, ready: Probe) -> None:
        self.live = live
        self.ready = ready
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = REQUEST_TIMEOUT
    protocol_version = "HTTP/1.0"
    server_version = "djwork-health"

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def _answer(self, head: bool) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        probe = {"/live": self.server.live, "/ready": self.server.ready}.get(path)
        if probe is None:
            status, reason = 404, "not found: use /live or /ready"
        else:
            try:
                healthy, reason = probe()
            except Exception as error:  # a probe that crashes reports unhealthy, never a 500 or a hang
                logger.exception("djwork: health probe %s failed", path)
                healthy, reason = False, f"probe error: {type(error).__name__}"
            status = 200 if healthy else 503
        body = (reason + "\n").encode("utf-8", "replace")
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        # Probes arrive every few seconds forever; at INFO they would drown the worker's log.
        logger.debug("djwork health: %s - %s", self.address_string(), format % args)


class HealthServer:
    """``/live`` and ``/ready`` on ``host:port``; idempotent ``start()`` / ``stop()``.

    ``start()`` raises ``OSError`` when the port can't be bound, so the owner's
    boot fails (and rolls back) instead of running without the probes it was
    asked for. Port 0 binds an ephemeral port (see ``port`` after start).
    """

    def __init__(self, port: int, live: Probe, ready: Probe, host: str = DEFAULT_HOST) -> None:
        self.host = host or DEFAULT_HOST
        self.requested_port = port
        self.live = live
        self.ready = ready
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    @property
    def port(self) -> int:
        server = self._server
        return server.server_address[1] if server is not None else self.requested_port

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> None:
        with self._lock:
            if self._server is not None:
                return
            self._stopping.clear()
            server = _Server((self.host, self.requested_port), self.live, self.ready)
            try:
                self._thread = safe_thread("health", lambda: self._serve(server))
            except BaseException:
                server.server_close()
                raise
            self._server = server
        logger.info("djwork: health probes on http://%s:%d/live and /ready", self.host, self.port)

    def _serve(self, server: _Server) -> None:
        # Our own loop rather than serve_forever()/shutdown(): shutdown() waits
        # without a bound, and would wait forever for a loop that never began.
        server.timeout = POLL_INTERVAL
        while not self._stopping.is_set():
            try:
                server.handle_request()
            except (OSError, ValueError):
                if self._stopping.is_set():
                    return  # the socket was closed under us by stop()
                logger.exception("djwork: health server error")
                time.sleep(POLL_INTERVAL)

    def stop(self, timeout: float = JOIN_TIMEOUT) -> None:
        with self._lock:
            server, self._server = self._server, None
            thread, self._thread = self._thread, None
        if server is None:
            return
        self._stopping.set()
        try:
            if thread is not None and thread is not threading.current_thread():
                thread.join(min(timeout, POLL_INTERVAL * 5))
        finally:
            # Always, even if the join timed out: the port must not outlive us.
            server.server_close()
        logger.info("djwork: health probes closed (port %d)", server.server_address[1])

    def close_inherited(self) -> None:
        """In a forked child: drop our copy of the listening socket (the parent keeps serving on its own)."""
        with self._lock:
            server, self._server = self._server, None
            self._thread = None
        if server is not None:
            try:
                server.socket.close()
            except OSError:
                pass


# --- what a worker process reports ------------------------------------------------------
def ping_redis() -> tuple[bool, str]:
    """PING on the admin pool; no replay: a probe answers now or reports the failure."""
    from djwork import redis as redis_layer

    try:
        redis_layer.client("admin").ping()
    except Exception as error:
        return False, f"redis unreachable: {type(error).__name__}: {error}"
    return True, "redis ok"


class WorkerProbes:
    """A worker process's ``/live`` and ``/ready``, from its run state and its heartbeat's own record."""

    def __init__(self, config: Config, heartbeat: Heartbeat, run_state: RunState) -> None:
        self.config = config
        self.heartbeat = heartbeat
        self.run_state = run_state

    def live(self) -> tuple[bool, str]:
        if self.run_state.stopping:
            return False, "stopping"
        if self.heartbeat.running:
            return True, "ok"
        if self.heartbeat.beats == 0:
            # Still in boot (waiting for Redis, retried forever): alive, just not ready.
            return True, "booting"
        return False, "heartbeat loop is not running"

    def ready(self, *, ping: bool = True) -> tuple[bool, str]:
        live, reason = self.live()
        if not live:
            return False, reason
        last = self.heartbeat.last_beat_monotonic
        if last is None:
            return False, "no heartbeat yet"
        age = time.monotonic() - last
        limit = self.config.heartbeat_interval + READY_SLACK
        if age > limit:
            return False, f"last heartbeat {age:.1f}s ago (limit {limit:.1f}s)"
        if ping:
            reachable, why = ping_redis()
            if not reachable:
                return False, why
        suffix = " (quiet)" if self.run_state.quieted else ""
        return True, f"ok, last heartbeat {age:.1f}s ago{suffix}"


def health_server(config: Config, live: Probe, ready: Probe) -> HealthServer | None:
    """The probe server HEALTH_PORT asks for (None when unset): a worker's, or a swarm parent's."""
    port = config.health_port
    if not port:
        return None
    return HealthServer(int(port), live, ready, host=config.health_host or DEFAULT_HOST)


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    """Whether something accepts connections on ``host:port`` (tests, deployment scripts)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
