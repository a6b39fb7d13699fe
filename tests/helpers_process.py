"""Real processes for the process-model tests: ``runworkers`` (standalone and swarm) and gunicorn.

Every process runs with DJANGO_SETTINGS_MODULE=tests.settings_process against
a private Redis only, in a session of its own, with its output in a file.
The ``procs`` fixture SIGKILLs, at the end of the test, every process group
it started *and* every swarm child it saw (children take process groups of
their own, so killing the parent's group alone would miss them), then
prints each log's tail (pytest shows it when the test failed).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import pytest

from djwork.testing.redis_server import free_port
from tests.helpers_worker import LoggedProcess, wait_until

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")

__all__ = ["ROOT", "Proc", "Procs", "child_pids", "free_port", "http_get", "identities", "pid_alive", "procs",
           "wait_until"]


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


def identities(redis: Any) -> dict[str, dict[str, Any]]:
    """identity -> parsed info, for every member of ``processes`` that still has its hash."""
    found = {}
    for member in redis.smembers("processes"):
        info = redis.hget(member, "info")
        if info:
            found[member.decode()] = json.loads(info)
    return found


class Proc(LoggedProcess):
    """A runworkers (standalone or swarm) or gunicorn process; remembers every child it was seen with."""

    def __init__(self, process: subprocess.Popen[bytes], log_path: Path, label: str) -> None:
        super().__init__(process, log_path, label)
        self.seen_children: set[int] = set()

    def children(self) -> list[int]:
        pids = child_pids(self.pid)
        self.seen_children.update(pids)
        return pids


class Procs:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.started: list[Proc] = []

    def _start(self, command: list[str], label: str, redis_url: str, overrides: dict[str, Any] | None,
               env: dict[str, str] | None) -> Proc:
        if urlparse(redis_url).port == 6379:
            raise RuntimeError("process tests run against a private Redis only")
        full_env = dict(os.environ)
        full_env.update({
            "DJANGO_SETTINGS_MODULE": "tests.settings_process",
            "DJWORK_TEST_REDIS_URL": redis_url,
            "DJWORK_TEST_OVERRIDES": json.dumps(overrides or {}),
            "PYTHONUNBUFFERED": "1",
        })
        full_env.pop("REDIS_URL", None)
        full_env.update(env or {})
        log_path = self.directory / f"{label}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(command, cwd=ROOT, env=full_env, stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        proc = Proc(process, log_path, label)
        self.started.append(proc)
        return proc

    def runworkers(self, *args: str, redis_url: str, overrides: dict[str, Any] | None = None,
                   label: str | None = None) -> Proc:
        label = label or f"runworkers-{len(self.started) + 1}"
        return self._start([sys.executable, "manage.py", "runworkers", *args], label, redis_url, overrides, None)

    def gunicorn(self, port: int, *, redis_url: str, overrides: dict[str, Any] | None = None,
                 label: str | None = None) -> Proc:
        label = label or f"gunicorn-{len(self.started) + 1}"
        command = [sys.executable, "-m", "gunicorn", "-c", "tests/gunicorn_conf.py", "example.wsgi"]
        return self._start(command, label, redis_url, overrides, {"DJWORK_TEST_BIND": f"127.0.0.1:{port}"})

    def cleanup(self) -> None:
        for proc in self.started:
            if proc.alive():
                proc.children()
            groups = {proc.pid, *proc.seen_children}
            for group in groups:
                for kill in (os.killpg, os.kill):
                    try:
                        kill(group, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
            try:
                proc.process.wait(10)
            except subprocess.TimeoutExpired:
                pass
            tail = "\n".join(proc.log().splitlines()[-60:])
            print(f"----- {proc.label} pid {proc.pid} rc {proc.process.returncode} ({proc.log_path}) -----\n{tail}")


@pytest.fixture
def procs(tmp_path: Path):
    pool = Procs(tmp_path)
    try:
        yield pool
    finally:
        pool.cleanup()
