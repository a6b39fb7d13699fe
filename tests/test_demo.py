"""``./dev demo`` stops whole: after TERM (or a terminal's Ctrl-C) none of its processes is left and its port is free.

Runs the real script against the existing .venv (ensure_venv reinstalls only when
pyproject.toml changed, checked first), on a free port, with its own database file.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.signals import interruptible

ROOT = Path(__file__).resolve().parent.parent
# runserver's banner: "Starting development server at" on Django 5.2, "Starting WSGI development server at" on 6.x.
READY = "development server at"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def process_table() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, process group, start time) of every live process."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] == "Z":
            continue
        table[int(entry.name)] = (int(fields[1]), int(fields[2]), fields[19])
    return table


def descendants(root: int) -> dict[int, str]:
    table = process_table()
    found = {root: table[root][2]} if root in table else {}
    grew = True
    while grew:
        grew = False
        for pid, (parent, group, started) in table.items():
            if pid not in found and (parent in found or group == root):
                found[pid] = started
                grew = True
    return found


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@pytest.fixture
def venv_is_current() -> None:
    stamp = ROOT / ".venv" / ".djwork-installed"
    want = hashlib.sha1((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if os.environ.get("DJWORK_PIP_PINS"):  # a matrix leg's pins (.ci/trixie) are part of ./dev's stamp
        want += " " + os.environ["DJWORK_PIP_PINS"]
    if not stamp.is_file() or stamp.read_text().strip() != want:
        pytest.skip("the .venv is not installed from this pyproject.toml: ./dev demo would reinstall it")


@pytest.mark.parametrize("stop", ["term", "ctrl-c"])
def test_demo_leaves_no_process_and_frees_its_port(venv_is_current, tmp_path, stop):
    port = free_port()
    env = {key: value for key, value in os.environ.items()
           if key not in ("REDIS_URL", "DJANGO_SETTINGS_MODULE", "VIRTUAL_ENV")}
    env.update({"DEMO_PORT": str(port), "DJWORK_EXAMPLE_DB": str(tmp_path / "demo.sqlite3"), "TMPDIR": str(tmp_path),
                "PYTHONUNBUFFERED": "1"})
    log_path = tmp_path / "demo.log"
    with open(log_path, "wb") as log:
        demo = subprocess.Popen(["./dev", "demo"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=interruptible)
    try:
        deadline = time.monotonic() + 60
        while READY not in log_path.read_text(errors="replace") or port_is_free(port):
            assert demo.poll() is None, f"./dev demo exited {demo.returncode}:\n{log_path.read_text()}"
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.1)
        started = descendants(demo.pid)
        # The script, the worker, the web server, the Redis wrapper and redis-server.
        assert len(started) >= 5, started
        if stop == "term":
            demo.send_signal(signal.SIGTERM)
        else:  # a terminal sends SIGINT to the whole foreground group
            os.killpg(demo.pid, signal.SIGINT)
        demo.wait(timeout=45)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
    output = log_path.read_text(errors="replace")
    assert "unbound variable" not in output, output
    assert "dev: installing" not in output, output
    assert "stopping the worker" in output, output
    deadline = time.monotonic() + 10
    while True:
        table = process_table()
        left = [pid for pid, started_at in started.items() if pid in table and table[pid][2] == started_at]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not left, f"still running: {left}\n{output}"
    assert port_is_free(port)
