"""``argsrepr``/``kwargsrepr`` and message properties on the wire, and the reprs on the dashboard and in the
CLI in place of the arguments they hide (docs/celery.md, Options). No worker: the jobs are read where they wait."""

from __future__ import annotations

import json
import sys
import time

from django.urls import reverse

from djwork.jobs import argument_reprs, message_properties
from tests import celery_demo_jobs as demo
from tests.browser import seed
from tests.support.cli import cli

SECRET = "sk_live_do_not_show"
SHOWN = "<script>alert(1)</script>"  # a repr is text the caller wrote: the pages escape it


def queued(raw_redis) -> list[dict]:
    return [json.loads(raw) for raw in raw_redis.lrange("queue:default", 0, -1)]


def test_the_reprs_and_properties_ride_in_the_payload_from_every_verb(raw_redis):
    demo.add.apply_async((SECRET, "a"), argsrepr="(<card>, 'a')", kwargsrepr="{}", app_id="billing")
    demo.add.set(argsrepr="(<card>,)").delay(SECRET, "b")
    demo.add.s(SECRET, "c").set(kwargsrepr="{'pin': '****'}", reply_to="replies").delay()
    demo.add.delay(1, 2)
    first, second, third, plain = queued(raw_redis)[::-1]
    assert (first["argsrepr"], first["kwargsrepr"], first["properties"]) == ("(<card>, 'a')", "{}",
                                                                            {"app_id": "billing"})
    assert first["args"] == [SECRET, "a"]  # the job still gets its real arguments
    assert second["argsrepr"] == "(<card>,)" and "kwargsrepr" not in second
    assert third["kwargsrepr"] == "{'pin': '****'}" and third["properties"] == {"reply_to": "replies"}
    assert not {"argsrepr", "kwargsrepr", "properties"} & set(plain)


def test_a_signature_takes_the_options_a_call_takes():
    # The canvas names them itself (it imports no job module): a name added on one side only fails here.
    signature_options = sys.modules["djwork.canvas.signature"].ENQUEUE_OPTIONS
    assert {*argument_reprs.NAMES, *message_properties.NAMES} <= set(signature_options)


def test_the_dashboard_shows_the_reprs_escaped_and_never_the_arguments(raw_redis, admin_client):
    ref = demo.add.apply_async((SECRET, "x"), argsrepr=SHOWN)
    page = admin_client.get(reverse("djwork_dashboard:queue", args=["default"])).content
    assert b"&lt;script&gt;alert(1)&lt;/script&gt;" in page and b"<script>alert(1)" not in page
    assert SECRET.encode() not in page and ref.id.encode() in page

    dead = seed.failed(queued(raw_redis)[0], count=25)
    score = time.time() - 10
    seed.zadd(raw_redis, "dead", dead, score)
    listing = admin_client.get(reverse("djwork_dashboard:set", args=["dead"])).content
    assert b"&lt;script&gt;" in listing and SECRET.encode() not in listing and ref.id.encode() in listing
    dead_set = reverse("djwork_dashboard:set", args=["dead"])
    # A search matches what the page shows, not the arguments hidden behind it.
    assert ref.id.encode() in admin_client.get(dead_set, {"q": "alert(1)"}).content
    assert ref.id.encode() not in admin_client.get(dead_set, {"q": SECRET}).content
    detail = admin_client.get(reverse("djwork_dashboard:set_entry", args=["dead", f"{score!r}-{ref.id}"]))
    assert detail.status_code == 200
    assert b"&lt;script&gt;alert(1)&lt;/script&gt;" in detail.content  # the Arguments line and the payload
    assert SECRET.encode() not in detail.content and b"<script>alert(1)" not in detail.content


def test_the_cli_shows_the_reprs_and_never_the_arguments(raw_redis):
    ref = demo.add.apply_async((SECRET, "x"), argsrepr="(<card>, 'x')", kwargsrepr="{}")
    text = cli("job", ref.id)
    assert text.code == 0 and "args     (<card>, 'x'), {}" in text.out and SECRET not in text.out
    found = cli("job", ref.id, "--json").object()
    assert found["args"] == ["(<card>, 'x')", "{}"]
    assert found["payload"]["args"] == "(<card>, 'x')" and found["payload"]["jid"] == ref.id
    assert SECRET not in json.dumps(found)
    plain = demo.add.delay(SECRET, "y")
    assert SECRET in cli("job", plain.id).out  # without reprs the arguments are shown as they are
