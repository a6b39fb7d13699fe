"""Celery's own integration tests, run against djwork: the measure of issue #34 (docs/celery.md, Celery's suite).

``t/integration/test_tasks.py`` and ``test_canvas.py`` of the pinned celery sdist (downloaded from PyPI at test
time, tests/support/celery_suite.py), with only the import swap, against a real worker embedded in each of its
pytest processes and that process's private Redis. tests/celery_suite_expected.txt names every test expected
not to pass and why; this fails when a test outside it fails, and when one on it passes (take it off: the
list only shrinks).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import celery_suite

ARTIFACT = celery_suite.ROOT / "test-artifacts" / "celery-suite.txt"
CRASH_ARTIFACT = celery_suite.ROOT / "test-artifacts" / "celery-suite-cut-short.txt"
RUN_TIMEOUT = 900  # seconds: the inner run's own tests are capped (tests/support/celery_fixtures.py)


def report_path(attempt: int) -> Path:
    """Where an inner run's junit report is kept: each of Celery's tests with its time (which made a run long)."""
    return ARTIFACT.parent / f"celery-suite-run-{attempt}.xml"


# A second run only when the first was cut short by a crashed inner process (a report entry outside Celery's
# test modules, such as pytest's INTERNALERROR): that is the harness failing, not a test's outcome, and the
# tests it left unrun were never judged. A test that fails is never run again.
@pytest.mark.timeout(2 * RUN_TIMEOUT + 60)
def test_celery_integration_suite_fails_only_what_the_list_names():
    tree = celery_suite.prepare()
    expected = celery_suite.read_expected()
    for stale in (CRASH_ARTIFACT, report_path(1), report_path(2)):  # an earlier run's would read as this one's
        stale.unlink(missing_ok=True)
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    for attempt in (1, 2):
        report = report_path(attempt)
        finished = celery_suite.run(tree, report, RUN_TIMEOUT)
        assert report.exists(), (f"the inner run wrote no report:\n{finished.stdout[-3000:]}\n"
                                 f"{finished.stderr[-3000:]}")
        verdict = celery_suite.judge(celery_suite.outcomes(report), expected)
        print(f"run {attempt}: {verdict.describe()}")
        crashed = [nodeid for nodeid in verdict.failed_unlisted if not nodeid.startswith("test_")]
        if not crashed:
            break
        cut_short = (f"run {attempt} was cut short by a crashed inner process:\n"
                     f"{celery_suite.failure_texts(report, crashed, limit=1500)}\n\n"
                     f"inner run's output:\n{finished.stdout[-6000:]}\n{finished.stderr[-3000:]}")
        print(cut_short)
        # Kept as a file: the second run passing hides the first's cause from pytest's output.
        CRASH_ARTIFACT.write_text(cut_short, encoding="utf-8")
    # The counts, kept after every run (pytest shows a passing test's output only with -rP): docs/celery.md quotes them.
    ARTIFACT.write_text(f"{verdict.describe()}\n(run {attempt})\n", encoding="utf-8")
    assert verdict.ok, (f"{verdict.describe()}\n\nwhat the report says of the failures outside the list:\n"
                        f"{celery_suite.failure_texts(report, verdict.failed_unlisted)}\n\n"
                        f"inner run's summary:\n{finished.stdout[-6000:]}")


def test_the_expected_failures_list_reads_and_gives_every_test_a_reason():
    expected = celery_suite.read_expected()
    assert expected and all(entry.reason for entry in expected.values())
