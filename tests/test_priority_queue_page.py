"""A queue's priority lanes on its page (docs/priority.md, Sizes, latency, the dashboard): ``djwork.api.Queue``'s
listing, paging, find and delete, the dashboard's Queue page and ``manage.py djwork jobs`` / ``delete`` list a
lane's jobs in the order a worker takes them, and a deleted lane job does not run."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.urls import reverse

from djwork import api
from djwork.redis import keys, lanes
from tests import priority_jobs
from tests.helpers_worker import wait_until
from tests.support.cli import cli

ESCAPED_SCRIPT = "&lt;script&gt;alert(1)&lt;/script&gt;"


def fill() -> dict[str, str]:
    """Three jobs each in lane 5 (Django's 50), the queue's own list and lane -3 (Celery's 3), pushed
    interleaved so that push order and take order differ: key -> jid."""
    jids = {}
    for n in (1, 2, 3):
        jids[f"c{n}"] = priority_jobs.ordered.apply_async((f"c{n}",), priority=3).id
        jids[f"p{n}"] = priority_jobs.ordered.delay(f"p{n}").id
        jids[f"d{n}"] = priority_jobs.django_ordered.using(priority=50).enqueue(f"d{n}").id
    return jids


# Oldest first within each list, highest lane first: exactly the order a -c 1 worker runs them in
# (tests/test_priority_worker.py proves that order on a real worker).
TAKE_ORDER = ["d1", "d2", "d3", "p1", "p2", "p3", "c1", "c2", "c3"]
NEWEST_FIRST = ["d3", "d2", "d1", "p3", "p2", "p1", "c3", "c2", "c1"]
LANE = {"d": 5, "p": 0, "c": -3}


def names(records: list[api.JobRecord], jids: dict[str, str]) -> list[str]:
    by_jid = {jid: key for key, jid in jids.items()}
    return [by_jid[record.jid] for record in records]


def test_the_queue_lists_its_lanes_in_take_order_each_row_with_its_lane(raw_redis):
    jids = fill()
    queue = api.Queue("default")
    assert queue.lists() == [(5, "djwork:lane:default|5"), (0, "queue:default"), (-3, "djwork:lane:default|-3")]
    listed = queue.jobs(1, 100, oldest_first=True)
    assert names(listed.items, jids) == TAKE_ORDER
    assert names(queue.jobs(1, 100).items, jids) == NEWEST_FIRST
    assert [record.lane for record in listed.items] == [LANE[key[0]] for key in TAKE_ORDER]
    assert [record.priority for record in listed.items] == [None] * 6 + [3] * 3
    # The size counts exactly what is listed.
    assert listed.total == queue.size() == len(listed.items) == 9 == api.Queue.all()[0].size


@pytest.mark.parametrize("per_page", [1, 2, 4, 5, 8])
@pytest.mark.parametrize("oldest_first", [True, False])
def test_pages_span_the_lists_without_a_gap_or_a_repeat(raw_redis, per_page, oldest_first):
    jids = fill()
    expected = TAKE_ORDER if oldest_first else NEWEST_FIRST
    queue = api.Queue("default")
    pages = [queue.jobs(number, per_page, oldest_first=oldest_first) for number in range(1, 12)]
    assert all(page.total == 9 for page in pages)
    assert [names(page.items, jids) for page in pages] == [
        expected[start:start + per_page] for start in range(0, per_page * 11, per_page)]
    assert pages[0].pages == -(-9 // per_page)


def test_a_queue_without_lanes_lists_as_before(raw_redis):
    plain = [priority_jobs.ordered.delay(f"p{n}").id for n in range(5)]
    page = api.Queue("default").jobs(2, 2)
    assert [record.jid for record in page.items] == [plain[2], plain[1]] and page.total == 5
    assert all(record.lane == 0 for record in page.items)
    assert api.Queue("default").lists() == [(0, "queue:default")]


def test_a_lane_job_is_found_and_deleted_from_its_lane_and_does_not_run(raw_redis, workers):
    jids = fill()
    queue = api.Queue("default")
    found = queue.find_job(jids["c2"])
    assert (found.jid, found.lane, found.args) == (jids["c2"], -3, ["c2"])
    assert queue.find_job(jids["p2"]).lane == 0 and queue.find_job(jids["d3"]).lane == 5
    deleted = queue.delete_job(jids["c2"])
    assert deleted.jid == jids["c2"]
    assert jids["c2"] not in {json.loads(raw)["jid"] for raw in raw_redis.lrange(keys.lane("default", "-3"), 0, -1)}
    assert raw_redis.llen(keys.lane("default", "-3")) == 2
    assert queue.find_job(jids["c2"]) is None
    with pytest.raises(api.StaleEntry, match="no longer in queue default"):
        queue.delete_job(jids["c2"])
    listed = queue.jobs(1, 100, oldest_first=True)
    assert names(listed.items, jids) == [key for key in TAKE_ORDER if key != "c2"] and queue.size() == 8

    workers.start("-c", "1", overrides={"LOG_JOBS": False})
    wait_until(lambda: api.Queue("default").size() == 0 and len(priority_jobs.run_order(raw_redis)) == 8, 30,
               "the eight jobs left to run")
    ran = [line.split()[0] for line in priority_jobs.run_order(raw_redis)]
    assert ran == [key for key in TAKE_ORDER if key != "c2"]


def test_the_dashboard_lists_a_lane_job_with_its_priority_and_deletes_it(admin_client, raw_redis):
    jids = fill()
    # A hand-written payload with a lane and markup for a priority: shown escaped, never as markup.
    hostile = {"class": "Hostile", "args": [], "jid": "f" * 24, "queue": "default", "lane": 7,
               "priority": "<script>alert(1)</script>", "enqueued_at": 1.0}
    raw_redis.lpush(keys.lane("default", "7"), json.dumps(hostile))
    raw_redis.sadd(keys.lanes("default"), 7)
    page_url = reverse("djwork_dashboard:queue", args=["default"])
    response = admin_client.get(page_url + "?order=asc")
    content = response.content.decode()
    assert response.context["page"].total == 10
    rows = re.findall(r'<tr data-jid="([0-9a-f]+)">', content)
    assert rows == ["f" * 24] + [jids[key] for key in TAKE_ORDER]
    assert ">Priority</th>" in content and 'lane 7</span> <span class="sub">priority ' + ESCAPED_SCRIPT in content
    assert "<script>alert(1)</script>" not in content
    assert content.count(">lane 5</span>") == 3 and content.count(">lane -3</span>") == 3
    assert content.count(">lane 0</span>") == 3 and content.count("priority 3</span>") == 3

    action = reverse("djwork_dashboard:queue_action", args=["default"])
    confirm = admin_client.post(action, {"action": "delete", "job": jids["d2"]})
    assert confirm.status_code == 200 and "Delete this job from default?" in html.unescape(confirm.content.decode())
    assert raw_redis.llen(keys.lane("default", "5")) == 3
    done = admin_client.post(action, {"action": "delete", "job": jids["d2"], "confirmed": "1"}, follow=True)
    assert "Deleted" in done.content.decode() and raw_redis.llen(keys.lane("default", "5")) == 2
    assert f'data-jid="{jids["d2"]}"' not in done.content.decode()
    assert f'data-jid="{jids["d1"]}"' in done.content.decode()


def test_a_queue_page_without_lanes_has_no_priority_column(admin_client, raw_redis):
    priority_jobs.ordered.delay("plain")
    content = admin_client.get(reverse("djwork_dashboard:queue", args=["default"])).content.decode()
    assert "queue-jobs" in content and "Priority</th>" not in content


def test_the_cli_lists_a_lane_job_with_its_lane_and_deletes_it(raw_redis):
    jids = fill()
    rows = cli("jobs", "default", "--json", "--limit", "100").objects()
    assert [row["jid"] for row in rows] == [jids[key] for key in NEWEST_FIRST]
    assert [row["lane"] for row in rows] == [LANE[key[0]] for key in NEWEST_FIRST]
    text = cli("jobs", "default", "--limit", "4").out
    assert text.splitlines()[0].split()[:4] == ["JID", "CLASS", "QUEUE", "LANE"]
    assert "4 shown of 9 in queue default" in text
    found = cli("jobs", "default", "--search", jids["c3"], "--json").objects()
    assert [(row["jid"], row["lane"], row["priority"]) for row in found] == [(jids["c3"], -3, 3)]
    deleted = cli("delete", "default", jids["c3"], "--yes")
    assert deleted.code == 0, deleted
    assert raw_redis.llen(lanes.list_key("default", -3)) == 2 and api.Queue("default").size() == 8


def test_a_job_waiting_in_a_lane_is_found_queued_by_its_jid(raw_redis):
    jids = fill()
    for key in ("d1", "c3", "p2"):
        found = api.find_job(jids[key], runs=0)
        assert (found.where, found.job.jid) == ("queued", jids[key])
    shown = cli("job", jids["c3"], "--json").object()
    assert (shown["where"], shown["lane"], shown["priority"]) == ("queued", -3, 3)
    assert cli("job", jids["d1"], "--json").object()["lane"] == 5
