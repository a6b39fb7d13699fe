"""Which tests must share one xdist worker (``--dist loadgroup``): decided here, at collection.

The tests of a module whose processes outlive one test (the browser modules'
live server and chromium, the interop modules' Ruby fleet, the Sentinel
topology, Celery's own suite) run on one worker, so those processes start once. The chaos
scenarios run on one worker too, one after another: each loads the machine
on purpose, and two at once would make each other's deadlines.
"""

from __future__ import annotations

import pytest

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


def serial_group(item: pytest.Item) -> str | None:
    module = getattr(item, "module", None)
    name = module.__name__ if module is not None else ""
    if name.startswith(BROWSER_PACKAGE):
        return name  # one live server and one chromium per module, as its module-scoped fixtures mean
    return SERIAL_GROUPS.get(name)


@pytest.hookimpl(trylast=True)  # after xdist's own tagging, which this completes
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    loadgroup = getattr(config.option, "loadgroup", False)  # set on xdist workers only
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
