"""Start and stop a private Redis Sentinel topology on free loopback ports, in a temporary directory.

One master, one replica of it and three sentinels that monitor it (quorum 2,
short down-after and failover timeouts), for tests that fail a master over
under load. Sentinels run as ``redis-sentinel`` when that is on PATH, else as
``redis-server --sentinel`` (the same binary in sentinel mode). Nothing here
ever listens on 6379. ``stop()`` is safe to call at any point of ``start()``
and more than once: a fixture calls it in ``finally``.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import redis as redis_py

from djwork.testing.redis_server import INSTALL_HINT, free_port

SERVICE = "mymaster"
SENTINEL_HINT = (
    "Neither redis-sentinel nor redis-server (run with --sentinel) was found on PATH. Install them first:\n"
    "  Debian/Ubuntu: sudo apt-get install redis-server redis-sentinel\n"
    "  macOS:         brew install redis"
)


def _private_port() -> int:
    port = free_port()
    while port == 6379:  # never the machine's shared Redis, however the kernel picks
        port = free_port()
    return port


def sentinel_command(config: Path) -> list[str]:
    """How to run a sentinel on ``config``: ``redis-sentinel`` if installed, else ``redis-server --sentinel``."""
    binary = shutil.which("redis-sentinel")
    if binary is not None:
        return [binary, str(config)]
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError(SENTINEL_HINT)
    return [binary, str(config), "--sentinel"]


class SentinelTopology:
    """A master, ``replicas`` replicas and ``sentinels`` sentinels, all on 127.0.0.1, each with its own log.

    ``master_options`` are extra redis-server arguments for the first master
    only (e.g. ``["--min-replicas-to-write", "1"]``): Sentinel never copies a
    server's configuration, so a replica promoted later runs without them.
    """

    def __init__(self, directory: str | None = None, *, service: str = SERVICE, replicas: int = 1,
                 sentinels: int = 3, quorum: int = 2, down_after_ms: int = 1000, failover_timeout_ms: int = 3000,
                 master_options: list[str] | None = None) -> None:
        self.server_binary = shutil.which("redis-server")
        if self.server_binary is None:
            raise RuntimeError(INSTALL_HINT)
        self.directory = Path(directory or tempfile.mkdtemp(prefix="djwork-sentinel-"))
        self.directory.mkdir(parents=True, exist_ok=True)
        self.service = service
        self.quorum = quorum
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.master_options = list(master_options or [])
        self.master_port = _private_port()  # the first master's; after a failover ask master_port_agreed()
        self.replica_ports = [_private_port() for _ in range(replicas)]
        self.sentinel_ports = [_private_port() for _ in range(sentinels)]
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    # --- addresses ------------------------------------------------------------------------------
    @property
    def sentinel_hosts(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)

    def url(self, db: int = 0, query: str = "") -> str:
        """The ``redis+sentinel://`` URL djwork takes for this topology."""
        return f"redis+sentinel://{self.sentinel_hosts}/{self.service}/{db}" + (f"?{query}" if query else "")

    def server_url(self, port: int, db: int = 0) -> str:
        return f"redis://127.0.0.1:{port}/{db}"

    def sentinel(self, index: int = 0) -> redis_py.Redis:
        return redis_py.Redis(host="127.0.0.1", port=self.sentinel_ports[index], socket_timeout=2,
                              decode_responses=True)

    def server(self, port: int) -> redis_py.Redis:
        return redis_py.Redis(host="127.0.0.1", port=port, socket_timeout=2)

    def master_addresses(self) -> list[tuple[str, int] | None]:
        """What each sentinel answers to GET-MASTER-ADDR-BY-NAME (None where one does not answer)."""
        answers: list[tuple[str, int] | None] = []
        for index in range(len(self.sentinel_ports)):
            client = self.sentinel(index)
            try:
                host, port = client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
                answers.append((host, int(port)))
            except (redis_py.RedisError, TypeError, ValueError):
                answers.append(None)
            finally:
                client.close()
        return answers

    def master_port_agreed(self) -> int | None:
        """The master's port when every sentinel names the same one, else None."""
        answers = set(self.master_addresses())
        if len(answers) != 1:
            return None
        (answer,) = answers
        return None if answer is None else answer[1]

    # --- lifecycle ------------------------------------------------------------------------------
    def start(self, timeout: float = 20.0) -> SentinelTopology:
        deadline = time.monotonic() + timeout
        try:
            self._spawn("master", [*self._server_arguments(self.master_port), *self.master_options])
            for number, port in enumerate(self.replica_ports, start=1):
                self._spawn(f"replica{number}",
                            [*self._server_arguments(port), "--replicaof", "127.0.0.1", str(self.master_port)])
            self._wait(deadline, "the replicas to sync", self._replicas_synced)
            for number, port in enumerate(self.sentinel_ports, start=1):
                binary, *arguments = sentinel_command(self._sentinel_config(number, port))
                self._spawn(f"sentinel{number}", arguments, binary=binary)
            # A manual failover needs a sentinel that knows a healthy replica; every
            # sentinel knowing every other one makes the new config spread at once.
            self._wait(deadline, "the sentinels to see the replicas and each other", self._sentinels_ready)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Terminate every process (SIGKILL after 5 s), then remove the directory. Idempotent."""
        processes, self.processes = self.processes, {}
        for process in processes.values():
            if process.poll() is None:
                process.terminate()
        for process in processes.values():
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        shutil.rmtree(self.directory, ignore_errors=True)

    def flush_master(self) -> None:
        """FLUSHALL on the current master: only ever a server this topology started, never anyone's Redis."""
        port = self.master_port_agreed() or self.master_port
        if port == 6379 or port not in {self.master_port, *self.replica_ports}:
            raise RuntimeError(f"refusing to flush port {port}: not a server of this topology")
        self.server(port).flushall()

    def failover(self) -> int:
        """Ask the first sentinel for a manual failover; returns the port of the master it replaces."""
        old = self.master_port_agreed()
        if old is None:
            raise RuntimeError(f"the sentinels disagree on the master: {self.master_addresses()}")
        client = self.sentinel(0)
        try:
            client.execute_command("SENTINEL", "FAILOVER", self.service)
        finally:
            client.close()
        return old

    def log(self, name: str) -> str:
        path = self.directory / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs_tail(self, lines: int = 40) -> str:
        return "\n".join(f"----- {name} -----\n" + "\n".join(self.log(name).splitlines()[-lines:])
                         for name in self.processes)

    # --- internals ------------------------------------------------------------------------------
    def _server_arguments(self, port: int) -> list[str]:
        return ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(self.directory), "--protected-mode", "no", "--dbfilename", f"dump-{port}.rdb",
                # A full sync starts at once instead of after the default 5 s wait for more replicas.
                "--repl-diskless-sync-delay", "0"]

    def _sentinel_config(self, number: int, port: int) -> Path:
        # Sentinel rewrites its config file (it records what it learns), so each gets a file of its own.
        path = self.directory / f"sentinel{number}.conf"
        if not path.exists():
            path.write_text("\n".join([
                f"port {port}",
                "bind 127.0.0.1",
                "protected-mode no",
                f"dir {self.directory}",
                f"sentinel monitor {self.service} 127.0.0.1 {self.master_port} {self.quorum}",
                f"sentinel down-after-milliseconds {self.service} {self.down_after_ms}",
                f"sentinel failover-timeout {self.service} {self.failover_timeout_ms}",
                f"sentinel parallel-syncs {self.service} 1",
                "",
            ]))
        return path

    def _spawn(self, name: str, arguments: list[str], binary: str | None = None) -> None:
        with open(self.directory / f"{name}.log", "ab") as log:
            self.processes[name] = subprocess.Popen(
                [binary or str(self.server_binary), *arguments], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, cwd=self.directory)

    def _wait(self, deadline: float, what: str, ready: Any) -> None:
        while True:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"{name} exited ({process.returncode}) while waiting for {what}:\n"
                                       f"{self.log(name)[-2000:]}")
            try:
                if ready():
                    return
            except (redis_py.RedisError, OSError):
                pass
            if time.monotonic() >= deadline:
                raise RuntimeError(f"timed out waiting for {what}:\n{self.logs_tail()}")
            time.sleep(0.05)

    def _replicas_synced(self) -> bool:
        for port in self.replica_ports:
            client = self.server(port)
            try:
                if client.info("replication").get("master_link_status") != "up":
                    return False
            finally:
                client.close()
        return True

    def _sentinels_ready(self) -> bool:
        for index in range(len(self.sentinel_ports)):
            client = self.sentinel(index)
            try:
                master = client.sentinel_master(self.service)  # redis-py parses the reply into a dict
                if int(master["num-other-sentinels"]) < len(self.sentinel_ports) - 1:
                    return False
                healthy = [row for row in client.sentinel_slaves(self.service)
                           if row.get("master-link-status") == "ok" and not row.get("is_sdown")
                           and not row.get("is_disconnected")]
                if len(healthy) < len(self.replica_ports):
                    return False
            finally:
                client.close()
        return True
