"""The dashboard's Periodic pages and the Busy page's leader, through Django's test client, on the private Redis.

The entries' state is real: a ticker (the leader's code, tests/test_periodic_claim.py) fires and skips slots on
a simulated clock, and the dashboard reads them on a clock set to 03:30 UTC on 1 June 2026.
"""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from djwork.api import Periodic
from djwork.redis import keys
from tests.browser import seed
from tests.support.periodic import BASE, HOUR, entry, queued, redis_now, ticker_at

ESCAPED_SCRIPT = b"&lt;script&gt;alert(1)&lt;/script&gt;"
HOURLY = entry(name="hourly", args=[seed.XSS_SCRIPT])
NIGHTLY = {"cron": "30 2 * * *", "job": "tests.periodic_jobs.tick", "name": "nightly", "tz": "Europe/Berlin",
           "args": ["n"], "catch_up": "none", "overlap": False}
RETIRED = entry(name="old-report", args=["o"])
ACTIONS = ("pause", "unpause", "run_now", "release_lock")


def url(name: str, *args: str) -> str:
    return reverse(f"djwork_dashboard:{name}", args=args)


def staff(django_user_model, name: str, *codenames: str):
    user = django_user_model.objects.create_user(name, password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="djwork_dashboard",
                                                         codename__in=codenames))
    return user


def keyspace(raw_redis) -> dict[bytes, bytes | None]:
    """Every key with its serialized value: what an action that must not happen would change."""
    return {key: raw_redis.dump(key) for key in raw_redis.scan_iter(count=1000)}


def state(raw_redis, entry_id: str) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in raw_redis.hgetall(keys.periodic_state(entry_id)).items()}


@pytest.fixture
def viewer_client(db, django_user_model) -> Client:
    client = Client()
    client.force_login(staff(django_user_model, "viewer", "view_dashboard"))
    return client


@pytest.fixture
def entries(raw_redis, settings) -> dict:
    """hourly fired 03:00 after 2 missed slots (its job died), nightly skipped 1, old-report is retired."""
    ticker_at(raw_redis, BASE + 0.25 * HOUR, HOURLY, NIGHTLY, RETIRED).run_once()
    ticker_at(raw_redis, BASE + 1.01 * HOUR, RETIRED).run_once()  # old-report fires 01:00, its last run
    later = ticker_at(raw_redis, BASE + 3.01 * HOUR, HOURLY, NIGHTLY)  # the next deploy dropped old-report
    later.leader.term = 2
    later.run_once()
    fired = {job["args"][0]: job for job in queued(raw_redis)}
    seed.history(raw_redis, jid=fired[seed.XSS_SCRIPT]["jid"], status="dead", klass="tick")
    seed.history(raw_redis, jid=fired["o"]["jid"], status="ok", klass="tick")
    settings.DJWORK = {**settings.DJWORK, "PERIODIC": [HOURLY, NIGHTLY],
                       "TEST_CLOCK": {"origin": redis_now(raw_redis), "start": BASE + 3.5 * HOUR}}
    return {"hourly": fired[seed.XSS_SCRIPT]["jid"], "old": fired["o"]["jid"]}


def page_urls() -> list[str]:
    return [url("periodic"), url("periodic_entry", "hourly"), url("periodic_entry", "old-report")]


# --- access ------------------------------------------------------------------------------------------
def test_anonymous_is_sent_to_login(client, entries):
    for target in page_urls():
        assert client.get(target)["Location"].startswith("/admin/login/"), target
    response = client.post(url("periodic_action", "hourly"), {"action": "pause", "confirmed": "1"})
    assert response["Location"].startswith("/admin/login/")


def test_staff_without_permission_gets_403(client, db, django_user_model, entries, raw_redis):
    client.force_login(staff(django_user_model, "plain"))
    before = keyspace(raw_redis)
    for target in page_urls():
        assert client.get(target).status_code == 403, target
    for action in ACTIONS:
        response = client.post(url("periodic_action", "nightly"), {"action": action, "confirmed": "1"})
        assert response.status_code == 403, action
    assert keyspace(raw_redis) == before


def test_viewer_sees_the_pages_without_buttons_and_cannot_act(viewer_client, entries, raw_redis):
    for target in page_urls():
        response = viewer_client.get(target)
        assert response.status_code == 200, target
        assert b'method="post"' not in response.content and b"read-only" in response.content, target
    before = keyspace(raw_redis)
    for action in ACTIONS:
        response = viewer_client.post(url("periodic_action", "nightly"), {"action": action, "confirmed": "1"})
        assert response.status_code == 403, action
    assert keyspace(raw_redis) == before


def test_manage_permission_alone_can_pause(client, db, django_user_model, entries, raw_redis):
    client.force_login(staff(django_user_model, "operator", "manage_dashboard"))
    assert client.get(url("periodic")).status_code == 200
    response = client.post(url("periodic_action", "nightly"), {"action": "pause", "confirmed": "1"})
    assert response.status_code == 302 and state(raw_redis, "nightly")["paused"] == "1"


def test_pages_are_get_only_and_actions_post_only(admin_client, entries, raw_redis):
    before = keyspace(raw_redis)
    assert admin_client.post(url("periodic")).status_code == 405
    assert admin_client.post(url("periodic_entry", "hourly")).status_code == 405
    assert admin_client.get(url("periodic_action", "hourly") + "?action=pause&confirmed=1").status_code == 405
    assert "no-cache" in admin_client.get(url("periodic"))["Cache-Control"]
    assert keyspace(raw_redis) == before


def test_csrf_is_enforced(db, django_user_model, entries, raw_redis):
    client = Client(enforce_csrf_checks=True)
    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    assert client.post(url("periodic_action", "nightly"), {"action": "pause", "confirmed": "1"}).status_code == 403
    assert "paused" not in state(raw_redis, "nightly")
    page = client.get(url("periodic_entry", "nightly"))
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.content).group(1).decode()
    response = client.post(url("periodic_action", "nightly"),
                           {"action": "pause", "confirmed": "1", "csrfmiddlewaretoken": token})
    assert response.status_code == 302 and state(raw_redis, "nightly")["paused"] == "1"


def test_an_unknown_or_invalid_entry_id_is_a_404_and_writes_nothing(admin_client, entries, raw_redis):
    before = keyspace(raw_redis)
    for entry_id in ("never-configured", "x" * 201, ".."):
        assert admin_client.get(url("periodic_entry", entry_id)).status_code == 404, entry_id
        for action in ACTIONS:
            response = admin_client.post(url("periodic_action", entry_id), {"action": action, "confirmed": "1"})
            assert response.status_code == 404, (entry_id, action)
    for path in ("/djwork/periodic/a%3Cb/", "/djwork/periodic/a%3Cb/action", "/djwork/periodic/a b/"):
        assert admin_client.get(path).status_code == 404, path
        assert admin_client.post(path, {"action": "pause", "confirmed": "1"}).status_code == 404, path
    assert keyspace(raw_redis) == before


# --- pages -------------------------------------------------------------------------------------------
def rows(content: bytes) -> dict[str, str]:
    html = content.decode()
    found = re.findall(r'<tr data-entry="([^"]*)"[^>]*>(.*?)</tr>', html, re.S)
    return {entry_id: body for entry_id, body in found}


def test_the_list_shows_every_entry_linked_from_the_nav(admin_client, entries):
    response = admin_client.get(url("overview"))
    assert f'href="{url("periodic")}"'.encode() in response.content
    response = admin_client.get(url("periodic"))
    assert re.search(rb'<a href="/djwork/periodic/" aria-current="page">Periodic</a>', response.content)
    table = rows(response.content)
    assert list(table)[:3] == ["hourly", "nightly", "old-report"]  # configured first, by id
    hourly, nightly, old = table["hourly"], table["nightly"], table["old-report"]

    assert f'href="{url("periodic_entry", "hourly")}"' in hourly and "<code>0 * * * *</code>" in hourly
    assert "2026-06-01 04:00 UTC" in hourly and "catch-up latest" in hourly
    jid = entries["hourly"]
    assert f'href="/djwork/dead/?q={jid}"><code class="small">{jid}</code></a>' in hourly  # its job died
    assert ">dead</span>" in hourly and re.search(r'data-label="Missed"[^>]*>2</td>', hourly)
    assert 'value="pause">Pause…</button>' in hourly and 'value="run_now">Run now…</button>' in hourly

    # A Berlin entry's next run, in its zone and in UTC; 'none' skipped the 02:30 slot of the downtime.
    assert "2026-06-02 02:30 CEST" in nightly and "2026-06-02 00:30 UTC" in nightly
    assert "no overlap" in nightly and re.search(r'data-label="Missed"[^>]*>1</td>', nightly)
    assert "never" in nightly and ">active</span>" in nightly

    assert "not configured" in old and "stopped" in old and ">ok</span>" in old and entries["old"] in old
    assert "<button" not in old  # it can't run here, and it fires nothing to pause


def test_a_paused_entry_and_a_running_lock_show_in_the_list(admin_client, entries):
    Periodic().pause("hourly")
    jid = Periodic().run_now("nightly")
    table = rows(admin_client.get(url("periodic")).content)
    assert ">paused</span>" in table["hourly"] and 'value="unpause">Unpause…</button>' in table["hourly"]
    assert "pending" in table["nightly"] and "running <code" in table["nightly"] and jid in table["nightly"]


def test_the_detail_page_shows_the_schedule_counters_and_history(admin_client, entries, raw_redis):
    content = admin_client.get(url("periodic_entry", "hourly")).content.decode()
    assert '<a class="crumb" href="/djwork/periodic/">Periodic</a>' in content
    assert "2026-06-01 03:00 UTC" in content  # the watermark
    assert re.search(r'data-stat="fired">1<', content) and re.search(r'data-stat="skipped_missed">2<', content)
    runs = re.findall(r'<tr data-kind="([^"]*)"(?: data-jid="([^"]*)")?>(.*?)</tr>', content, re.S)
    assert [kind for kind, _jid, _body in runs] == ["slot"]
    (_kind, jid, body), = runs
    assert jid == entries["hourly"] and f'href="/djwork/dead/?q={jid}"' in body
    assert "after 2 missed slots skipped" in body and "2026-06-01 03:00 UTC" in body

    nightly = admin_client.get(url("periodic_entry", "nightly")).content.decode()
    assert "1 slot skipped: missed" in nightly and "2026-06-02 02:30 CEST" in nightly
    assert "Release lock" not in nightly and "free" in nightly

    old = admin_client.get(url("periodic_entry", "old-report")).content.decode()
    assert "no longer configured" in old and 'value="run_now"' not in old
    assert f'data-jid="{entries["old"]}"' in old and ">ok</span>" in old


# --- actions -----------------------------------------------------------------------------------------
def confirmation(response) -> dict[str, str]:
    assert response.status_code == 200 and b"confirmed" in response.content
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', response.content.decode()))


def test_pause_and_unpause_ask_first_then_act(admin_client, entries, raw_redis):
    detail = url("periodic_entry", "nightly")
    before = keyspace(raw_redis)
    response = admin_client.post(url("periodic_action", "nightly"), {"action": "pause", "next": detail})
    assert "<h1>Pause nightly?</h1>" in response.content.decode() and "unpausing fires no backlog" in \
        response.content.decode()
    fields = confirmation(response)
    assert fields["action"] == "pause" and fields["next"] == detail and fields["confirmed"] == "1"
    assert f'href="{detail}">Cancel</a>' in response.content.decode()
    assert keyspace(raw_redis) == before  # asking wrote nothing

    response = admin_client.post(url("periodic_action", "nightly"), fields, follow=True)
    assert response.redirect_chain == [(detail, 302)]
    assert "Paused nightly" in response.content.decode() and state(raw_redis, "nightly")["paused"] == "1"
    response = admin_client.post(url("periodic_action", "nightly"), {"action": "pause"}, follow=True)
    assert "nightly is already paused." in response.content.decode()

    fields = confirmation(admin_client.post(url("periodic_action", "nightly"), {"action": "unpause"}))
    assert "paused" in state(raw_redis, "nightly")
    response = admin_client.post(url("periodic_action", "nightly"), fields, follow=True)
    assert "Unpaused nightly" in response.content.decode() and "paused" not in state(raw_redis, "nightly")


def test_run_now_pushes_the_configured_arguments_after_confirmation(admin_client, entries, raw_redis):
    before = len(queued(raw_redis))
    response = admin_client.post(url("periodic_action", "hourly"), {"action": "run_now"})
    assert "<h1>Run now hourly?</h1>" in response.content.decode() and ESCAPED_SCRIPT in response.content
    assert len(queued(raw_redis)) == before
    response = admin_client.post(url("periodic_action", "hourly"), confirmation(response), follow=True)
    job = queued(raw_redis)[-1]
    assert job["args"] == [seed.XSS_SCRIPT] and job["djwork_periodic"] == {"entry": "hourly"}
    assert f"Enqueued hourly now as job {job['jid']}." in response.content.decode()
    assert response.redirect_chain == [(url("periodic_entry", "hourly"), 302)]

    # Retired here: refused before any confirmation; nothing pushed.
    response = admin_client.post(url("periodic_action", "old-report"), {"action": "run_now", "confirmed": "1"},
                                 follow=True)
    assert "old-report is not configured in this deploy" in response.content.decode()
    response = admin_client.post(url("periodic_action", "old-report"), {"action": "pause"}, follow=True)
    assert "old-report is no longer configured" in response.content.decode()
    assert "paused" not in state(raw_redis, "old-report")
    assert len(queued(raw_redis)) == before + 1


def test_run_now_of_a_no_overlap_entry_is_refused_while_its_run_holds_the_lock(admin_client, entries, raw_redis):
    Periodic().run_now("nightly")
    count = len(queued(raw_redis))
    response = admin_client.post(url("periodic_action", "nightly"), {"action": "run_now", "confirmed": "1"},
                                 follow=True)
    assert "does not overlap runs" in response.content.decode() and len(queued(raw_redis)) == count


def test_release_lock_names_the_holder_and_releases_only_that_one(admin_client, entries, raw_redis):
    lock = keys.periodic_lock("nightly")
    response = admin_client.post(url("periodic_action", "nightly"), {"action": "release_lock"}, follow=True)
    assert "nightly holds no running lock" in response.content.decode()

    jid = Periodic().run_now("nightly")
    page = admin_client.get(url("periodic_entry", "nightly")).content.decode()
    assert f'name="holder" value="{jid}"' in page and "Release lock…" in page
    fields = confirmation(admin_client.post(url("periodic_action", "nightly"),
                                            {"action": "release_lock", "holder": jid}))
    assert fields["holder"] == jid and raw_redis.get(lock) == jid.encode()

    # The lock passed to another run meanwhile: the confirmation named the old one, so nothing is released.
    raw_redis.set(lock, "next-run")
    response = admin_client.post(url("periodic_action", "nightly"), fields, follow=True)
    assert "now held by job next-run" in response.content.decode() and raw_redis.get(lock) == b"next-run"
    response = admin_client.post(url("periodic_action", "nightly"), {"action": "release_lock", "confirmed": "1"},
                                 follow=True)
    assert "Say which job" in response.content.decode() and raw_redis.get(lock) == b"next-run"

    raw_redis.set(lock, jid)
    response = admin_client.post(url("periodic_action", "nightly"), fields, follow=True)
    assert f"Released the running lock of nightly (job {jid})." in response.content.decode()
    assert not raw_redis.exists(lock)


def test_bad_action_and_foreign_next_give_messages_and_stay_on_site(admin_client, entries, raw_redis):
    before = keyspace(raw_redis)
    response = admin_client.post(url("periodic_action", "hourly"), {"action": "explode<b>", "confirmed": "1"},
                                 follow=True)
    assert "Unknown action “explode&lt;b&gt;”." in response.content.decode()
    assert keyspace(raw_redis) == before
    response = admin_client.post(url("periodic_action", "hourly"),
                                 {"action": "pause", "confirmed": "1", "next": "https://evil.example/"})
    assert response["Location"] == url("periodic_entry", "hourly")


def test_hostile_ids_definitions_and_history_render_escaped(admin_client, entries, raw_redis):
    raw_redis.hset(keys.PERIODIC_ENTRIES, seed.XSS_IMG, json.dumps({"cron": seed.XSS_SCRIPT, "job": seed.XSS_IMG,
                                                                    "seen": 1}))
    raw_redis.lpush(keys.periodic_history("hourly"), json.dumps(
        {"kind": seed.XSS_SCRIPT, "jid": seed.XSS_IMG, "reason": seed.XSS_SCRIPT, "holder": seed.XSS_IMG}))
    raw_redis.set(keys.periodic_lock("hourly"), seed.XSS_IMG)
    for target in (url("periodic"), url("periodic_entry", "hourly")):
        content = admin_client.get(target).content
        assert b"<script>alert" not in content and b"<img src=x" not in content, target
        assert ESCAPED_SCRIPT in content, target
    table = rows(admin_client.get(url("periodic")).content)
    hostile = next(body for entry_id, body in table.items() if "img" in entry_id)
    assert "not a valid entry id" in hostile and "<a " not in hostile and "<button" not in hostile


# --- Busy: the leader ------------------------------------------------------------------------------------
def test_busy_marks_the_leader_process(admin_client, raw_redis):
    seed.process(raw_redis, "web.1:101:aaa111")
    seed.process(raw_redis, "web.2:102:bbb222")
    content = admin_client.get(url("busy")).content.decode()
    assert "leader-badge" not in content and re.search(r'id="leader".*?none', content, re.S)
    raw_redis.set(keys.LEADER, "web.2:102:bbb222")
    content = admin_client.get(url("busy")).content.decode()
    badges = {identity: "leader-badge" in body for identity, body in
              re.findall(r'<tr data-identity="([^"]+)"(.*?)</tr>', content, re.S)}
    assert badges == {"web.1:101:aaa111": False, "web.2:102:bbb222": True}
    assert re.search(r'id="leader".*?web\.2:102:bbb222', content, re.S)


def test_a_utc_entry_prints_its_next_run_once(admin_client, entries):
    page = admin_client.get(url("periodic")).content.decode()
    row = re.search(r'<tr data-entry="hourly".*?</tr>', page, re.S).group(0)
    cell = re.search(r'data-label="Next run">(.*?)</td>', row, re.S).group(1)
    shown = re.sub(r"<[^>]+>", " ", cell)  # the text a person reads (a title on hover aside)
    assert shown.count("04:00") == 1, shown  # it read "04:00 UTC", "04:00 UTC" and "04:00:00 UTC"
    nightly = re.search(r'<tr data-entry="nightly".*?</tr>', page, re.S).group(0)
    assert "next-local" in nightly  # a zoned entry shows its own wall clock, then UTC
    detail = re.sub(r"<[^>]+>", " ", re.search(r'id="next-run">(.*?)</dd>', admin_client.get(
        url("periodic_entry", "hourly")).content.decode(), re.S).group(1))
    assert detail.count("04:00") == 1, detail
