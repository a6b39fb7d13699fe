"""The dashboard's Limits pages through Django's test client, against real limiters in the private Redis."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from djwork import api
from djwork.limiter import bucket, concurrent, points, window
from djwork.redis import keys
from tests.browser import seed
from tests.helpers_worker import wait_until

ESCAPED_SCRIPT = b"&lt;script&gt;alert(1)&lt;/script&gt;"
FAR_FUTURE = 4_000_000_000  # a registry score (expiry, Redis time) no test outlives


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


@pytest.fixture
def viewer_client(db, django_user_model) -> Client:
    client = Client()
    client.force_login(staff(django_user_model, "viewer", "view_dashboard"))
    return client


@pytest.fixture
def limiters(raw_redis) -> Iterator[dict]:
    """One limiter of each common kind, with real use: a full concurrent one holding a slot, partly used rates."""
    stripe = concurrent("stripe", 1, wait_timeout=30, lock_timeout=120)
    holding = stripe.acquire(jid="jid-held")
    api_bucket = bucket("api", 10, "hour")
    for _ in range(3):
        api_bucket.acquire()
    window("mail", 100, "minute").acquire()
    points("github", 5000, "hour").acquire(estimate=500)
    yield {"stripe": stripe, "holding": holding}
    holding.release()


@pytest.fixture
def waiter(limiters) -> Iterator[dict]:
    """A real caller blocked in the full "stripe" limiter's waiting list (jid "jid-waiting")."""
    result: dict = {}

    def wait_for_slot() -> None:
        result["slot"] = limiters["stripe"].acquire(jid="jid-waiting")

    thread = threading.Thread(target=wait_for_slot, daemon=True)
    thread.start()
    wait_until(lambda: api.Limiter("stripe").summary().waiting == 1, 10, "the caller in the waiting list")
    yield {"thread": thread, "result": result}
    if thread.is_alive():
        api.Limiter("stripe").reset()  # admits it, so the thread ends
    thread.join(10)
    if "slot" in result:
        result["slot"].release()


# --- access ------------------------------------------------------------------------------------------
def test_anonymous_is_sent_to_login(client, limiters):
    for target in (url("limits"), url("limiter", "stripe")):
        assert client.get(target)["Location"].startswith("/admin/login/"), target
    assert client.post(url("limiter_action", "stripe"), {"action": "reset"})["Location"].startswith("/admin/login/")


def test_staff_without_permission_gets_403(client, db, django_user_model, limiters, raw_redis):
    client.force_login(staff(django_user_model, "plain"))
    before = keyspace(raw_redis)
    assert client.get(url("limits")).status_code == 403
    assert client.get(url("limiter", "stripe")).status_code == 403
    for action in ("reset", "delete"):
        assert client.post(url("limiter_action", "stripe"), {"action": action, "confirmed": "1"}).status_code == 403
    assert keyspace(raw_redis) == before


def test_viewer_sees_limits_without_buttons_and_cannot_reset_or_delete(viewer_client, limiters, raw_redis):
    for target in (url("limits"), url("limiter", "stripe")):
        response = viewer_client.get(target)
        assert response.status_code == 200, target
        assert b'method="post"' not in response.content and b"read-only" in response.content, target
    before = keyspace(raw_redis)
    for action in ("reset", "delete"):
        response = viewer_client.post(url("limiter_action", "stripe"), {"action": action, "confirmed": "1"})
        assert response.status_code == 403, action
    assert keyspace(raw_redis) == before
    assert raw_redis.zcard(keys.limiter_holders("stripe")) == 1


def test_manage_permission_alone_can_reset(client, db, django_user_model, limiters, raw_redis):
    client.force_login(staff(django_user_model, "operator", "manage_dashboard"))
    assert client.get(url("limits")).status_code == 200
    response = client.post(url("limiter_action", "stripe"), {"action": "reset", "confirmed": "1"})
    assert response.status_code == 302 and raw_redis.zcard(keys.limiter_holders("stripe")) == 0


def test_pages_are_get_only_and_actions_post_only(admin_client, limiters, raw_redis):
    assert admin_client.post(url("limits")).status_code == 405
    assert admin_client.post(url("limiter", "stripe")).status_code == 405
    assert admin_client.get(url("limiter_action", "stripe") + "?action=delete&confirmed=1").status_code == 405
    assert raw_redis.exists(keys.limiter("stripe"))


def test_csrf_is_enforced_on_reset_and_delete(db, django_user_model, raw_redis, limiters):
    client = Client(enforce_csrf_checks=True)
    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    before = keyspace(raw_redis)
    for action in ("reset", "delete"):
        assert client.post(url("limiter_action", "stripe"), {"action": action, "confirmed": "1"}).status_code == 403
    assert keyspace(raw_redis) == before
    page = client.get(url("limiter", "stripe"))
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.content).group(1).decode()
    response = client.post(url("limiter_action", "stripe"),
                           {"action": "delete", "confirmed": "1", "csrfmiddlewaretoken": token})
    assert response.status_code == 302 and not raw_redis.exists(keys.limiter("stripe"))


# --- pages -------------------------------------------------------------------------------------------
def test_nav_links_to_limits(admin_client, limiters):
    content = admin_client.get(url("overview")).content.decode()
    assert f'href="{url("limits")}"' in content
    limits_page = admin_client.get(url("limits")).content.decode()
    assert re.search(rf'href="{url("limits")}" aria-current="page">Limits<', limits_page)


def test_list_shows_kind_limit_usage_and_stats(admin_client, limiters):
    response = admin_client.get(url("limits"))
    content = response.content.decode()
    rows = {row.name: row for row in response.context["rows"]}
    assert list(rows) == ["api", "github", "mail", "stripe"]
    assert (rows["stripe"].limit, rows["stripe"].percent, rows["stripe"].level) == ("1 at once", 100, "full")
    assert (rows["api"].limit, rows["api"].percent, rows["api"].level) == ("10 / hour", 30, "")
    assert rows["github"].limit == "5,000 points / hour" and rows["mail"].limit == "100 / minute"
    stripe_row = re.search(r'<tr data-limiter="stripe">.*?</tr>', content, re.S).group(0)
    assert 'class="usage-bar usage-full"' in stripe_row and 'style="width: 100%"' in stripe_row
    assert "1 / 1" in stripe_row and "on release" in stripe_row and "1 immediate" in stripe_row
    api_row = re.search(r'<tr data-limiter="api">.*?</tr>', content, re.S).group(0)
    assert "3 / 10" in api_row and 'style="width: 30%"' in api_row and "<time" in api_row  # free at the hour
    assert f'href="{url("limiter", "api")}"' in api_row
    assert api_row.count('name="action" value="reset"') == 1


def test_filter_by_name_and_paging_keep_the_filter(admin_client, limiters):
    for index in range(30):
        window(f"tenant:{index:02d}", 1, 60).acquire()
    filtered = admin_client.get(url("limits") + "?q=TENANT")
    page = filtered.context["page"]
    assert (page.total, len(page.items), page.pages) == (30, 25, 2)
    assert all(item.name.startswith("tenant:") for item in page.items)
    assert 'href="?q=TENANT&amp;page=2"' in filtered.content.decode()
    second = admin_client.get(url("limits") + "?q=TENANT&page=2")
    assert [item.name for item in second.context["page"].items] == [f"tenant:{n}" for n in range(25, 30)]
    assert admin_client.get(url("limits") + "?q=strip").context["page"].total == 1
    none = admin_client.get(url("limits") + "?q=nothing-like-it").content.decode()
    assert "No limiter has “nothing-like-it” in its name." in none
    bad = admin_client.get(url("limits") + "?page=abc").content.decode()
    assert "is not a page number" in bad
    past = admin_client.get(url("limits") + "?q=tenant&page=9")
    assert past.context["page"].number == 2 and "past the end" in past.content.decode()


def test_empty_list_says_how_limiters_appear(admin_client, raw_redis):
    assert "appears here on its first use" in admin_client.get(url("limits")).content.decode()


def test_detail_shows_status_stats_holders_and_waiting_jobs(admin_client, waiter):
    response = admin_client.get(url("limiter", "stripe"))
    content = response.content.decode()
    assert response.status_code == 200
    status = re.search(r'<dl class="kv wide" id="limiter-status">.*?</dl>', content, re.S).group(0)
    assert "concurrent" in status and "1 at once" in status and "1 / 1" in status and "2m 00s" in status
    holders = re.search(r'<table class="table stack" id="holders">.*?</table>', content, re.S).group(0)
    assert "jid-held" in holders and "jid-waiting" not in holders and "lapsed" not in holders
    waiters = re.search(r'<table class="table stack" id="waiters">.*?</table>', content, re.S).group(0)
    assert "jid-waiting" in waiters
    for stat, value in (("held", "0"), ("immediate", "1"), ("waited", "0"), ("over", "0"), ("overages", "0"),
                        ("reclaimed", "0"), ("rescheduled", "0"), ("waiting", "1")):
        assert f'data-stat="{stat}">{value}<' in content, stat
    rate = admin_client.get(url("limiter", "api")).content.decode()
    assert 'id="holders"' not in rate and "keeps no waiting list" in rate and 'data-stat="immediate">3<' in rate


def test_looking_writes_nothing(admin_client, waiter, raw_redis):
    before = keyspace_but_waiting_deadlines(raw_redis)
    for target in (url("limits"), url("limits") + "?q=a&page=2", url("limiter", "stripe"), url("limiter", "api")):
        assert admin_client.get(target).status_code == 200, target
    assert admin_client.post(url("limiter_action", "stripe"), {"action": "reset"}).status_code == 200  # asks only
    assert keyspace_but_waiting_deadlines(raw_redis) == before


def keyspace_but_waiting_deadlines(raw_redis) -> dict[bytes, object]:
    """keyspace(), with the waiting list read as who waits (token, identity, jid), not until when.

    The waiter asks the script again after every blocking slice, which writes
    its entry's deadline anew: under load the pages took longer than a slice,
    and the waiter's own write passed for one of the dashboard's.
    """
    waiting = keys.limiter_waiting("stripe").encode()
    seen = {key: value for key, value in keyspace(raw_redis).items() if key != waiting}
    seen[waiting] = {token: entry.split(b"\t", 1)[1] for token, entry in raw_redis.hgetall(waiting).items()}
    return seen


def test_unknown_limiter_is_a_404_naming_it_in_the_dashboard_layout(admin_client, limiters):
    response = admin_client.get(url("limiter", "never-used"))
    assert response.status_code == 404 and 'id="not-found"' in response.content.decode()
    assert "No limiter never-used" in response.content.decode()


def test_bad_names_are_404_and_never_reach_redis(admin_client, limiters, raw_redis):
    before = keyspace(raw_redis)
    for name in ("a%3Cb", "a%20b", "a%2Fb", "%3Cscript%3E", "x" * 201):
        assert admin_client.get(f"/djwork/limits/{name}/").status_code == 404, name
        response = admin_client.post(f"/djwork/limits/{name}/action", {"action": "delete", "confirmed": "1"})
        assert response.status_code == 404, name
    assert keyspace(raw_redis) == before


def test_a_hostile_name_in_the_registry_is_listed_as_text_without_a_link(admin_client, limiters, raw_redis):
    raw_redis.zadd(keys.LIMITERS, {"a<b": FAR_FUTURE, seed.XSS_SCRIPT: FAR_FUTURE})
    response = admin_client.get(url("limits"))
    content = response.content
    assert response.status_code == 200
    assert b'<tr data-limiter="a&lt;b">' in content and b"a<b" not in content
    assert ESCAPED_SCRIPT in content and b"<script>alert(1)" not in content
    assert {row.name: row.url for row in response.context["rows"]}["a<b"] == ""
    assert content.count(b'name="action" value="delete"') == 4  # the four real limiters only


def test_stored_metadata_and_holders_render_escaped(admin_client, limiters, raw_redis):
    raw_redis.hset(keys.limiter("evil"), mapping={"kind": seed.XSS_SCRIPT, "size": "5"})
    raw_redis.zadd(keys.LIMITERS, {"evil": FAR_FUTURE})
    token = raw_redis.zrange(keys.limiter_holders("stripe"), 0, 0)[0]
    raw_redis.hset(keys.limiter_owners("stripe"), token, f"{seed.XSS_IMG}\t{seed.XSS_SCRIPT}\t1700000000")
    for target in (url("limits"), url("limiter", "evil"), url("limiter", "stripe")):
        response = admin_client.get(target)
        assert response.status_code == 200, target
        assert b"<script>alert(1)" not in response.content and b"<img src=x" not in response.content, target
        assert ESCAPED_SCRIPT in response.content, target
    assert b"unknown kind" in admin_client.get(url("limiter", "evil")).content


# --- actions -----------------------------------------------------------------------------------------
def test_reset_asks_first_then_frees_the_slot_for_the_waiting_job(admin_client, waiter, raw_redis):
    detail = url("limiter", "stripe")
    confirm = admin_client.post(url("limiter_action", "stripe"), {"action": "reset", "next": detail})
    content = confirm.content.decode()
    assert confirm.status_code == 200 and "Reset limiter stripe?" in content and "1 slot held now" in content
    assert f'name="next" value="{detail}"' in content and f'href="{detail}">Cancel' in content
    assert raw_redis.zcard(keys.limiter_holders("stripe")) == 1 and waiter["thread"].is_alive()
    done = admin_client.post(url("limiter_action", "stripe"),
                             {"action": "reset", "next": detail, "confirmed": "1"}, follow=True)
    assert done.redirect_chain == [(detail, 302)]
    assert "Reset stripe: its usage starts again from zero. 1 slot freed." in done.content.decode()
    waiter["thread"].join(10)
    assert "slot" in waiter["result"]  # the waiting job was admitted by the reset itself
    owners = raw_redis.hvals(keys.limiter_owners("stripe"))
    assert len(owners) == 1 and b"jid-waiting" in owners[0]
    assert b'data-stat="immediate">1<' in done.content  # stats are kept


def test_reset_of_a_rate_limiter_starts_its_count_again(admin_client, limiters):
    confirm = admin_client.post(url("limiter_action", "api"), {"action": "reset"})
    assert "Its count starts again from zero" in confirm.content.decode()
    admin_client.post(url("limiter_action", "api"), {"action": "reset", "confirmed": "1"})
    assert {row.name: row for row in admin_client.get(url("limits")).context["rows"]}["api"].summary.used == 0


def test_delete_asks_first_and_from_its_own_page_lands_on_the_list(admin_client, limiters, raw_redis):
    detail = url("limiter", "mail")
    confirm = admin_client.post(url("limiter_action", "mail"), {"action": "delete", "next": detail})
    assert confirm.status_code == 200 and b"Delete limiter mail?" in confirm.content
    assert raw_redis.exists(keys.limiter("mail"))
    done = admin_client.post(url("limiter_action", "mail"), {"action": "delete", "next": detail, "confirmed": "1"},
                             follow=True)
    assert done.redirect_chain == [(url("limits"), 302)]
    assert "Deleted limiter mail." in done.content.decode()
    assert not raw_redis.exists(keys.limiter("mail"), keys.limiter_state("mail"), keys.limiter_stats("mail"))
    assert raw_redis.zscore(keys.LIMITERS, "mail") is None
    filtered = url("limits") + "?q=git"
    assert admin_client.post(url("limiter_action", "github"),
                             {"action": "delete", "next": filtered, "confirmed": "1"})["Location"] == filtered


def test_next_urls_stay_on_this_site(admin_client, limiters):
    for target in ("javascript:alert(1)", "https://evil.example/", "//evil.example/"):
        confirm = admin_client.post(url("limiter_action", "api"), {"action": "reset", "next": target})
        assert target.encode() not in confirm.content
        assert f'href="{url("overview")}">Cancel'.encode() in confirm.content
        done = admin_client.post(url("limiter_action", "api"), {"action": "reset", "next": target, "confirmed": "1"})
        assert done["Location"] == url("limiter", "api")
        gone = admin_client.post(url("limiter_action", f"gone-{len(target)}"),
                                 {"action": "delete", "next": target, "confirmed": "1"})
        assert gone["Location"] == url("limits")


def test_bad_actions_give_messages(admin_client, limiters, raw_redis):
    unknown = admin_client.post(url("limiter_action", "api"), {"action": "explode"}, follow=True)
    assert "Unknown action “explode”" in unknown.content.decode()
    missing = admin_client.post(url("limiter_action", "never-used"), {"action": "reset"}, follow=True)
    assert missing.redirect_chain[-1] == (url("limits"), 302)
    assert "No limiter never-used" in missing.content.decode()
    assert not raw_redis.exists(keys.limiter("never-used"))


def test_redis_down_is_a_503_page(admin_client, settings):
    settings.DJWORK = {**settings.DJWORK, "REDIS_URL": "redis://127.0.0.1:1/0", "REDIS_MAX_ATTEMPTS": 1}
    assert admin_client.get(url("limits")).status_code == 503
    assert admin_client.get(url("limiter", "stripe")).status_code == 503
    assert admin_client.post(url("limiter_action", "stripe"), {"action": "reset", "confirmed": "1"}).status_code == 503
