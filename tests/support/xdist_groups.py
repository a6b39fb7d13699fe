"""Which tests must share one xdist worker (``--dist loadgroup``): decided here, at collection.

The tests of a module whose processes outlive one test (the browser modules'
live server and chromium, the interop modules' Ruby fleet, the Sentinel
topology, Celery's own suite) run on one worker, so those processes start once. The chaos
scenarios run on one worker too, one after another: each loads the machine
on purpose, and two at once would make each other's deadlines.

The order matters for the wall time, not only the grouping: xdist hands the
grouped modules out first (largest first), then single tests in collection
order. Collected alphabetically, the process-starting tests of late modules
(``test_worker_*``) were still running on one or two workers while the rest
sat idle; collected slow-first, the short tests fill the gaps at the end.
Celery's suite, the longest single unit (a few minutes, in one test), is handed out
before everything else (``LongestFirstScheduling``): started last among the groups, it
set the run's wall time. Its worker takes nothing else until it is done, for the same reason.
"""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadGroupScheduling

from tests.support.selection import process_fixtures

SERIAL_GROUPS = {
    "tests.test_sentinel": "sentinel",
    "tests.test_interop_ruby_client": "interop",
    "tests.test_interop_sidekiq_reads_djwork": "interop",
    "tests.test_interop_sidekiq_server": "interop",
    "tests.test_interop_sidekiq_web_browser": "interop-web",
    "tests.chaos.test_chaos": "chaos",
    # Celery's own suite: three pytest processes and their runworkers of its own, for about three minutes.
    "tests.test_celery_suite": "celery-suite",
}
BROWSER_PACKAGE = "tests.browser."
# Handed out before every other unit: the longest single unit of the run. Sorted by its two tests among
# groups of ten, it started a minute or more in, and the run's wall time was its start plus its own length.
FIRST_GROUPS = ("celery-suite",)


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


@pytest.hookimpl(trylast=True)  # after xdist's own tagging, which this completes
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    loadgroup = getattr(config.option, "loadgroup", False)  # set on xdist workers only
    if loadgroup:
        # Stable: every xdist worker must collect the same order, and a module's tests stay together.
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    for item in items:
        group = serial_group(item)
        if group is None:
            continue
        item.add_marker(pytest.mark.xdist_group(group))
        if loadgroup:
            tag_for_loadgroup(item, group)


def tag_for_loadgroup(item: pytest.Item, group: str) -> None:
    """End the test's nodeid in ``@<group>``: what xdist's loadgroup scheduler groups by.

    pytest-xdist 3.8 writes that tag to ``item._nodeid``, which pytest 9 no longer
    reads (a nodeid comes from ``item._id``): the tag was lost, and the grouped
    modules spread over every worker, each starting its own live server,
    chromium and Sentinel topology. Written here when it is missing.
    """
    tag = f"@{group}"
    if item.nodeid.endswith(tag) or not hasattr(item, "_id"):
        return
    from _pytest.nodeid import coerce_node_id  # pytest >= 9 only: older ones kept xdist's tag

    item._id = coerce_node_id(item.nodeid + tag)


class LongestFirstScheduling(LoadGroupScheduling):
    """xdist's loadgroup scheduler, with ``FIRST_GROUPS`` handed out before the rest, and the worker running
    one of them given nothing more until it is done."""

    def _assign_work_unit(self, node: object) -> None:
        for group in FIRST_GROUPS:
            if group in self.workqueue:
                self.workqueue.move_to_end(group, last=False)
        super()._assign_work_unit(node)

    def _reschedule(self, node: object) -> None:
        # xdist tops up any worker with two tests or fewer pending, so Celery's suite (two tests) drew the
        # chaos group behind it: its 70 s ran after the suite's four minutes, past every other worker's end.
        if self.workqueue and self._runs_a_first_group(node):
            return
        super()._reschedule(node)

    def _runs_a_first_group(self, node: object) -> bool:
        assigned = self.assigned_work.get(node, {})
        return any(not all(assigned[scope].values()) for scope in FIRST_GROUPS if scope in assigned)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LoadGroupScheduling | None:
    if config.getoption("dist", None) != "loadgroup":
        return None  # xdist's own choice for any other --dist
    return LongestFirstScheduling(config, log)
