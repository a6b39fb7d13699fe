"""Running the Ruby side of the interop tests: availability, one-shot scripts, the Sidekiq server, Sidekiq::Web.

Ruby gets the suite's private Redis through REDIS_URL in its own
environment only (tests/interop/boot.rb refuses anything else). Every
process started here is tracked and ended, by pid, in fixture teardown.

Availability: the tests need ``ruby`` with the sidekiq gem, Rack and WEBrick
(Debian: ruby ruby-sidekiq ruby-rack ruby-webrick, which .ci/run installs; on trixie's Rack 3 also
ruby-rackup and ruby-rack-session, which .ci/trixie's root has).
Without them the tests skip, except under CI=true, where they fail.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from djwork.testing.redis_server import free_port
from tests.helpers_worker import LoggedProcess, wait_until

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PACKAGES = "ruby ruby-sidekiq ruby-rack ruby-webrick"
PROBE = ('require "sidekiq"; require "sidekiq/api"; print Sidekiq::VERSION; '
         'begin; require "sidekiq/web"; require "rack/session/cookie"; require "webrick"; '
         'rescue LoadError => e; print " web:", e.message; end')


@functools.cache
def sidekiq_probe() -> tuple[str | None, str | None]:
    """(Sidekiq version or None, the Debian package that is missing or None)."""
    ruby_path = shutil.which("ruby")
    if ruby_path is None:
        return None, "ruby-sidekiq"
    try:
        done = subprocess.run([ruby_path, "-e", PROBE], capture_output=True, text=True, timeout=60,
                              env=ruby_env(None), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None, "ruby-sidekiq"
    if done.returncode != 0:
        return None, "ruby-sidekiq"
    version, _, web_problem = done.stdout.partition(" web:")
    if web_problem:
        return version, "ruby-webrick" if "webrick" in web_problem else "ruby-rack"
    return version, None


def sidekiq_major() -> int:
    """Sidekiq's major version (0 when it is missing): where 6.4 and 7.x write or behave differently."""
    version, _ = sidekiq_probe()
    try:
        return int((version or "0").split(".")[0])
    except ValueError:
        return 0


def ruby_beat() -> float:
    """Sidekiq's heartbeat period (launcher.rb BEAT_PAUSE): 5 s in 6.x, 10 s from 7.0."""
    return 10.0 if sidekiq_major() >= 7 else 5.0


def in_ci() -> bool:
    return os.environ.get("CI") == "true"  # the rule tests/browser/live.py uses too


def require_sidekiq() -> str:
    """The Sidekiq version; skips the test (fails it under CI=true) when Ruby Sidekiq is missing."""
    version, missing = sidekiq_probe()
    if missing is None:
        return version or ""
    if in_ci():
        pytest.fail(f"CI=true: the interop tests need {missing}, which is not installed "
                    f"(apt-get install {PACKAGES}, as .ci/run does)", pytrace=False)
    pytest.skip(f"skipped: install {missing} (apt-get install {missing})")


@pytest.fixture(scope="module")
def sidekiq_version() -> str:
    """Used by every interop module (its ``pytestmark``): skip or fail before anything starts."""
    return require_sidekiq()


def ruby_env(redis_url: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a Ruby process: ours, with REDIS_URL set to the private server only."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("REDIS_URL", "REDIS_PROVIDER", "RUBYOPT", "BUNDLE_GEMFILE", "INTEROP_CAPSULE")}
    env.update(extra or {})
    if redis_url is not None:
        parsed = urlparse(redis_url)
        if parsed.scheme != "unix" and parsed.port in (None, 6379):
            raise RuntimeError(f"refusing to point Ruby at {redis_url}: the interop tests use the private Redis only")
        env["REDIS_URL"] = redis_url
    return env


def ruby(redis_url: str, script: str, *args: str, stdin: Any = None, timeout: float = 60) -> Any:
    """Run tests/interop/<script> and return the JSON it printed; fail the test on a non-zero exit."""
    feed = {"stdin": subprocess.DEVNULL} if stdin is None else {"input": json.dumps(stdin)}
    done = subprocess.run([shutil.which("ruby") or "ruby", str(HERE / script), *args], cwd=ROOT,
                          env=ruby_env(redis_url), capture_output=True, text=True, timeout=timeout, **feed)
    if done.returncode != 0:
        raise AssertionError(f"ruby {script} {' '.join(args)} exited {done.returncode}:\n"
                             f"{done.stderr[-6000:]}\n{done.stdout[-2000:]}")
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines, f"ruby {script} printed nothing; stderr:\n{done.stderr[-4000:]}"
    return json.loads(lines[-1])


class RubyProcess(LoggedProcess):
    """One long-running Ruby process (the sidekiq CLI, a WEBrick server) with its log file."""

    def __init__(self, argv: list[str], log_path: Path, redis_url: str, label: str,
                 extra_env: dict[str, str] | None = None) -> None:
        with open(log_path, "wb") as log:
            process = subprocess.Popen(argv, cwd=ROOT, env=ruby_env(redis_url, extra_env), stdin=subprocess.DEVNULL,
                                       stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        super().__init__(process, log_path, label)

    def identity(self, redis: Any, timeout: float = 20.0) -> str:
        """The identity this Sidekiq process registered in ``processes`` (matched by the pid in its info)."""
        if self._identity is None:
            self._identity = wait_until(lambda: self.find_identity(redis), timeout, f"{self.label} to register")
        elif not redis.sismember("processes", self._identity):
            # The database was emptied under a live process: it is back on its next beat (5 s in 6.4).
            wait_until(lambda: redis.sismember("processes", self._identity) and redis.hget(self._identity, "info"),
                       timeout, f"{self.label} to beat again")
        return self._identity

    def stop(self, timeout: float = 10.0) -> None:
        """TERM, then KILL after ``timeout``; only ever this process, by pid."""
        if self.alive():
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def report(self) -> None:
        tail = "\n".join(self.log().splitlines()[-60:])
        print(f"----- {self.label} pid {self.pid} rc {self.process.returncode} ({self.log_path}) -----\n{tail}")


class RubyFleet:
    """Starts Ruby processes for a module or a test and guarantees none outlives it."""

    def __init__(self, directory: Path, redis_url: str) -> None:
        self.directory = directory
        self.redis_url = redis_url
        self.started: list[RubyProcess] = []

    def sidekiq(self, *queues: str, concurrency: int = 5, tag: str = "interop", timeout: int = 2,
                label: str | None = None, capsule: tuple[str, str, int] | None = None) -> RubyProcess:
        """``sidekiq -r tests/interop/sidekiq_jobs.rb`` on ``queues`` (the real CLI: launcher, poller, signals).

        ``capsule`` = (name, queue, concurrency) adds a Sidekiq 7 capsule beside the default one
        (tests/interop/sidekiq_jobs.rb; 6.x has no capsules).
        """
        label = label or f"sidekiq-{len(self.started) + 1}"
        command = shutil.which("sidekiq")
        argv = [command] if command else [shutil.which("ruby") or "ruby", "-S", "sidekiq"]
        argv += ["-r", str(HERE / "sidekiq_jobs.rb"), "-c", str(concurrency), "-t", str(timeout), "-g", tag]
        for queue in queues:
            argv += ["-q", queue]
        extra = {"INTEROP_CAPSULE": ":".join(map(str, capsule))} if capsule else None
        return self._start(argv, label, extra)

    def web(self, label: str = "sidekiq-web") -> SidekiqWeb:
        """Sidekiq::Web on a real WEBrick server at a free local port."""
        port = free_port()
        process = self._start([shutil.which("ruby") or "ruby", str(HERE / "web.rb"), "serve", str(port)], label)
        web = SidekiqWeb(process, f"http://127.0.0.1:{port}")
        wait_until(web.up, 20, "Sidekiq::Web on WEBrick to listen")
        return web

    def _start(self, argv: list[str], label: str, extra_env: dict[str, str] | None = None) -> RubyProcess:
        process = RubyProcess(argv, self.directory / f"{label}.log", self.redis_url, label, extra_env)
        self.started.append(process)
        return process

    def cleanup(self) -> None:
        for process in self.started:
            try:
                process.stop()
            finally:
                process.report()


class SidekiqWeb:
    """An HTTP client for Sidekiq::Web on WEBrick, with a cookie jar (its CSRF protection needs the session)."""

    def __init__(self, process: RubyProcess, base: str) -> None:
        self.process = process
        self.base = base
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()), _NoRedirect)

    def up(self) -> bool:
        if not self.process.alive():
            raise AssertionError(f"Sidekiq::Web exited:\n{self.process.log()[-4000:]}")
        try:
            self.get("/stats")
        except OSError:
            return False
        return True

    def get(self, path: str) -> tuple[int, str]:
        return self._open(urllib.request.Request(self.base + path))

    def post(self, path: str, form: dict[str, str]) -> tuple[int, str]:
        data = urllib.parse.urlencode(form).encode()
        return self._open(urllib.request.Request(self.base + path, data=data, method="POST"))

    def form_token(self, path: str) -> str:
        """The CSRF token a form on ``path`` carries (fresh per page view, as a browser gets it)."""
        status, page = self.get(path)
        found = re.search(r"name='authenticity_token' value='([^']+)'", page)
        assert status == 200 and found, f"no authenticity_token on {path} ({status})"
        return found.group(1)

    def _open(self, request: urllib.request.Request) -> tuple[int, str]:
        try:
            with self.opener.open(request, timeout=30) as response:
                return response.status, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode("utf-8", "replace")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def stop_workers(workers: Any, timeout: float = 15.0) -> None:
    """TERM every djwork worker of a ``tests.helpers_worker.Workers`` still running, wait for it, then clean up."""
    try:
        for worker in workers.started:
            if worker.alive():
                worker.send(signal.SIGTERM)
        for worker in workers.started:
            try:
                worker.process.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
    finally:
        workers.cleanup()  # kills what is left, by pid, and prints each log's tail


def move_due(redis: Any, key: str = "retry") -> int:
    """Make every member of ``key`` due now (ZADD XX): Sidekiq's 15 s+ backoff, skipped for the test."""
    members = redis.zrange(key, 0, -1)
    if not members:
        return 0
    now = time.time() - 1
    redis.zadd(key, {member: now for member in members}, xx=True)
    return len(members)
