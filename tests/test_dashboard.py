"""The dashboard through Django's test client, against real keys in the private Redis."""

from __future__ import annotations

import datetime as dt
import html
import json
import re
import time

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from djwork.iterable import state
from djwork.worker.history import append
from djwork_dashboard.models import Dashboard
from tests.browser import seed

LINES = ["app/jobs/hard_job.rb:6:in `perform'", "lib/sidekiq/processor.rb:202:in `execute_job'"]
ESCAPED_SCRIPT = b"&lt;script&gt;alert(1)&lt;/script&gt;"


def url(name: str, *args: str) -> str:
    return reverse(f"djwork_dashboard:{name}", args=args)


def staff(django_user_model, name: str, *codenames: str):
    user = django_user_model.objects.create_user(name, password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="djwork_dashboard",
                                                         codename__in=codenames))
    return user


@pytest.fixture
def viewer_client(db, django_user_model) -> Client:
    client = Client()
    client.force_login(staff(django_user_model, "viewer", "view_dashboard"))
    return client


@pytest.fixture
def cluster(raw_redis):
    """A small mixed cluster: a Sidekiq 7 and a 6.4.1 process, queues, every set, history."""
    now = time.time()
    seed.process(raw_redis, "web.1:101:aaa111", tag="web", busy_jobs=[seed.job(klass="SlowJob", args=[30])])
    seed.process(raw_redis, "old.1:202:bbb222", version=None, busy_jobs=[seed.job(klass="OldJob")],
                 legacy_work_key=True)
    for n in range(3):
        seed.push(raw_redis, seed.job(klass="QueuedJob", args=[n]))
    seed.push(raw_redis, seed.job(klass="LowJob", queue="low"), queue="low")
    retry = seed.failed(seed.job(klass="FlakyJob"), count=2, message="flaky <b>",
                        backtrace=seed.mime_backtrace(LINES))
    seed.zadd(raw_redis, "retry", retry, now + 30)
    dead = seed.failed(seed.job(klass="DeadJob"), count=25, backtrace=seed.strict_backtrace(LINES))
    seed.zadd(raw_redis, "dead", dead, now - 100)
    scheduled = seed.job(klass="LaterJob")
    scheduled.pop("enqueued_at")
    seed.zadd(raw_redis, "schedule", scheduled, now + 600)
    raw_redis.set("stat:processed", "1234567")
    raw_redis.set("stat:failed", "89")
    seed.history(raw_redis, klass="QueuedJob")
    seed.history(raw_redis, klass="FlakyJob", status="retry", error_class="RuntimeError", error_message="flaky")
    return {"retry": retry, "dead": dead, "scheduled": scheduled, "retry_score": now + 30, "dead_score": now - 100,
            "scheduled_score": now + 600}


def address(score: float, payload: dict) -> str:
    return f"{score!r}-{payload['jid']}"


PAGES = ["overview", "stats_json", "busy", "queues", "history"]


def page_urls(cluster) -> list[str]:
    return [url(name) for name in PAGES] + [
        url("queue", "default"), url("set", "scheduled"), url("set", "retries"), url("set", "dead"),
        url("set_entry", "retries", address(cluster["retry_score"], cluster["retry"]))]


ACTION_URLS = [url("busy_action"), url("queue_action", "default"), url("set_action", "retries")]


# --- permissions ---------------------------------------------------------------------------------
def test_permissions_exist_after_migrate(db):
    codenames = set(Permission.objects.filter(content_type__app_label="djwork_dashboard")
                    .values_list("codename", flat=True))
    assert codenames == {"view_dashboard", "manage_dashboard"}
    assert not Dashboard._meta.managed


def test_anonymous_is_sent_to_login(client, cluster):
    for target in page_urls(cluster) + ACTION_URLS:
        response = client.post(target) if target in ACTION_URLS else client.get(target)
        assert response.status_code == 302, target
        assert response["Location"].startswith("/admin/login/"), target


def test_staff_without_permission_gets_403(client, db, django_user_model, cluster):
    client.force_login(staff(django_user_model, "plain"))
    for target in page_urls(cluster):
        assert client.get(target).status_code == 403, target
    for target in ACTION_URLS:
        assert client.post(target, {"action": "pause"}).status_code == 403, target
    assert b"Job dashboard" not in client.get("/admin/").content


def test_viewer_sees_pages_without_buttons_and_cannot_act(viewer_client, cluster, raw_redis):
    for target in page_urls(cluster):
        response = viewer_client.get(target)
        assert response.status_code == 200, target
        if target != url("stats_json"):
            assert b'method="post"' not in response.content, target
            assert b"read-only" in response.content
    for target in ACTION_URLS:
        assert viewer_client.post(target, {"action": "pause", "identity": "web.1:101:aaa111"}).status_code == 403
    assert not raw_redis.exists("paused") and not raw_redis.exists("web.1:101:aaa111-signals")


def test_manage_permission_alone_can_look_and_act(client, db, django_user_model, cluster, raw_redis):
    client.force_login(staff(django_user_model, "operator", "manage_dashboard"))
    assert client.get(url("queues")).status_code == 200
    assert client.post(url("queue_action", "default"), {"action": "pause"}).status_code == 302
    assert raw_redis.sismember("paused", "default")


def test_pages_are_get_only_and_actions_post_only(admin_client, cluster):
    assert admin_client.post(url("busy")).status_code == 405
    assert admin_client.get(url("busy_action")).status_code == 405


def test_pages_are_never_cached(admin_client, cluster):
    assert "no-cache" in admin_client.get(url("overview"))["Cache-Control"]


def test_csrf_is_enforced(db, django_user_model, raw_redis, cluster):
    client = Client(enforce_csrf_checks=True)
    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    assert client.post(url("queue_action", "default"), {"action": "pause"}).status_code == 403
    assert not raw_redis.exists("paused")
    page = client.get(url("queue", "default"))
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.content).group(1).decode()
    response = client.post(url("queue_action", "default"), {"action": "pause", "csrfmiddlewaretoken": token})
    assert response.status_code == 302 and raw_redis.sismember("paused", "default")


def test_admin_index_links_to_the_dashboard(admin_client, viewer_client, cluster):
    admin_page = admin_client.get("/admin/").content.decode()
    link = reverse("admin:djwork_dashboard_dashboard_changelist")
    assert f'href="{link}"' in admin_page and "Job dashboard" in admin_page
    assert viewer_client.get(link)["Location"] == url("overview")
    assert admin_client.get(link)["Location"] == url("overview")


# --- pages ----------------------------------------------------------------------------------------
def test_overview_shows_totals_history_and_redis(admin_client, cluster):
    response = admin_client.get(url("overview"))
    content = response.content.decode()
    assert "1,234,567" in content and ">89<" in content
    data = json.loads(re.search(r'<script id="djwork-chart-data" type="application/json">(.*?)</script>',
                                content, re.S).group(1))
    assert data["stats"]["processed"] == 1234567 and len(data["history"]) == 30
    assert data["poll_url"] == url("stats_json")
    assert response.context["redis"]["redis_version"] in content
    assert "Connections" in content and "LowJob" not in content
    assert len(admin_client.get(url("overview") + "?days=7").context["history"]) == 7
    bad = admin_client.get(url("overview") + "?days=abc", follow=True)
    assert bad.status_code == 200 and "showing 30" in bad.content.decode()


def test_stats_json(admin_client, cluster):
    data = admin_client.get(url("stats_json")).json()
    assert data["processed"] == 1234567 and data["busy"] == 2 and data["enqueued"] == 4
    assert data["retries"] == data["dead"] == data["scheduled"] == 1 and abs(data["time"] - time.time()) < 5


def test_busy_lists_processes_and_running_jobs(admin_client, cluster):
    content = admin_client.get(url("busy")).content.decode()
    for text in ("web.1:101:aaa111", "old.1:202:bbb222", "7.3.10", "version unknown", "26.6 MB", "SlowJob",
                 "OldJob", "0.1 ms", ">web<", "running"):
        assert text in content, text
    assert content.count('name="action" value="quiet"') == 3  # two rows + Quiet all


def test_busy_shows_an_iterable_jobs_progress_at_its_last_checkpoint(admin_client, raw_redis):
    running = seed.job(klass="app.jobs.ExportOrders")
    seed.process(raw_redis, "web.1:101:aaa111", busy_jobs=[running, seed.job(klass="PlainJob")])
    state.save(running["jid"], state.Progress(cursor={"pk": 4711}, items=4711, checkpoints=5, segments=2), 600)
    content = html.unescape(admin_client.get(url("busy")).content.decode())
    assert '4,711 items done, segment 2, 5 checkpoints; cursor <code class="small">{"pk":4711}</code>' in content
    assert content.count('class="sub iteration"') == 1  # the plain job shows none


def test_queue_and_set_pages_show_an_iterable_jobs_saved_progress_escaped(admin_client, raw_redis):
    now = time.time()
    queued = seed.job(klass="app.jobs.ExportOrders")
    seed.push(raw_redis, queued)
    seed.push(raw_redis, seed.job(klass="PlainJob"))
    failed = seed.failed(seed.job(klass="app.jobs.ExportOrders"), count=1, message="boom")
    seed.zadd(raw_redis, "retry", failed, now + 30)
    plain = seed.failed(seed.job(klass="PlainJob"), count=1)
    seed.zadd(raw_redis, "retry", plain, now + 40)
    dead = seed.failed(seed.job(klass="app.jobs.ExportOrders"), count=25)
    seed.zadd(raw_redis, "dead", dead, now - 100)
    state.save(queued["jid"], state.Progress(cursor={"pk": 4711}, items=4711, checkpoints=5, segments=2), 600)
    state.save(failed["jid"], state.Progress(cursor="<script>alert(1)</script>", items=12, checkpoints=1,
                                             segments=1), 600)
    state.save(dead["jid"], state.Progress(cursor=[3, 99], items=1, checkpoints=1, segments=4), 600)

    content = html.unescape(admin_client.get(url("queue", "default")).content.decode())
    assert ('saved progress: 4,711 items done in 2 segments, 5 checkpoints; cursor <code class="small">{"pk":4711}'
            '</code>') in content
    assert content.count('class="sub iteration"') == 1  # the plain job shows none

    listed = admin_client.get(url("set", "retries")).content
    assert b"&quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;" in listed  # the cursor's JSON, escaped
    assert b"<script>alert(1)</script>" not in listed
    assert listed.decode().count('class="sub iteration"') == 1
    assert "12 items done in 1 segment, 1 checkpoint;" in listed.decode()

    detail = admin_client.get(url("set_entry", "dead", address(now - 100, dead))).content.decode()
    section = re.search(r'<section class="card" id="iteration">.*?</section>', detail, re.S).group(0)
    values = re.findall(r"<dd>(?:<code[^>]*>)?(.*?)(?:</code>)?</dd>", section)
    assert [html.unescape(value) for value in values] == ["1", "4", "1", "[3,99]"]  # items, segments, checks, cursor
    assert b'id="iteration"' in admin_client.get(url("set_entry", "retries", address(now + 30, failed))).content
    assert b'id="iteration"' not in admin_client.get(url("set_entry", "retries", address(now + 40, plain))).content


def test_busy_quiet_and_stop_push_signals(admin_client, cluster, raw_redis):
    identity = "web.1:101:aaa111"
    response = admin_client.post(url("busy_action"), {"action": "quiet", "identity": identity}, follow=True)
    assert raw_redis.lrange(f"{identity}-signals", 0, -1) == [b"TSTP"]
    assert "Quiet requested for web.1:101:aaa111: the signal is queued" in response.content.decode()
    admin_client.post(url("busy_action"), {"action": "stop", "identity": identity})
    assert raw_redis.lrange(f"{identity}-signals", 0, -1) == [b"TERM", b"TSTP"]


def test_busy_quiet_all_and_stop_all_with_confirmation(admin_client, cluster, raw_redis):
    confirm = admin_client.post(url("busy_action"), {"action": "quiet", "all": "1"})
    assert confirm.status_code == 200 and b"Quiet every process?" in confirm.content
    assert not raw_redis.exists("old.1:202:bbb222-signals")
    admin_client.post(url("busy_action"), {"action": "quiet", "all": "1", "confirmed": "1"})
    assert raw_redis.lrange("old.1:202:bbb222-signals", 0, -1) == [b"TSTP"]
    confirm = admin_client.post(url("busy_action"), {"action": "stop", "all": "1"})
    assert confirm.status_code == 200 and b"Stop every process?" in confirm.content
    assert raw_redis.llen("web.1:101:aaa111-signals") == 1
    admin_client.post(url("busy_action"), {"action": "stop", "all": "1", "confirmed": "1"})
    assert raw_redis.lrange("web.1:101:aaa111-signals", 0, -1) == [b"TERM", b"TSTP"]


def test_next_urls_stay_on_this_site(admin_client, cluster):
    for target in ("javascript:alert(1)", "https://evil.example/", "//evil.example/"):
        confirm = admin_client.post(url("busy_action"), {"action": "stop", "all": "1", "next": target})
        assert target.encode() not in confirm.content
        assert f'href="{url("overview")}"'.encode() in confirm.content
        done = admin_client.post(url("queue_action", "default"), {"action": "pause", "next": target})
        assert done["Location"] == url("queue", "default")
    assert admin_client.post(url("queue_action", "default"),
                             {"action": "resume", "next": url("busy")})["Location"] == url("busy")


def test_busy_bad_input_gives_messages(admin_client, cluster, raw_redis):
    seed.process(raw_redis, "emb:9:e", embedded=True)
    cases = [({"action": "quiet", "identity": "nobody:1:x"}, "no running process nobody:1:x"),
             ({"action": "stop", "identity": "emb:9:e"}, "embedded"),
             ({"action": "explode", "identity": "emb:9:e"}, "Unknown action"),
             ({"action": "quiet"}, "No process was chosen")]
    for data, text in cases:
        response = admin_client.post(url("busy_action"), data, follow=True)
        assert response.status_code == 200 and text in response.content.decode(), text
    assert not raw_redis.exists("nobody:1:x-signals", "emb:9:e-signals")
    assert b'value="emb:9:e"' not in admin_client.get(url("busy")).content  # no buttons for Sidekiq's embedded
    seed.process(raw_redis, "dj:8:d", embedded=True, version="djwork 0.1.0")
    assert b'value="dj:8:d"' in admin_client.get(url("busy")).content  # djwork's own act in place


def test_queues_page_and_actions(admin_client, cluster, raw_redis):
    content = admin_client.get(url("queues")).content.decode()
    assert "default" in content and "low" in content and "active" in content
    admin_client.post(url("queue_action", "low"), {"action": "pause"})
    assert raw_redis.sismember("paused", "low") and "paused" in admin_client.get(url("queues")).content.decode()
    admin_client.post(url("queue_action", "low"), {"action": "resume"})
    assert not raw_redis.sismember("paused", "low")
    confirm = admin_client.post(url("queue_action", "low"), {"action": "clear"})
    assert confirm.status_code == 200 and b"Clear queue low?" in confirm.content
    assert b"All 1 job in low will be deleted." in confirm.content
    assert raw_redis.llen("queue:low") == 1
    response = admin_client.post(url("queue_action", "low"), {"action": "clear", "confirmed": "1"}, follow=True)
    assert not raw_redis.exists("queue:low") and "1 jobs deleted" in response.content.decode()
    assert admin_client.get("/djwork/queues/bad%20name!/").status_code == 404


def test_queue_page_browse_and_delete(admin_client, cluster, raw_redis):
    for n in range(30):
        seed.push(raw_redis, seed.job(klass="BulkJob", args=[n]))
    page1 = admin_client.get(url("queue", "default"))
    assert page1.context["page"].total == 33 and len(page1.context["page"].items) == 25
    assert "Page 1 of 2" in page1.content.decode() and "[29]" not in page1.content.decode()
    oldest = admin_client.get(url("queue", "default") + "?order=asc").context["page"].items[0]
    assert oldest.klass == "QueuedJob" and oldest.args == [0]
    target = json.loads(raw_redis.lindex("queue:default", 0))
    confirm = admin_client.post(url("queue_action", "default"), {"action": "delete", "job": target["jid"]})
    assert confirm.status_code == 200 and b"Delete this job from default?" in confirm.content
    assert f"BulkJob {target['jid']} with arguments (29)".encode() in confirm.content
    assert raw_redis.llen("queue:default") == 33
    response = admin_client.post(url("queue_action", "default"),
                                 {"action": "delete", "job": target["jid"], "confirmed": "1"}, follow=True)
    assert "Deleted BulkJob" in response.content.decode() and raw_redis.llen("queue:default") == 32
    stale = admin_client.post(url("queue_action", "default"),
                              {"action": "delete", "job": target["jid"], "confirmed": "1"}, follow=True)
    assert stale.status_code == 200 and "no longer in queue default" in stale.content.decode()
    none = admin_client.post(url("queue_action", "default"), {"action": "delete"}, follow=True)
    assert "No job was chosen" in none.content.decode()


def test_bad_page_numbers_give_messages(admin_client, cluster):
    for query, text in (("?page=abc", "is not a page number"), ("?page=-3", "is not a page number"),
                        ("?page=99", "past the end")):
        for target in (url("queue", "default"), url("set", "retries")):
            response = admin_client.get(target + query)
            assert response.status_code == 200 and text in response.content.decode(), (target, query)


def test_set_lists_search_and_order(admin_client, cluster, raw_redis):
    for kind, klass in (("scheduled", "LaterJob"), ("retries", "FlakyJob"), ("dead", "DeadJob")):
        content = admin_client.get(url("set", kind)).content.decode()
        assert klass in content, kind
    seed.zadd(raw_redis, "retry", seed.failed(seed.job(klass="OtherJob")), time.time() + 10)
    found = admin_client.get(url("set", "retries") + "?q=flaky").context["entries"]
    assert [e.job.klass for e in found] == ["FlakyJob"]
    by_jid = admin_client.get(url("set", "retries") + f"?q={cluster['retry']['jid']}").context["entries"]
    assert [e.jid for e in by_jid] == [cluster["retry"]["jid"]]
    assert "Nothing matches" in admin_client.get(url("set", "retries") + "?q=zzz").content.decode()
    ordered = admin_client.get(url("set", "retries") + "?order=desc").context["entries"]
    assert [e.job.klass for e in ordered] == ["FlakyJob", "OtherJob"]
    assert admin_client.get("/djwork/nosuchset/").status_code == 404


def test_entry_detail_shows_payload_and_decoded_backtrace(admin_client, cluster):
    for kind, key in (("retries", "retry"), ("dead", "dead")):
        content = admin_client.get(url("set_entry", kind, address(cluster[f"{key}_score"], cluster[key]))) \
            .content.decode()
        assert "app/jobs/hard_job.rb:6:in `perform&#x27;" in content, kind  # MIME (6.4) and strict (7.x)
        assert cluster[key]["jid"] in content and "RuntimeError" in content
    content = admin_client.get(url("set_entry", "retries", address(cluster["retry_score"], cluster["retry"]))) \
        .content.decode()
    assert "flaky &lt;b&gt;" in content and "Retry count" in content


def test_entry_bad_address_and_unknown_jid(admin_client, cluster):
    response = admin_client.get(url("set_entry", "retries", "garbage"), follow=True)
    assert response.status_code == 200 and "is not a job address" in response.content.decode()
    response = admin_client.get(url("set_entry", "retries", f"{cluster['retry_score']!r}-{'0' * 24}"), follow=True)
    assert response.status_code == 200 and "no longer in Retries" in response.content.decode()


def test_retry_now_from_detail_then_stale(admin_client, cluster, raw_redis):
    key = address(cluster["retry_score"], cluster["retry"])
    response = admin_client.post(url("set_action", "retries"), {"action": "retry", "key": key, "from": "detail"})
    assert response["Location"] == url("set", "retries")
    pushed = json.loads(raw_redis.lindex("queue:default", 0))
    assert pushed["jid"] == cluster["retry"]["jid"] and pushed["retry_count"] == 1
    assert raw_redis.zcard("retry") == 0
    again = admin_client.post(url("set_action", "retries"), {"action": "retry", "key": key}, follow=True)
    assert again.status_code == 200 and "was no longer in Retries" in again.content.decode()


def test_set_actions_selected_kill_delete_enqueue(admin_client, cluster, raw_redis):
    admin_client.post(url("set_action", "retries"),
                      {"action": "kill", "key": address(cluster["retry_score"], cluster["retry"])})
    assert raw_redis.zcard("retry") == 0 and raw_redis.zcard("dead") == 2
    dead_key = address(cluster["dead_score"], cluster["dead"])
    response = admin_client.post(url("set_action", "dead"), {"action": "delete", "key": [dead_key, "bad"]},
                                 follow=True)
    content = response.content.decode()
    assert "Deleted 1 job." in content and "is not a job address" in content and raw_redis.zcard("dead") == 1
    admin_client.post(url("set_action", "scheduled"),
                      {"action": "enqueue", "key": address(cluster["scheduled_score"], cluster["scheduled"])})
    assert raw_redis.zcard("schedule") == 0
    assert json.loads(raw_redis.lindex("queue:default", 0))["class"] == "LaterJob"


def test_set_bulk_all_needs_confirmation(admin_client, cluster, raw_redis):
    for n in range(3):
        seed.zadd(raw_redis, "dead", seed.failed(seed.job(args=[n])), time.time() - n)
    confirm = admin_client.post(url("set_action", "dead"), {"action": "retry_all"})
    html = confirm.content.decode()
    assert confirm.status_code == 200 and "All 4 jobs in Dead will be pushed back to their queues now." in html
    assert 'class="btn btn-danger"' not in html  # retrying loses nothing: not a red button
    delete = admin_client.post(url("set_action", "dead"), {"action": "delete_all"}).content.decode()
    assert "All 4 jobs in Dead will be deleted. This can&#x27;t be undone." in delete
    assert 'class="btn btn-danger"' in delete
    assert raw_redis.zcard("dead") == 4
    admin_client.post(url("set_action", "dead"), {"action": "retry_all", "confirmed": "1"})
    assert raw_redis.zcard("dead") == 0 and raw_redis.llen("queue:default") == 7
    admin_client.post(url("set_action", "retries"), {"action": "delete_all", "confirmed": "1"})
    assert not raw_redis.exists("retry")


def test_set_action_bad_input(admin_client, cluster):
    for data, text in (({"action": "retry"}, "Select at least one job"),
                       ({"action": "explode", "key": "1.0-x"}, "Unknown action"),
                       ({"action": "kill", "key": "1.0-x"}, "Unknown action")):
        kind = "dead" if data["action"] == "kill" else "retries"
        response = admin_client.post(url("set_action", kind), data, follow=True)
        assert response.status_code == 200 and text in response.content.decode(), data


def test_history_page_and_filters(admin_client, cluster, raw_redis):
    content = admin_client.get(url("history")).content.decode()
    assert "QueuedJob" in content and "FlakyJob" in content and "12.5ms" in content
    filtered = admin_client.get(url("history") + "?status=retry").context["page"].runs
    assert [r.klass for r in filtered] == ["FlakyJob"]
    assert [r.klass for r in admin_client.get(url("history") + "?class=queued").context["page"].runs] == \
        ["QueuedJob"]
    assert "No runs match" in admin_client.get(url("history") + "?queue=nope").content.decode()
    bad = admin_client.get(url("history") + "?status=nope&before=xyz").content.decode()
    assert "is not a status" in bad and "not a history run id" in bad


def test_history_older_links_page_across_entries_showing_every_run_once(admin_client, raw_redis):
    runs = [(f"jid-{n:03d}", "app.jobs.Page", "default", "ok", 1796269938.0 + n, 1.0, "", "") for n in range(130)]
    append(raw_redis, "host:1:abc", 10_000, runs[:120])  # entries of 120 and 10 runs: pages of 50 cross them
    append(raw_redis, "host:1:abc", 10_000, runs[120:])
    seen, target = [], url("history")
    while target:
        response = admin_client.get(target)
        seen += [run.jid for run in response.context["page"].runs]
        older = re.search(r'href="([^"]*)" rel="next"', response.content.decode())
        target = url("history") + html.unescape(older.group(1)) if older else None
    assert seen == [run[0] for run in reversed(runs)]
    newest_entry = raw_redis.xrevrange("djwork:history", count=1)[0][0].decode()
    # A bare entry id, the form of page markers from one-run entries, starts below that entry.
    assert len(admin_client.get(url("history"), {"before": newest_entry}).context["page"].runs) == 50
    for bad in ("1-1/x", "1-1/", "abc", "1-1/2/3"):
        response = admin_client.get(url("history"), {"before": bad})
        assert "not a history run id" in response.content.decode() and response.context["before"] is None


# --- hostile and broken data ---------------------------------------------------------------------------
def test_xss_payloads_render_escaped_everywhere(admin_client, raw_redis):
    evil = seed.job(klass=seed.XSS_CLASS, args=[seed.XSS_SCRIPT, seed.XSS_IMG], tags=[seed.XSS_IMG])
    failed = seed.failed(evil, message=seed.XSS_IMG + seed.XSS_SCRIPT, error_class=seed.XSS_SCRIPT,
                         backtrace=seed.strict_backtrace([seed.XSS_SCRIPT]))
    now = time.time()
    seed.push(raw_redis, evil)
    seed.zadd(raw_redis, "retry", failed, now + 5)
    seed.zadd(raw_redis, "dead", failed, now)
    seed.process(raw_redis, f"h:1:{seed.XSS_IMG}", tag=seed.XSS_SCRIPT, labels=[seed.XSS_IMG], busy_jobs=[evil],
                 queues=[seed.XSS_SCRIPT])
    raw_redis.sadd("queues", seed.XSS_SCRIPT)
    seed.history(raw_redis, klass=seed.XSS_CLASS, status="dead", error_class=seed.XSS_SCRIPT,
                 error_message=seed.XSS_IMG, queue=seed.XSS_SCRIPT)
    targets = [url(name) for name in ("overview", "busy", "queues", "history")] + [
        url("queue", "default"), url("set", "retries"), url("set", "dead"),
        url("set", "retries") + "?q=evil", url("set_entry", "retries", address(now + 5, failed)),
        url("set_entry", "dead", address(now, failed))]
    for target in targets:
        response = admin_client.get(target)
        assert response.status_code == 200, target
        assert b"<script>alert(1)" not in response.content, target
        assert b"<img src=x" not in response.content, target
        assert ESCAPED_SCRIPT in response.content or target == url("overview"), target
    search = admin_client.get(url("set", "retries") + "?q=" + seed.XSS_SCRIPT).content
    assert b"<script>alert(1)" not in search


def test_pages_survive_broken_and_wrong_type_data(admin_client, raw_redis):
    raw_redis.set("stat:processed", "lots")
    raw_redis.sadd("queues", "default", "strange", "bad name")
    raw_redis.lpush("queue:default", "{broken", seed.dumps([1, 2]), seed.dumps({"class": 5, "args": "x"}))
    raw_redis.set("queue:strange", "string, not a list")
    raw_redis.zadd("retry", {"{broken": time.time(), seed.dumps({"jid": "x"}): time.time() + 1})
    raw_redis.set("dead", "not a zset")
    raw_redis.hset("schedule", "a", "b")
    raw_redis.sadd("processes", "bad:1:x", "str:2:y", "noinfo:3:z")
    raw_redis.hset("bad:1:x", mapping={"info": "[1]", "busy": "?"})
    raw_redis.hset("bad:1:x:work", "t", "{junk")
    raw_redis.set("str:2:y", "x")
    raw_redis.set("djwork:history", "x")
    raw_redis.set("paused", "x")
    targets = [url(name) for name in PAGES] + [url("queue", "default"), url("queue", "strange"),
                                               url("set", "retries"), url("set", "dead"), url("set", "scheduled"),
                                               url("set", "retries") + "?q=x"]
    for target in targets:
        assert admin_client.get(target).status_code == 200, target
    retries = admin_client.get(url("set", "retries"))
    entries = retries.context["entries"]
    assert any("not valid JSON" in " ".join(e.job.problems) for e in entries)
    junk = next(e for e in entries if not e.job.item)
    detail = admin_client.get(url("set_entry", "retries", junk.address))
    assert detail.status_code == 200 and b"{broken" in detail.content
    refused = admin_client.post(url("set_action", "retries"), {"action": "retry", "key": junk.address},
                                follow=True)
    assert "can&#x27;t be queued" in refused.content.decode()
    admin_client.post(url("set_action", "retries"), {"action": "delete", "key": junk.address})
    assert raw_redis.zcard("retry") == 1
    queue_page = admin_client.get(url("queue", "default")).content.decode()
    assert "payload is not valid JSON" in queue_page and "bad name" in admin_client.get(url("queues")).content.decode()


def test_redis_down_is_a_503_page_not_a_500(admin_client, settings):
    settings.DJWORK = {**settings.DJWORK, "REDIS_URL": "redis://127.0.0.1:1/0", "REDIS_MAX_ATTEMPTS": 1}
    response = admin_client.get(url("busy"))
    assert response.status_code == 503 and b"Redis is not answering" in response.content
    assert admin_client.post(url("queue_action", "default"), {"action": "pause"}).status_code == 503


def test_redis_lost_in_the_middle_of_a_job_action_is_a_503_and_the_job_is_kept(admin_client, raw_redis, redis_url,
                                                                              settings):
    from djwork import redis as redis_layer
    from djwork.redis import scripts
    from tests.faultproxy import FaultProxy

    payload = seed.failed(seed.job(klass="FlakyJob", queue="low"), count=2)
    score = time.time() + 30
    seed.zadd(raw_redis, "retry", payload, score)
    raw_redis.script_load(scripts.source("promote"))

    with FaultProxy.in_front_of(redis_url) as proxy:
        settings.DJWORK = {**settings.DJWORK, "REDIS_URL": proxy.url, "REDIS_BACKOFF_BASE": 0.01,
                           "REDIS_BACKOFF_CAP": 0.05, "REDIS_MAX_ATTEMPTS": 2}

        def refuse_replays(event) -> None:
            if event.kind == "retry":
                proxy.refuse()  # Redis is gone from here on: the promotion's replay can't reach it

        fired = proxy.drop_next("EVALSHA", argument=scripts.sha("promote"))
        redis_layer.add_listener(refuse_replays)
        try:
            response = admin_client.post(url("set_action", "retries"),
                                         {"action": "retry", "key": f"{score!r}-{payload['jid']}"})
        finally:
            redis_layer.remove_listener(refuse_replays)
            redis_layer.reset()
    assert fired.is_set()
    # The whole request failed (not a per-job message on a redirect), and the job was moved exactly once.
    assert response.status_code == 503 and b"Redis is not answering" in response.content
    assert raw_redis.zcard("retry") == 0
    assert [json.loads(raw)["jid"] for raw in raw_redis.lrange("queue:low", 0, -1)] == [payload["jid"]]


def test_display_filters():
    import datetime as dt

    from djwork_dashboard.templatetags import djwork_dashboard as tags

    assert tags.number(1234567) == "1,234,567" and tags.number(2.5) == "2.5" and tags.number("x") == "x"
    assert tags.number(None) == "" and tags.number(float("nan")) == "nan"
    assert [tags.duration(s) for s in (0, 0.0125, 0.85, 4.2, 184, 7500)] == \
        ["0s", "12.5ms", "850ms", "4.2s", "3m 04s", "2h 5m"]
    assert tags.duration(None) == "—" and tags.ms(1500) == "1.5s"
    assert [tags.kilobytes(k) for k in (512, 27272, 3 * 1024 * 1024)] == ["512 KB", "26.6 MB", "3.00 GB"]
    past = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=3, seconds=5)
    html = str(tags.reltime(past))
    assert html.startswith('<time datetime="') and 'title="' in html
    assert f'>3m ago <span class="abs">{past:%H:%M:%S} UTC</span></time>' in html
    old = dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2)))  # another zone: shown in UTC
    assert '<span class="abs">2020-01-02 01:04:05 UTC</span>' in str(tags.reltime(old))
    assert "in 1h" in str(tags.reltime(dt.datetime.now(dt.UTC) + dt.timedelta(hours=1, minutes=1)))
    assert "—" in str(tags.reltime(None))
    assert tags.queue_url("bad name") == "" and "&lt;b&gt;" in str(tags.queue_link("<b>"))
    assert tags.tojson({"a": "<b>"}) == '{"a": "<b>"}'


def test_history_marks_a_resumed_segment(admin_client, raw_redis):
    seed.history(raw_redis, klass="app.jobs.ExportOrders", status="rescheduled", jid="a" * 24,
                 error_class="djwork.iterable.Interrupted", error_message="interrupted after 5 items (segment 1)")
    seed.history(raw_redis, klass="app.jobs.ExportOrders", jid="a" * 24, resumed=True)
    content = admin_client.get(url("history")).content.decode()
    rows = re.findall(r"<tr class=\"status-[a-z]+\">.*?</tr>", content, re.S)
    assert len(rows) == 2
    newest, first = rows  # newest first: the resumed segment that completed, then the first segment
    assert '<span class="badge badge-plain resumed"' in newest and ">resumed<" in newest
    assert ">resumed<" not in first


def test_history_shows_when_each_run_finished_the_order_it_is_listed_in(admin_client, raw_redis):
    started = time.time() - 3600
    seed.history(raw_redis, klass="LongJob", started=started, duration_ms=30 * 60 * 1000)  # 30 minutes
    seed.history(raw_redis, klass="LimitedJob", status="rescheduled")
    content = admin_client.get(url("history")).content.decode()
    long_row = re.search(r'<tr class="status-ok">.*?LongJob.*?</tr>', content, re.S).group(0)
    finished = dt.datetime.fromtimestamp(started + 1800, dt.UTC).strftime("%H:%M:%S UTC")
    assert ">Finished<" in content and finished in long_row  # not its start, 30 minutes before
    # A job a rate limit put off did not fail: no red badge.
    rescheduled = re.search(r'<tr class="status-rescheduled">.*?</tr>', content, re.S).group(0)
    assert "badge-bad" not in rescheduled and "badge-plain" in rescheduled
