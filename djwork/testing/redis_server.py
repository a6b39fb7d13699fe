"""Start and stop a private ``redis-server`` on a free loopback port, with nothing on disk.

Used by ``./dev test``, ``./dev demo``, the test suite and the benchmarks, so
none of them ever touches a Redis the user runs (e.g. 127.0.0.1:6379).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
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


class RedisServer:
    """One private redis-server process; ``restart()`` keeps its port (for outage tests)."""

    def __init__(self, port: int | None = None, directory: str | None = None) -> None:
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            raise RuntimeError(INSTALL_HINT)
        self.port = port or free_port()
        self.directory = Path(directory or tempfile.mkdtemp(prefix="djwork-redis-"))
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> RedisServer:
        if self.process is not None and self.process.poll() is None:
            return self
        log = open(self.directory / "redis.log", "ab")  # noqa: SIM115 - owned by the child
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.directory), "--protected-mode", "no",
             "--maxclients", "2000"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited at start; see {self.directory / 'redis.log'}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server did not answer on port {self.port} within {timeout}s")

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

    def restart(self) -> None:
        self.stop()
        self.start()


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
