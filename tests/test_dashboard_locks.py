"""The dashboard and unique jobs, through Django's test client against the private Redis: the Locks page
(list, owner-checked Release behind a confirmation), the lock on a job's detail page, and Delete and Kill
releasing a unique job's lock.
"""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from djwork import api
from djwork.redis import keys
from tests import unique_jobs


def url(name: str, *args: str) -> str:
    return reverse(f"djwork_dashboard:{name}", args=args)


def staff(django_user_model, name: str, *codenames: str):
    user = django_user_model.objects.create_user(name, password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="djwork_dashboard",
                                                         codename__in=codenames))
    return user


def unique_keys(raw_redis) -> dict[str, str]:
    return {key.decode(): raw_redis.get(key).decode() for key in raw_redis.scan_iter("unique:*", count=1000)}


def keyspace(raw_redis) -> dict[bytes, bytes | None]:
    return {key: raw_redis.dump(key) for key in raw_redis.scan_iter(count=1000)}


@pytest.fixture
def held(raw_redis) -> dict:
    """A queued unique job and its lock: ``jid``, ``digest``."""
    ref = unique_jobs.sync_account.delay(42)
    (lock,) = unique_keys(raw_redis)
    return {"jid": ref.jid, "digest": lock[len("unique:"):]}


def scheduled_address(jid: str) -> str:
    return api.ScheduledSet().find_job(jid).address


# --- the Locks page ------------------------------------------------------------------------------------
def test_the_locks_page_lists_each_lock_with_its_owner_and_where_it_is(admin_client, held):
    scheduled = unique_jobs.sync_account.apply_async((43,), countdown=600)
    response = admin_client.get(url("locks"))
    content = response.content.decode()
    assert response.status_code == 200
    rows = {lock.owner: lock.where for lock, _badge in response.context["rows"]}
    assert rows == {held["jid"]: "queued", scheduled.jid: "scheduled"}
    assert held["jid"] in content and held["digest"][:17] in content
    assert f'href="{url("locks")}"' in admin_client.get(url("overview")).content.decode()


def test_release_needs_a_confirmation_then_releases_owner_checked(admin_client, held, raw_redis):
    form = {"action": "release", "digest": held["digest"], "owner": held["jid"], "next": url("locks")}
    confirm = admin_client.post(url("lock_action"), form)
    assert confirm.status_code == 200 and b"Release this unique lock?" in confirm.content
    assert unique_keys(raw_redis)  # nothing released before the confirmation
    done = admin_client.post(url("lock_action"), {**form, "confirmed": "1"}, follow=True)
    assert "Released lock" in done.content.decode() and unique_keys(raw_redis) == {}
    assert raw_redis.llen(keys.queue("default")) == 1  # the job stays; only its lock is gone
    assert unique_jobs.sync_account.delay(42).enqueued


def test_release_of_a_lock_a_new_copy_holds_now_releases_nothing(admin_client, held, raw_redis):
    raw_redis.set(f"unique:{held['digest']}", "jid-of-a-newer-copy")
    response = admin_client.post(url("lock_action"), {"action": "release", "digest": held["digest"],
                                                      "owner": held["jid"], "confirmed": "1"}, follow=True)
    assert "was no longer held by job" in response.content.decode()
    assert unique_keys(raw_redis) == {f"unique:{held['digest']}": "jid-of-a-newer-copy"}


@pytest.mark.parametrize("form, text", [
    ({"action": "explode"}, "Unknown action"),
    ({"action": "release", "digest": "a b*"}, "is not a unique lock digest"),
    ({"action": "release", "digest": "abc"}, "the owner"),
])
def test_bad_release_input_becomes_a_message(admin_client, held, raw_redis, form, text):
    before = keyspace(raw_redis)
    response = admin_client.post(url("lock_action"), {**form, "confirmed": "1"}, follow=True)
    assert response.status_code == 200 and text in response.content.decode()
    assert keyspace(raw_redis) == before


def test_a_bad_cursor_shows_the_first_page_with_a_message(admin_client, held):
    response = admin_client.get(url("locks") + "?cursor=nope")
    assert response.status_code == 200 and "is not a page marker" in response.content.decode()
    assert [lock.owner for lock, _badge in response.context["rows"]] == [held["jid"]]


def test_viewer_sees_locks_without_buttons_and_cannot_release(db, django_user_model, held, raw_redis):
    client = Client()
    client.force_login(staff(django_user_model, "viewer", "view_dashboard"))
    page = client.get(url("locks"))
    assert page.status_code == 200 and b'method="post"' not in page.content and held["jid"].encode() in page.content
    before = keyspace(raw_redis)
    form = {"action": "release", "digest": held["digest"], "owner": held["jid"], "confirmed": "1"}
    assert client.post(url("lock_action"), form).status_code == 403
    assert keyspace(raw_redis) == before


def test_anonymous_and_unpermitted_staff_are_kept_out(client, db, django_user_model, held, raw_redis):
    assert client.get(url("locks"))["Location"].startswith("/admin/login/")
    client.force_login(staff(django_user_model, "plain"))
    assert client.get(url("locks")).status_code == 403
    assert client.post(url("lock_action"), {"action": "release", "digest": held["digest"], "owner": held["jid"],
                                            "confirmed": "1"}).status_code == 403
    assert unique_keys(raw_redis)


def test_release_is_post_only_and_csrf_checked(db, django_user_model, held, raw_redis):
    client = Client(enforce_csrf_checks=True)
    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    form = {"action": "release", "digest": held["digest"], "owner": held["jid"], "confirmed": "1"}
    assert client.get(url("lock_action"), form).status_code == 405
    assert client.post(url("lock_action"), form).status_code == 403
    assert unique_keys(raw_redis)
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', client.get(url("locks")).content).group(1)
    assert client.post(url("lock_action"), {**form, "csrfmiddlewaretoken": token.decode()}).status_code == 302
    assert unique_keys(raw_redis) == {}


# --- job pages and the job actions --------------------------------------------------------------------
def test_a_jobs_detail_page_shows_its_digest_and_lock_state(admin_client, raw_redis):
    ref = unique_jobs.sync_account.apply_async((1,), countdown=600)
    (lock,) = unique_keys(raw_redis)
    address = scheduled_address(ref.jid)
    page = admin_client.get(url("set_entry", "scheduled", address)).content.decode()
    assert "Unique lock" in page and lock[len("unique:"):][:17] in page and "held by this job" in page
    raw_redis.set(lock, "jid-other")
    assert "held by another job" in admin_client.get(url("set_entry", "scheduled", address)).content.decode()
    raw_redis.delete(lock)
    assert "released" in admin_client.get(url("set_entry", "scheduled", address)).content.decode()
    plain = unique_jobs.sync_account.build_payload([2])[0]
    plain.pop("djwork_locks")
    raw_redis.zadd(keys.SCHEDULE, {json.dumps(plain): 2_000_000_000})
    other = admin_client.get(url("set_entry", "scheduled", scheduled_address(plain["jid"]))).content.decode()
    assert "Unique lock" not in other


def test_dashboard_delete_and_kill_release_the_lock(admin_client, raw_redis):
    queued = unique_jobs.sync_account.delay(1)
    admin_client.post(url("queue_action", "default"), {"action": "delete", "job": queued.jid, "confirmed": "1"})
    later = unique_jobs.sync_account.apply_async((2,), countdown=600)
    admin_client.post(url("set_action", "scheduled"), {"action": "delete", "key": scheduled_address(later.jid)})
    assert unique_keys(raw_redis) == {}
    killed = unique_jobs.sync_account.apply_async((3,), countdown=600)
    admin_client.post(url("set_action", "scheduled"), {"action": "kill", "key": scheduled_address(killed.jid)})
    assert unique_keys(raw_redis) == {}
    assert json.loads(raw_redis.zrange(keys.DEAD, 0, -1)[0])["jid"] == killed.jid
    assert all(unique_jobs.sync_account.delay(n).enqueued for n in (1, 2, 3))


def test_the_release_confirmation_names_the_jobs_class_and_arguments(admin_client, held):
    form = {"action": "release", "digest": held["digest"], "owner": held["jid"], "next": url("locks")}
    question = admin_client.post(url("lock_action"), form).content.decode()
    assert f"tests.unique_jobs.sync_account {held['jid']} with arguments (42), queued," in question
