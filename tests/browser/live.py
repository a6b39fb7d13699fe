"""The live dashboard the browser tests drive: runserver + a real worker on the private Redis, driven by chromium.

Debian's chromium (/usr/bin/chromium) through the Python Playwright package;
never a Playwright-downloaded browser. Missing either skips these tests
locally with a reason, and fails them in CI (CI=true), as a missing Redis
does in Dramatiq's suite. Every subprocess started here is killed, by pid,
at teardown; each writes its log to a file whose tail is printed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import redis as redis_py

from djwork.testing.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SETTINGS = "tests.browser.settings"
ADMIN = ("admin", "admin-pw")
VIEWER = ("viewer", "viewer-pw")

CREATE_USERS = f"""
from django.contrib.auth.models import Permission, User
User.objects.create_superuser({ADMIN[0]!r}, "admin@example.com", {ADMIN[1]!r})
viewer = User.objects.create_user({VIEWER[0]!r}, password={VIEWER[1]!r}, is_staff=True)
viewer.user_permissions.add(Permission.objects.get(codename="view_dashboard"))
"""


def require_browser() -> Any:
    """The Playwright module, or skip (locally) / fail (CI) naming what to install."""
    missing = []
    if not os.path.exists(CHROMIUM):
        missing.append("install Debian's chromium (apt-get install chromium)")
    try:
        from playwright import sync_api
    except ImportError:
        sync_api = None
        missing.append("install the playwright Python package (.venv/bin/pip install playwright; "
                       "never `playwright install`)")
    if missing:
        reason = "; ".join(missing)
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser tests can't run in CI: {reason}", pytrace=False)
        pytest.skip(f"skipped: {reason}")
    return sync_api


class Cluster:
    """The live server, its worker, and what the tests need to reach them."""

    def __init__(self, directory: Path, redis_url: str) -> None:
        self.directory = directory
        self.redis_url = redis_url
        self.redis = redis_py.Redis.from_url(redis_url)
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "DJANGO_SETTINGS_MODULE": SETTINGS, "DJWORK_TEST_REDIS_URL": redis_url,
                    "DJWORK_EXAMPLE_DB": str(directory / "db.sqlite3"), "PYTHONUNBUFFERED": "1"}
        self.env.pop("REDIS_URL", None)
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def manage(self, *args: str) -> None:
        subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, check=True,
                       capture_output=True, timeout=120)

    def start(self, label: str, *args: str) -> subprocess.Popen[bytes]:
        with open(self.directory / f"{label}.log", "wb") as log:
            process = subprocess.Popen([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env,
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        self.processes[label] = process
        return process

    def log(self, label: str) -> str:
        path = self.directory / f"{label}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_http(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.processes["server"].poll() is not None:
                raise RuntimeError(f"runserver exited:\n{self.log('server')}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/admin/login/", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"runserver did not answer in {timeout}s:\n{self.log('server')}")

    def serve(self) -> None:
        """A fresh database with an admin and a read-only viewer, then runserver."""
        self.manage("migrate", "--noinput")
        self.manage("shell", "-c", CREATE_USERS)
        self.start("server", "runserver", f"127.0.0.1:{self.port}", "--noreload")
        self.wait_http()

    def start_worker(self) -> subprocess.Popen[bytes]:
        return self.start("worker", "runworkers", "-c", "3", "-q", "critical", "-q", "default", "-q", "low",
                          "--tag", "browser")

    def worker_identity(self, pid: int, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for member in self.redis.smembers("processes"):
                info = self.redis.hget(member, "info")
                if info and f'"pid":{pid},' in info.decode():
                    return member.decode()
            time.sleep(0.1)
        raise RuntimeError(f"worker {pid} did not register:\n{self.log('worker')}")

    def stop_all(self) -> None:
        for label, process in self.processes.items():
            if process.poll() is None:
                process.kill()
            process.wait(10)
            tail = "\n".join(self.log(label).splitlines()[-40:])
            print(f"----- {label} pid {process.pid} rc {process.returncode} -----\n{tail}")
        self.redis.close()


def login(browser: Any, cluster: Cluster, user: tuple[str, str], **context_options: Any) -> Any:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, **context_options)
    context.set_default_timeout(15_000)
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.dialogs = dialogs  # any alert() is an XSS that fired
    page.goto(f"{cluster.base_url}/admin/login/?next=/djwork/")
    page.fill("#id_username", user[0])
    page.fill("#id_password", user[1])
    page.click("input[type=submit]")
    page.wait_for_url(f"{cluster.base_url}/djwork/")
    return page



def shoot(page: Any, directory: Path, name: str) -> None:
    page.screenshot(path=str(directory / f"{name}.png"), full_page=True)
