"""pytest fixtures for projects using djwork: ``djwork_jobs`` (fake mode for one test).

Enable it in your root ``conftest.py``::

    pytest_plugins = ["djwork.testing.pytest_plugin"]

    def test_signup_sends_a_welcome(djwork_jobs):
        signup("ada@example.com")
        (welcome,) = djwork_jobs.for_job(send_welcome)
        djwork_jobs.drain()

Not registered as a ``pytest11`` entry point: that would load it into every
pytest run in the environment, wanted or not.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def djwork_jobs() -> Iterator[Any]:
    """Every job pushed during the test is collected, not written (a ``djwork.testing.FakeJobs``)."""
    from djwork.testing.modes import fake  # at use: pytest loads plugins before Django is configured

    with fake() as jobs:
        yield jobs
