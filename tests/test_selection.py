"""tests/support/selection.py: the slow mark follows what a test starts, and a fast test that starts a process fails.

Checked on a small suite of its own (pytester, in this process), so what
the detection sees and what the guard refuses are pinned here, not only
trusted from the real suite's runs.
"""

from __future__ import annotations

CONFTEST = 'pytest_plugins = ["tests.helpers_worker", "tests.support.selection"]\n'

# Module-level text: this file's own test functions name no process starter, so they stay fast.
HELPER = '''
import subprocess
import sys


def start_python():
    subprocess.run([sys.executable, "-c", "pass"], check=True)
'''

SUITE = '''
import subprocess
import sys

from helper_starts import start_python


def test_uses_the_workers_fixture(workers):
    pass


def test_starts_python_itself():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_starts_nothing():
    assert 1 + 1 == 2


def test_starts_python_through_a_helper_the_detection_cannot_see():
    start_python()
'''

INNER_ARGUMENTS = ("-p", "no:django", "-p", "no:cacheprovider", "-p", "no:randomly")


def _suite(pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(helper_starts=HELPER, test_inner=SUITE)


def test_the_slow_mark_follows_process_fixtures_and_starters_in_a_tests_body(pytester):
    _suite(pytester)
    slow = pytester.runpytest(*INNER_ARGUMENTS, "-m", "slow", "--collect-only", "-q")
    listed = {line.split("::")[-1] for line in slow.outlines if "::" in line}
    assert listed == {"test_uses_the_workers_fixture", "test_starts_python_itself"}


def test_a_test_left_fast_that_starts_a_process_fails_naming_itself(pytester):
    _suite(pytester)
    fast = pytester.runpytest(*INNER_ARGUMENTS, "-m", "not slow")
    fast.assert_outcomes(passed=1, failed=1, deselected=2)
    fast.stdout.fnmatch_lines(["*test_starts_python_through_a_helper_the_detection_cannot_see starts*"
                               "but is not marked slow*PROCESS_FIXTURES*"])
