"""The example project: a fresh checkout migrates, and its enqueue page puts each example job on its queue."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

ROOT = Path(__file__).resolve().parent.parent


def test_migrate_creates_the_database_folder_a_fresh_checkout_lacks(tmp_path, redis_url):
    # Only ./dev used to create .djwork/; plain `manage.py migrate` then failed with
    # "unable to open database file". The same settings line makes any missing folder.
    database = tmp_path / "not-yet" / "made" / "example.sqlite3"
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env.update({"DJWORK_EXAMPLE_DB": str(database), "REDIS_URL": redis_url})
    result = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert database.is_file()


@pytest.fixture
def demo_client(db) -> Client:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("newcomer", password="x")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def csrf_token(client: Client) -> str:
    page = client.get("/enqueue/")
    assert page.status_code == 200
    return page.cookies["csrftoken"].value


def test_index_links_the_enqueue_page_and_the_dashboard(client):
    page = client.get("/").content.decode()
    assert 'href="/enqueue/"' in page
    assert 'href="/djwork/"' in page


def test_the_enqueue_page_asks_for_a_login(client, db):
    response = client.get("/enqueue/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


@pytest.mark.parametrize(("job", "fields", "queue", "klass", "args"), [
    ("add", {"add-a": "2", "add-b": "3"}, "default", "example.tasks.add", [2, 3]),
    ("sleep_for", {"sleep_for-seconds": "1"}, "low", "example.tasks.sleep_for", [1]),
    ("fail", {"fail-message": "boom"}, "default", "example.tasks.fail", ["boom"]),
    ("greet", {"greet-name": "ann"}, "default", "example.tasks.greet", []),
])
def test_each_form_enqueues_its_job(demo_client, raw_redis, job, fields, queue, klass, args):
    token = csrf_token(demo_client)
    response = demo_client.post("/enqueue/", {"job": job, "csrfmiddlewaretoken": token, **fields})
    assert response.status_code == 302
    raw = raw_redis.lrange(f"queue:{queue}", 0, -1)
    assert len(raw) == 1
    payload = json.loads(raw[0])
    assert payload["class"] == klass
    assert payload["args"] == args
    assert payload["jid"] in demo_client.get("/enqueue/").content.decode()


def test_the_django_tasks_form_enqueues_through_the_backend(demo_client, raw_redis):
    token = csrf_token(demo_client)
    demo_client.post("/enqueue/", {"job": "multiply", "csrfmiddlewaretoken": token,
                                   "multiply-a": "6", "multiply-b": "7"})
    assert raw_redis.llen("queue:default") == 1


def test_a_post_without_the_csrf_token_enqueues_nothing(demo_client, raw_redis):
    response = demo_client.post("/enqueue/", {"job": "add", "add-a": "1", "add-b": "2"})
    assert response.status_code == 403
    assert raw_redis.llen("queue:default") == 0


def test_bad_input_is_named_and_enqueues_nothing(demo_client, raw_redis):
    token = csrf_token(demo_client)
    response = demo_client.post("/enqueue/", {"job": "sleep_for", "csrfmiddlewaretoken": token,
                                              "sleep_for-seconds": "3600"})
    assert response.status_code == 200
    assert "less than or equal to 60" in response.content.decode()
    assert raw_redis.llen("queue:low") == 0
    response = demo_client.post("/enqueue/", {"job": "nope", "csrfmiddlewaretoken": token}, follow=True)
    assert "no example job named" in response.content.decode()
