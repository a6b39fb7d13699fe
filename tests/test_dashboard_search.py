"""Searching the sets in error messages and arguments, bounded; the History page's count and links (#18 item 5)."""

from __future__ import annotations

import time

from django.urls import reverse

from djwork import api
from djwork.api import sorted_sets
from tests.browser import seed


def dead(raw_redis, klass: str, args: list, message: str, age: float) -> dict:
    payload = seed.failed(seed.job(klass=klass, args=args), count=25, message=message)
    seed.zadd(raw_redis, "dead", payload, time.time() - age)
    return payload


def test_search_finds_error_messages_and_arguments(admin_client, raw_redis):
    card = dead(raw_redis, "app.Charge", [42], "Card DECLINED by the bank", 10)
    invoice = dead(raw_redis, "app.Mail", ["invoice-9001", {"to": "ann@example.com"}], "timeout", 20)
    dead(raw_redis, "app.Other", [1], "boom", 30)
    dead_url = reverse("djwork_dashboard:set", args=["dead"])
    for term, expected in (("declined", card), ("INVOICE-9001", invoice), ("ann@example", invoice)):
        response = admin_client.get(dead_url, {"q": term})
        assert [entry.jid for entry in response.context["entries"]] == [expected["jid"]], term
        assert "in class, jid, error and arguments." in response.content.decode()


def test_search_is_bounded_and_says_where_it_stopped(admin_client, raw_redis, monkeypatch):
    for n in range(12):
        dead(raw_redis, "app.Job", [n], "needle" if n % 2 else "hay", n)  # n=0 is the newest
    result = api.DeadSet().search_text("needle", scan_max=5)
    assert (result.scanned, result.total, result.complete) == (5, 12, False)
    assert sorted(entry.job.args[0] for entry in result.entries) == [1, 3]  # among the newest 5 only
    assert api.DeadSet().search_text("needle", limit=2).limit_reached
    monkeypatch.setattr(sorted_sets, "SEARCH_SCAN_MAX", 5)
    html = admin_client.get(reverse("djwork_dashboard:set", args=["dead"]), {"q": "needle"}).content.decode()
    assert "2 matches for “needle”" in html
    assert "The search stopped after the newest 5 of 12 jobs" in html


def test_history_count_and_links(admin_client, raw_redis):
    retried = seed.history(raw_redis, klass="app.Flaky", status="retry", error_message="flaky")
    for _ in range(3):
        seed.history(raw_redis, klass="app.Steady")
    history = reverse("djwork_dashboard:history")
    html = admin_client.get(history, {"class": "Flaky"}).content.decode()
    assert '<span class="count" id="history-count" title="runs shown on this page, of 4 recorded">1 shown</span>' \
        in html
    run = admin_client.get(history, {"class": "Flaky"}).context["page"].runs[0]
    assert run.id == retried
    retries = reverse("djwork_dashboard:set", args=["retries"])
    assert f'<a href="{retries}?q={run.jid}"' in html
    assert """<a href="?class=app.Flaky" title="this class's history">app.<wbr>Flaky</a>""" in html
    unfiltered = admin_client.get(history).content.decode()
    assert '<span class="count" id="history-count" title="runs recorded">4</span>' in unfiltered
    assert unfiltered.count(f'href="{retries}?q=') == 1  # ok runs left no job to find
