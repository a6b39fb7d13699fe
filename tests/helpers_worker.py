"""The one harness for worker processes in tests: ``manage.py runworkers`` (standalone or a swarm) and
gunicorn with djwork embedded, plus deadline-bound waits and readers of what workers left in Redis.

Every process runs with DJANGO_SETTINGS_MODULE=tests.settings_worker (per-test
``overrides`` merged into DJWORK) against a private Redis only, in a session
of its own, with its output in a file. The ``workers`` fixture SIGKILLs, at
the end of the test, every process group it started *and* every child it saw
(swarm children take process groups of their own), then prints each log's
tail (pytest shows it when the test failed).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import pytest

from djwork.api.history import Run, expand
from djwork.testing.redis_server import free_port

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")

__all__ = ["ROOT", "LoggedProcess", "Worker", "Workers", "blocked_takers", "child_pids", "counts", "decode",
           "free_port", "http_get", "identities", "in_progress_items", "pid_alive", "send_remote_signal",
           "wait_beats", "wait_until", "workers", "zset_jobs"]


def wait_until(predicate: Callable[[], T], timeout: float, message: str = "condition",
               interval: float = 0.05) -> T:
    """Poll ``predicate`` until it returns something truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {message} (last value {value!r})")
        time.sleep(interval)


def decode(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


class LoggedProcess:
    """A subprocess the tests started, with its output in a file: shared by djwork, gunicorn and Ruby processes."""

    def __init__(self, process: subprocess.Popen[bytes], log_path: Path, label: str) -> None:
        self.process = process
        self.log_path = log_path
        self.label = label
        self._identity: str | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def wait_exit(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.label} (pid {self.pid}) still running after {timeout}s:\n"
                                 f"{self.log()[-3000:]}") from None

    def wait_log(self, text: str, timeout: float) -> str:
        wait_until(lambda: text in self.log(), timeout, f"{text!r} in the log of {self.label}")
        return self.log()

    def find_identity(self, redis: Any) -> str | None:
        """The identity this process registered in ``processes`` (matched by the pid in its info), if any yet."""
        if not self.alive():
            raise AssertionError(f"{self.label} exited ({self.process.returncode}):\n{self.log()[-4000:]}")
        for member in redis.smembers("processes"):
            info = redis.hget(member, "info")
            if info and json.loads(info).get("pid") == self.pid:
                return decode(member)
        return None


class Worker(LoggedProcess):
    """A ``runworkers`` process (standalone or a swarm's parent) or a gunicorn master; remembers every child
    it was seen with, so the teardown can kill children that outlived it."""

    def __init__(self, process: subprocess.Popen[bytes], log_path: Path, label: str) -> None:
        super().__init__(process, log_path, label)
        self.seen_children: set[int] = set()

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait(10)

    def identity(self, redis: Any, timeout: float = 20.0) -> str:
        if self._identity is None:
            self._identity = wait_until(lambda: self.find_identity(redis), timeout, f"{self.label} to register")
        return self._identity

    def children(self) -> list[int]:
        pids = child_pids(self.pid)
        self.seen_children.update(pids)
        return pids


class Workers:
    """Starts worker processes for one test (runworkers, a swarm, gunicorn) and guarantees none outlives it.

    Every process runs with DJANGO_SETTINGS_MODULE=tests.settings_worker, ``overrides`` merged into DJWORK,
    against the suite's private Redis (or the ``redis_url`` a test passes), in a session of its own.
    """

    def __init__(self, directory: Path, redis_url: str) -> None:
        self.directory = directory
        self.redis_url = redis_url
        # Inherited by every process started here and by their children, whatever tree they form:
        # the teardown finds them all by it.
        self.marker = f"{os.getpid()}-{id(self)}-{time.monotonic_ns()}"
        POOL_DIRECTORIES[self.marker] = str(Path(directory).resolve())
        self.started: list[Worker] = []

    def start(self, *args: str, overrides: dict[str, Any] | None = None, label: str | None = None,
              redis_url: str | None = None) -> Worker:
        """``manage.py runworkers *args`` (with ``--processes N``, a swarm)."""
        label = label or f"w{len(self.started) + 1}"
        return self._start([sys.executable, "manage.py", "runworkers", *args], label, redis_url, overrides, {})

    def gunicorn(self, port: int, *, overrides: dict[str, Any] | None = None, label: str | None = None,
                 redis_url: str | None = None, env: dict[str, str] | None = None) -> Worker:
        """gunicorn with tests/gunicorn_conf.py (djwork embedded in its worker), serving on 127.0.0.1:``port``."""
        label = label or f"gunicorn-{len(self.started) + 1}"
        command = [sys.executable, "-m", "gunicorn", "-c", "tests/gunicorn_conf.py", "example.wsgi"]
        return self._start(command, label, redis_url, overrides,
                           {"DJWORK_TEST_BIND": f"127.0.0.1:{port}", **(env or {})})

    def _start(self, command: list[str], label: str, redis_url: str | None, overrides: dict[str, Any] | None,
               extra_env: dict[str, str]) -> Worker:
        redis_url = redis_url or self.redis_url
        # A sentinel or cluster URL names several hosts (urlparse can't give one port), all on free ports.
        if "+" not in redis_url.split("://")[0] and urlparse(redis_url).port == 6379:
            raise RuntimeError("worker tests run against a private Redis only")
        env = dict(os.environ)
        env.update({
            "DJANGO_SETTINGS_MODULE": "tests.settings_worker",
            "DJWORK_TEST_REDIS_URL": redis_url,
            "DJWORK_TEST_OVERRIDES": json.dumps(overrides or {}),
            POOL_MARKER: self.marker,
            "PYTHONUNBUFFERED": "1",
            **extra_env,
        })
        env.pop("REDIS_URL", None)
        log_path = self.directory / f"worker-{label}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        worker = Worker(process, log_path, label)
        self.started.append(worker)
        return worker

    def _kill_marked(self) -> None:
        # A swarm child respawned after its parent's children were listed once outlived the
        # teardown and took the next test's jobs: anything carrying this pool's marker dies.
        self._kill_all_marked(self.marker)

    @staticmethod
    def _kill_all_marked(*markers: str) -> None:
        for _ in range(20):
            pids = marked_pids(*markers)
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.05)

    def cleanup(self) -> None:
        FINISHED_POOLS.add(self.marker)
        for worker in self.started:
            if worker.alive():
                # Frozen first: a swarm parent still running could respawn a child after the listing
                # below, and that child (a session of its own) would fetch the next test's jobs.
                try:
                    os.kill(worker.pid, signal.SIGSTOP)
                except ProcessLookupError:
                    pass
                worker.children()
            # Swarm children and gunicorn workers take sessions of their own: killing the parent's
            # process group alone would leave them running into the next test.
            for group in {worker.pid, *worker.seen_children}:
                for kill in (os.killpg, os.kill):
                    try:
                        kill(group, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
            try:
                worker.process.wait(10)
            except subprocess.TimeoutExpired:
                pass
            self._kill_marked()
            tail = "\n".join(worker.log().splitlines()[-80:])
            print(f"----- {worker.label} pid {worker.pid} rc {worker.process.returncode} "
                  f"({worker.log_path}) -----\n{tail}")


@pytest.fixture
def workers(raw_redis, redis_url: str, tmp_path: Path):
    pool = Workers(tmp_path, redis_url)
    # No process of an earlier test may take this test's jobs, however it escaped that test's teardown.
    if FINISHED_POOLS:
        Workers._kill_all_marked(*FINISHED_POOLS)
    try:
        yield pool
    finally:
        pool.cleanup()


# --- processes, HTTP ---------------------------------------------------------------------
def http_get(port: int, path: str = "/", timeout: float = 3.0) -> tuple[int | None, str]:
    """(status, body) of a GET on 127.0.0.1:port, redirects not followed; (None, error) if nothing answers."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(f"http://127.0.0.1:{port}{path}", timeout=timeout) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
    except OSError as error:
        return None, str(error)


def pid_alive(pid: int) -> bool:
    """Alive and not a zombie (a reaped-later zombie of ours still answers kill(0))."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


POOL_MARKER = "DJWORK_TEST_POOL"


FINISHED_POOLS: set[str] = set()  # markers of pools whose teardown ran: none of theirs may live on
POOL_DIRECTORIES: dict[str, str] = {}  # marker -> the pool's directory, where its processes' logs are


def marked_pids(*markers: str) -> list[int]:
    """Every live process whose environment carries ``POOL_MARKER=`` one of ``markers``, or whose stdout or
    stderr is a log file in one of their pools' directories.

    The environment alone missed swarm children: setproctitle writes the
    process title over the memory /proc/<pid>/environ reads, so a child that
    set its title no longer showed the marker, outlived its test and fetched
    the next test's jobs. Its inherited log file descriptor survives that.
    """
    prefix = f"{POOL_MARKER}=".encode()
    wanted = {marker.encode() for marker in markers}
    directories = tuple(POOL_DIRECTORIES[marker] + os.sep for marker in markers if marker in POOL_DIRECTORIES)
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/environ", "rb") as environ:
                    variables = environ.read().split(b"\0")
            except OSError:
                continue
            if any(variable[len(prefix):] in wanted for variable in variables if variable.startswith(prefix)) \
                    or _writes_into(entry, directories):
                found.append(int(entry))
    return found


def _writes_into(pid: str, directories: tuple[str, ...]) -> bool:
    for descriptor in (1, 2):
        try:
            if os.readlink(f"/proc/{pid}/fd/{descriptor}").startswith(directories):
                return True
        except OSError:
            continue
    return False


def child_pids(pid: int) -> list[int]:
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            children.append(int(entry))
    return sorted(children)


# --- reading what the workers left in Redis ------------------------------------------
def zset_jobs(redis: Any, key: str) -> list[tuple[dict[str, Any], float, str]]:
    """(parsed job, score, raw member) for every member of a sorted set, lowest score first."""
    return [(json.loads(member), score, decode(member)) for member, score in redis.zrange(key, 0, -1, withscores=True)]


def identities(redis: Any) -> dict[str, dict[str, Any]]:
    """identity -> parsed info, for every member of ``processes`` that still has its hash."""
    found = {}
    for member in redis.smembers("processes"):
        info = redis.hget(member, "info")
        if info:
            found[decode(member)] = json.loads(info)
    return found


def counts(redis: Any, key: str = "t:counts") -> dict[str, int]:
    return {decode(k): int(v) for k, v in redis.hgetall(key).items()}


def history_runs(redis: Any) -> list[Run]:
    """Every run in djwork:history, oldest first, read the way djwork.api.History reads it (docs/history.md)."""
    return [run for entry_id, fields in redis.xrange("djwork:history")
            for _run_id, run in expand(entry_id, fields) if run is not None]


def in_progress_items(redis: Any) -> dict[str, list[str]]:
    """Every djwork:inprogress:* list and its contents."""
    return {decode(key): [decode(item) for item in redis.lrange(key, 0, -1)]
            for key in redis.scan_iter("djwork:inprogress:*", _type="list")}


def blocked_takers(redis: Any) -> list[dict[str, str]]:
    """CLIENT LIST rows of connections blocked in BLMOVE (a djwork taker waiting for a job), every primary's."""
    if hasattr(redis, "get_primaries"):  # a cluster: each taker waits on its queue's primary
        rows = [row for node in redis.get_primaries() for row in redis.get_redis_connection(node).client_list()]
    else:
        rows = redis.client_list()
    return [client for client in rows if client.get("cmd") == "blmove"]


def wait_beats(redis: Any, identity: str, beats: int = 2, timeout: float = 30.0) -> None:
    """Wait until ``identity`` has written ``beats`` more heartbeats: proof that the process kept running its
    loops for that long, so whatever it would have done by then (fetch a paused job, respawn, promote) it had
    the chance to do. Use it before asserting that something did *not* happen, instead of a sleep."""
    seen: list[bytes | None] = [redis.hget(identity, "beat")]

    def advanced() -> bool:
        beat = redis.hget(identity, "beat")
        if beat is None:
            raise AssertionError(f"{identity} stopped beating")
        if beat != seen[-1]:
            seen.append(beat)
        return len(seen) > beats

    wait_until(advanced, timeout, f"{beats} more beats of {identity}")


def send_remote_signal(redis: Any, identity: str, name: str) -> None:
    """What Sidekiq's Process#quiet!/#stop!/#dump_threads do: MULTI LPUSH + EXPIRE 60."""
    pipe = redis.pipeline(transaction=True)
    pipe.lpush(f"{identity}-signals", name)
    pipe.expire(f"{identity}-signals", 60)
    pipe.execute()
