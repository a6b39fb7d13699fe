"""How the dashboard lays out what it reads, in a real browser at 1,280 px: the Metrics charts fill their cards,
and identities and class names wrap between their parts, never mid-word. Screenshots in test-artifacts/layout/."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from djwork.worker.metrics import ExecutionMetrics, queue_writes
from djwork.worker.queue_samples import read_sample, write_sample
from tests.browser import seed
from tests.browser.live import SCREENSHOTS, shoot

pytestmark = pytest.mark.slow

IDENTITY = "worker-eu-west-1-production-batch-host-0042.internal.example.com:48213:0f3c2b9a1d7e"
CLASS = "app.billing.jobs.ReconcileEveryOutstandingInvoiceForEveryTenantAgainstTheLedgerJob"

# Where each rendered line of ``element`` starts: [the character before the break, the one after], for every
# break the browser made (positions from a Range per character, so <wbr> and CSS wrapping both count).
LINE_BREAKS = """(element) => {
  const chars = [];
  const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.data.length; i++) {
      const range = document.createRange();
      range.setStart(node, i); range.setEnd(node, i + 1);
      const rect = range.getBoundingClientRect();
      if (rect.width || rect.height) chars.push([node.data[i], rect.top]);
    }
  }
  const breaks = [];
  for (let i = 1; i < chars.length; i++) {
    if (chars[i][1] > chars[i - 1][1] + 2) breaks.push([chars[i - 1][0], chars[i][0]]);
  }
  return breaks;
}"""
SEPARATORS = set(".:/_|@- ")


@pytest.fixture(scope="module")
def seeded(cluster) -> None:
    redis = cluster.redis
    now = dt.datetime.now(dt.UTC)
    for minute in range(10, -1, -1):
        recorder = ExecutionMetrics()
        for _ in range(5):
            recorder.record(CLASS, 120.0, False)
            recorder.record("app.jobs.ping", 3.0, False)
        pipe = redis.pipeline(transaction=False)
        queue_writes(pipe, recorder.take(), now - dt.timedelta(minutes=minute))
        pipe.execute()
        redis.sadd("queues", "default")
        write_sample(redis, read_sample(redis), now - dt.timedelta(minutes=minute))
    seed.process(redis, IDENTITY, queues=["default", "mail", "reports"],
                 busy_jobs=[seed.job(klass=CLASS, args=[{"tenant": "acme", "since": "2026-01-01"}])])
    for _ in range(3):
        seed.history(redis, klass=CLASS, identity=IDENTITY)


@pytest.fixture(scope="module")
def screenshots() -> Path:
    directory = SCREENSHOTS / "layout"
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.png"):
        old.unlink()
    return directory


@pytest.mark.parametrize("path", ["/djwork/metrics/", f"/djwork/metrics/class/{CLASS}/", "/djwork/metrics/queues/"])
def test_the_metrics_charts_fill_their_cards(cluster, seeded, admin_page, screenshots, path):
    page = admin_page
    page.goto(cluster.base_url + path)
    widths = page.eval_on_selector_all(".mchart svg", """(svgs) => svgs.map((svg) => {
        const card = svg.closest('.card'), style = getComputedStyle(card);
        const inner = card.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
        return [svg.getBoundingClientRect().width, inner];
    })""")
    assert widths
    for drawn, room in widths:
        assert drawn >= room - 2, f"{path}: a chart {drawn:.0f}px wide in a card with {room:.0f}px"  # was 720
    shoot(page, screenshots, "layout-" + path.strip("/").split("/")[-1].replace(".", "-")[:40])


@pytest.mark.parametrize("path", ["/djwork/busy/", "/djwork/history/"])
def test_identities_and_class_names_wrap_between_their_parts(cluster, seeded, admin_page, screenshots, path):
    page = admin_page
    page.goto(cluster.base_url + path)
    checked, wrapped = 0, 0
    for selector in ("code.ident, .ident code, td[data-label=Process] code", ".jobclass"):
        for element in page.locator(selector).all():
            if IDENTITY[:20] not in element.inner_text() and CLASS[:20] not in element.inner_text():
                continue
            checked += 1
            breaks = element.evaluate(LINE_BREAKS)
            wrapped += bool(breaks)
            for before, after in breaks:
                assert before in SEPARATORS or after in SEPARATORS, f"{path}: broke mid-word at {before!r}|{after!r}"
    assert checked >= 2 and wrapped  # too long for their column: the browser had to break them somewhere
    shoot(page, screenshots, "layout-" + path.strip("/").split("/")[-1])
