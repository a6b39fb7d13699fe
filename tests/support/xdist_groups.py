"""Which tests must share one xdist worker (``--dist loadgroup``): decided here, at collection.

The tests of a module whose processes outlive one test (the browser modules'
live server and chromium, the interop modules' Ruby fleet, the Sentinel
topology) run on one worker, so those processes start once. The chaos
scenarios run on one worker too, one after another: each loads the machine
on purpose, and two at once would make each other's deadlines.

The order matters for the wall time, not only the grouping: xdist hands the
grouped modules out first (largest first), then single tests in collection
order. Collected alphabetically, the process-starting tests of late modules
(``test_worker_*``) were still running on one or two workers while the rest
sat idle; collected slow-first, the short tests fill the gaps at the end.
"""

from __future__ import annotations

import pytest

from tests.support.selection import process_fixtures

SERIAL_GROUPS = {
    "tests.test_sentinel": "sentinel",
    "tests.test_interop_ruby_client": "interop",
    "tests.test_interop_sidekiq_reads_djwork": "interop",
    "tests.test_interop_sidekiq_server": "interop",
    "tests.test_interop_sidekiq_web_browser": "interop-web",
    "tests.chaos.test_chaos": "chaos",
}
BROWSER_PACKAGE = "tests.browser."


def serial_group(item: pytest.Item) -> str | None:
    module = getattr(item, "module", None)
    name = module.__name__ if module is not None else ""
    if name.startswith(BROWSER_PACKAGE):
        return name  # one live server and one chromium per module, as its module-scoped fixtures mean
    if name in SERIAL_GROUPS:
        return SERIAL_GROUPS[name]
    if shares_a_process_fixture(item):
        return name
    return None


def shares_a_process_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a process-starting fixture that outlives one test (module scope or wider).

    Spread over the xdist workers, such a module started its fixture once per worker that drew one of its
    tests: the Celery guide's worker (about 25 s to set up) four times, the wheel build five times, about
    two CPU-minutes of a five-minute suite on two CPUs.
    """
    return any(fixturedef.scope != "function" for _, fixturedef in process_fixtures(item))
