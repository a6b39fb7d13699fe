"""tests/support/xdist_groups.py: a serial group's tests really run on one xdist worker.

Checked on a small suite of its own, run with xdist: the suite's wall time and
its module-scoped processes (a live server, a Ruby fleet, a Sentinel
topology) depend on the grouping, and a lost hook or tag shows nowhere else
but as a slower, flakier run.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFTEST = """
from tests.support import xdist_groups

pytest_plugins = ["tests.support.selection", "tests.support.xdist_groups"]
xdist_groups.SERIAL_GROUPS["test_grouped"] = "together"
"""

RECORDER = """
import json
import os

import pytest


@pytest.mark.parametrize("n", range(6))
def test_records(request, n):
    with open(os.environ["RECORD_TO"], "a") as record:
        record.write(json.dumps([request.node.nodeid, os.environ["PYTEST_XDIST_WORKER"]]) + "\\n")
"""


def test_a_serial_groups_tests_run_on_one_worker_tagged_with_the_group(pytester, monkeypatch):
    record = pytester.path / "record.jsonl"
    monkeypatch.setenv("RECORD_TO", str(record))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the inner run imports tests.support from this checkout
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_grouped=RECORDER, test_spread=RECORDER)
    result = pytester.runpytest_subprocess(
        "-p", "no:django", "-p", "no:cacheprovider", "-p", "no:randomly", "-n", "3", "--dist", "loadgroup"
    )
    result.assert_outcomes(passed=12)
    runs = [json.loads(line) for line in record.read_text().splitlines()]
    grouped = [(nodeid, worker) for nodeid, worker in runs if nodeid.startswith("test_grouped.py")]
    spread = [(nodeid, worker) for nodeid, worker in runs if nodeid.startswith("test_spread.py")]
    assert len(grouped) == 6 and all(nodeid.endswith("@together") for nodeid, _ in grouped), grouped
    assert len({worker for _, worker in grouped}) == 1, grouped
    assert not any("@" in nodeid for nodeid, _ in spread), spread


FIRST_CONFTEST = """
from tests.support import xdist_groups

pytest_plugins = ["tests.support.selection", "tests.support.xdist_groups"]
xdist_groups.SERIAL_GROUPS["test_first"] = "first"
xdist_groups.FIRST_GROUPS = ("first",)
"""

# The first group's long test ends only once every other test has run: a worker that drew more work behind it
# could not run that work, and the wait ran out instead.
LONG_FIRST = """
import json
import os
import time


def test_long(request):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(os.environ["RECORD_TO"]) as record:
            if sum(1 for line in record if "test_spread.py" in line) == 12:
                break
        time.sleep(0.05)
    with open(os.environ["RECORD_TO"], "a") as record:
        record.write(json.dumps([request.node.nodeid, os.environ["PYTEST_XDIST_WORKER"]]) + "\\n")


def test_short(request):
    with open(os.environ["RECORD_TO"], "a") as record:
        record.write(json.dumps([request.node.nodeid, os.environ["PYTEST_XDIST_WORKER"]]) + "\\n")
"""


def test_the_worker_running_a_first_group_takes_nothing_else_until_it_is_done(pytester, monkeypatch):
    record = pytester.path / "record.jsonl"
    record.touch()
    monkeypatch.setenv("RECORD_TO", str(record))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeconftest(FIRST_CONFTEST)
    pytester.makepyfile(test_first=LONG_FIRST, test_spread=RECORDER.replace("range(6)", "range(12)"))
    result = pytester.runpytest_subprocess(
        "-p", "no:django", "-p", "no:cacheprovider", "-p", "no:randomly", "-n", "3", "--dist", "loadgroup"
    )
    result.assert_outcomes(passed=14)
    runs = [json.loads(line) for line in record.read_text().splitlines()]
    first_workers = {worker for nodeid, worker in runs if nodeid.startswith("test_first.py")}
    assert len(first_workers) == 1, runs
    spread_on_first = [nodeid for nodeid, worker in runs if worker in first_workers and "test_spread" in nodeid]
    assert not spread_on_first, runs  # every other test ran beside it, none behind it
