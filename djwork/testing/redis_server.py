"""Start and stop a private ``redis-server`` on a free loopback port, with nothing on disk.

Used by ``./dev test``, ``./dev demo``, the test suite and the benchmarks, so
none of them ever touches a Redis the user runs (e.g. 127.0.0.1:6379). The
connection tests also start one that listens only on a unix socket, or only
for TLS, so a client that fell back to plain TCP would find nobody there.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

INSTALL_HINT = (
    "redis-server was not found on PATH. Install it first:\n"
    "  Debian/Ubuntu: sudo apt-get install redis-server\n"
    "  macOS:         brew install redis\n"
    "  or set REDIS_URL to a Redis you own (./dev demo only; tests always start their own)."
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PortTaken(RuntimeError):
    """redis-server could not bind its port: another process holds it."""


@dataclass(frozen=True)
class TlsFiles:
    """PEM files for a TLS-only server: its certificate and key, and the CA that signed the certificate."""

    cert_file: Path
    key_file: Path
    ca_file: Path


class RedisServer:
    """One private redis-server process; ``restart()`` keeps its port (for outage tests).

    ``append_only=True``: it keeps an fsynced AOF in its directory, so ``kill()`` then ``start()``
    finds the data again, as a production Redis with AOF on does after a crash.

    ``unix_socket=True``: it listens on ``<directory>/redis.sock`` only (no TCP
    port). ``tls``: it listens for TLS only, on ``port``, and asks clients for no
    certificate of their own. ``extra_args`` come last, so they override the defaults (``--appendonly yes``,
    ``--maxmemory-policy allkeys-lru``: the tests of djwork.redis_risks).
    """

    def __init__(self, port: int | None = None, directory: str | None = None, *, unix_socket: bool = False,
                 tls: TlsFiles | None = None, append_only: bool = False, extra_args: Sequence[str] = ()) -> None:
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            raise RuntimeError(INSTALL_HINT)
        if unix_socket and tls is not None:
            raise ValueError("a server listens on a unix socket or for TLS, not both")
        self.port = port or free_port()
        # A port picked here may be taken by another process between free_port() and the bind (parallel
        # test processes each start servers): start() then moves to another one. A port given is kept.
        self.port_is_ours_to_change = port is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="djwork-redis-"))
        self.directory.mkdir(parents=True, exist_ok=True)
        # In the server's own directory: a socket path over ~100 bytes (pytest's
        # tmp_path can be that long) is refused by the kernel.
        self.socket_path = self.directory / "redis.sock" if unix_socket else None
        self.tls = tls
        self.append_only = append_only
        self.extra_args = list(extra_args)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        if self.socket_path is not None:
            return f"unix://{self.socket_path}?db=0"
        if self.tls is not None:
            return f"rediss://127.0.0.1:{self.port}/0"
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.directory / "redis.log"

    def _listen_arguments(self) -> list[str]:
        # "--port 0" whenever another listener is asked for: redis-server would
        # otherwise also open its default TCP port, 6379.
        if self.socket_path is not None:
            return ["--port", "0", "--unixsocket", str(self.socket_path), "--unixsocketperm", "700"]
        if self.tls is not None:
            return ["--port", "0", "--bind", "127.0.0.1", "--tls-port", str(self.port),
                    "--tls-cert-file", str(self.tls.cert_file), "--tls-key-file", str(self.tls.key_file),
                    "--tls-ca-cert-file", str(self.tls.ca_file), "--tls-auth-clients", "no"]
        return ["--port", str(self.port), "--bind", "127.0.0.1"]

    def _persistence_arguments(self) -> list[str]:
        # append_only: every write fsynced before its reply, so a kill -9 and a start() in the same
        # directory bring back all a client was told was written (the outage tests' restart).
        if self.append_only:
            return ["--appendonly", "yes", "--appendfsync", "always"]
        return ["--appendonly", "no"]

    def _open_socket(self) -> socket.socket:
        if self.socket_path is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(0.2)
            try:
                sock.connect(str(self.socket_path))
            except OSError:
                sock.close()
                raise
            return sock
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=0.2)
        if self.tls is None:
            return sock
        # Only "is it up?": the tests check the certificate chain through the client under test.
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        try:
            return context.wrap_socket(sock)
        except OSError:
            sock.close()
            raise

    def _answers_ping(self) -> bool:
        """Our process answers: a server another process started on the same port must not pass for ours."""
        with self._open_socket() as sock:
            sock.sendall(b"INFO server\r\n")
            reply = b""
            while b"\r\n" not in reply:
                chunk = sock.recv(4096)
                if not chunk:
                    return False
                reply += chunk
            header, _, body = reply.partition(b"\r\n")
            if header.startswith(b"-ERR unknown command"):
                # A server started with INFO renamed (the redis_risks tests) can't show its pid: ours is
                # the one that is still running, since a redis-server that could not bind its port exits.
                running = self.process
                return running is not None and running.poll() is None
            if not header.startswith(b"$"):
                return False
            while len(body) < int(header[1:]):
                chunk = sock.recv(4096)
                if not chunk:
                    return False
                body += chunk
        running = self.process
        return running is not None and f"process_id:{running.pid}\r\n".encode() in body

    def start(self, timeout: float = 10.0) -> RedisServer:
        if self.process is not None and self.process.poll() is None:
            return self
        for _attempt in range(5):
            try:
                return self._start_once(timeout)
            except PortTaken:
                if not self.port_is_ours_to_change:
                    raise
                self.port = free_port()
        return self._start_once(timeout)

    def _start_once(self, timeout: float) -> RedisServer:
        log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        self.process = subprocess.Popen(
            [self.binary, *self._listen_arguments(), "--save", "", *self._persistence_arguments(),
             "--dir", str(self.directory), "--protected-mode", "no", "--maxclients", "2000",
             *self.extra_args],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                with open(self.log_path, "rb") as written:
                    written.seek(log_start)
                    if b"Address already in use" in written.read():
                        raise PortTaken(self.port)
                raise RuntimeError(f"redis-server exited at start; see {self.log_path}")
            try:
                if self._answers_ping():
                    return self
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError(f"redis-server did not answer at {self.url} within {timeout}s")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)

    def kill(self) -> None:
        """SIGKILL: an outage, not a shutdown."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)
        self.process = None


def main() -> None:  # pragma: no cover - used by ./dev
    """``python -m djwork.testing.redis_server DIR``: run in the foreground, print the URL."""
    directory = sys.argv[1] if len(sys.argv) > 1 else None
    # ./dev stops this wrapper with SIGTERM; without a handler Python dies at
    # once, the finally below never runs, and redis-server outlives the run.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = RedisServer(directory=directory).start()
    print(server.url, flush=True)
    try:
        while server.process and server.process.poll() is None:
            time.sleep(0.5)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.stop()
        os._exit(0)


if __name__ == "__main__":  # pragma: no cover
    main()
