"""Ruby -> djwork: jobs written by Sidekiq's own client (Debian's ruby-sidekiq 6.4.1) run in djwork workers.

Sidekiq::Client.push / push_bulk / "at" scheduling and a Ruby stub class's
perform_async / perform_in, naming the djwork job by dotted path or by an
ALIASES entry; a failing job goes through `retry` with every field Sidekiq's
retry page needs, comes back through djwork's poller, and ends in `dead`,
with Sidekiq's API and Web UI reading each stage.
"""

from __future__ import annotations

import base64
import json
import time
import zlib

import pytest

from tests.helpers_worker import decode, wait_until
from tests.interop import jobs
from tests.interop.helpers import move_due, ruby

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("sidekiq_version")]

RECORD = "tests.interop.jobs.record"
ALIASES = {"InteropAliasJob": RECORD, "Billing::ChargeCard": RECORD}


def counts(redis, key=jobs.COUNTS) -> dict[str, int]:
    return {decode(k): int(v) for k, v in redis.hgetall(key).items()}


def retry_entries(redis, key="retry") -> list[tuple[dict, float]]:
    return [(json.loads(member), score) for member, score in redis.zrange(key, 0, -1, withscores=True)]


def test_sidekiq_client_jobs_run_in_djwork(workers, raw_redis, redis_url):
    worker = workers.start("-c", "5", "-q", "interop", "-q", "default", overrides={"ALIASES": ALIASES})
    worker.identity(raw_redis)
    at = time.time() + 1.5
    odd = ["ünïcødé ✓", 1, -2**53, 1.5, None, True, {"nested": [1, {"x": "y"}]}, []]
    jids = ruby(redis_url, "client.rb", stdin=[
        {"op": "push", "item": {"class": RECORD, "args": ["push", *odd], "queue": "interop"}},
        {"op": "push_bulk", "item": {"class": RECORD, "args": [["bulk-0"], ["bulk-1"], ["bulk-2"]],
                                     "queue": "interop"}},
        {"op": "push", "item": {"class": RECORD, "args": ["at"], "queue": "interop", "at": at}},
        {"op": "perform_async", "args": ["alias", 7]},
        {"op": "perform_async", "args": ["alias-default"], "options": {"queue": "default"}},
        {"op": "perform_in", "seconds": 1, "args": ["alias-in"]},
        {"op": "push", "item": {"class": "Billing::ChargeCard", "args": ["namespaced"]}},
    ])
    assert all(isinstance(jid, str) and len(jid) == 24 for jid in [jids[0], *jids[1], *jids[2:]])
    keys = ["push", "bulk-0", "bulk-1", "bulk-2", "at", "alias", "alias-default", "alias-in", "namespaced"]
    wait_until(lambda: set(counts(raw_redis)) == set(keys), 15, "every Ruby-pushed job to run in djwork")
    time.sleep(1.0)  # anything that would run twice has had the time to
    assert counts(raw_redis) == dict.fromkeys(keys, 1)

    ran = {fact["key"]: fact for fact in jobs.facts(raw_redis)}
    push = ran["push"]
    assert push["args"] == ["push", *odd]  # compact Ruby JSON, UTF-8, big ints, nesting: all unchanged
    assert push["kwargs"] == {}
    assert push["jid"] == jids[0]
    assert push["queue"] == "interop"
    assert push["retries"] == 0
    payload = push["payload"]
    assert payload["class"] == RECORD and payload["retry"] is True
    assert isinstance(payload["created_at"], float) and isinstance(payload["enqueued_at"], float)
    assert [ran[f"bulk-{n}"]["jid"] for n in range(3)] == jids[1]
    assert ran["at"]["jid"] == jids[2]
    assert ran["at"]["time"] >= at - 0.05, "a job scheduled with 'at' ran early"
    assert ran["alias"]["args"] == ["alias", 7] and ran["alias"]["payload"]["class"] == "InteropAliasJob"
    assert ran["alias"]["queue"] == "interop"  # the Ruby class's sidekiq_options
    assert ran["alias-default"]["queue"] == "default"
    assert ran["alias-in"]["jid"] == jids[5]
    assert ran["namespaced"]["queue"] == "default" and ran["namespaced"]["payload"]["class"] == "Billing::ChargeCard"

    # The heartbeat flushed djwork's counters where Sidekiq's Stats reads them.
    wait_until(lambda: int(raw_redis.get("stat:processed") or 0) >= len(keys), 5, "stat:processed to grow")
    stats = ruby(redis_url, "api_read.rb")["stats"]
    assert stats["processed"] >= len(keys) and stats["failed"] == 0
    assert raw_redis.zcard("schedule") == 0 and raw_redis.zcard("retry") == 0 and raw_redis.zcard("dead") == 0


def test_failing_job_retries_through_djwork_then_dies(workers, raw_redis, redis_url):
    worker = workers.start("-c", "2", "-q", "interop")
    worker.identity(raw_redis)
    (jid,) = ruby(redis_url, "client.rb", stdin=[
        {"op": "push", "item": {"class": "tests.interop.jobs.fail", "args": ["f1"], "queue": "interop",
                                "retry": 2, "backtrace": True, "tags": ["interop", "ruby"]}},
    ])

    # First failure: retry_count 0, failed_at, Sidekiq's backoff (15 + rand(10) s).
    ((job, score),) = wait_until(lambda: retry_entries(raw_redis), 10, "the first failure in `retry`")
    assert job["jid"] == jid and job["class"] == "tests.interop.jobs.fail" and job["queue"] == "interop"
    assert job["error_class"] == "RuntimeError" and job["error_message"] == "interop fail f1"
    assert job["retry_count"] == 0 and isinstance(job["failed_at"], float) and "retried_at" not in job
    assert 15 <= score - job["failed_at"] <= 25
    lines = json.loads(zlib.decompress(base64.b64decode(job["error_backtrace"], validate=True)))
    assert any("interop fail f1" in line for line in lines)
    seen = ruby(redis_url, "api_read.rb")
    (entry,) = seen["retry"]
    assert entry["jid"] == jid and entry["error_class"] == "RuntimeError" and entry["retry_count"] == 0
    assert entry["tags"] == ["interop", "ruby"] and entry["error"] is True
    assert any("interop fail f1" in line for line in entry["error_backtrace"])
    assert abs(entry["score"] - score) < 1e-3
    check_pages(redis_url, "/retries/", jid, "interop fail f1")

    # Due now: djwork's poller brings it back, it fails again: retry_count 1, retried_at.
    move_due(raw_redis)
    wait_until(lambda: [j for j, _ in retry_entries(raw_redis) if j.get("retry_count") == 1], 10,
               "the second failure in `retry`")
    ((job, score),) = retry_entries(raw_redis)
    assert job["jid"] == jid and isinstance(job["retried_at"], float) and job["failed_at"] < job["retried_at"]
    assert 16 <= score - job["retried_at"] <= 35
    check_pages(redis_url, "/retries/", jid, "interop fail f1")

    # Third run fails with no retries left (retry: 2): `dead`, scored with the time of death.
    move_due(raw_redis)
    wait_until(lambda: raw_redis.zcard("dead") == 1, 10, "the job to die")
    assert raw_redis.zcard("retry") == 0
    ((job, score),) = retry_entries(raw_redis, "dead")
    assert job["jid"] == jid and job["retry_count"] == 2 and abs(score - time.time()) < 10
    assert int(raw_redis.hget(jobs.FAILS, "f1")) == 3
    seen = ruby(redis_url, "api_read.rb")
    (entry,) = seen["dead"]
    assert entry["jid"] == jid and entry["retry_count"] == 2 and entry["error_message"] == "interop fail f1"
    check_pages(redis_url, "/morgue/", jid, "interop fail f1")
    wait_until(lambda: int(raw_redis.get("stat:failed") or 0) == 3, 5, "stat:failed = 3")
    assert int(raw_redis.get("stat:processed")) == 3  # Sidekiq counts failures as processed too

    # Sidekiq's "Retry All" on djwork's dead job: Ruby decrements retry_count and pushes it back,
    # djwork runs it a fourth time, and with one retry "left" it fails once more into `dead`.
    # Ruby loops while `dead` is not empty, so when djwork fails the job back in before Ruby
    # looks again, Ruby pushes it again (seen: 7 pushes): djwork runs each push exactly once.
    (pushed,) = ruby(redis_url, "client.rb", stdin=[{"op": "retry_all", "set": "dead"}])
    assert pushed >= 1
    wait_until(lambda: int(raw_redis.hget(jobs.FAILS, "f1")) == 3 + pushed and raw_redis.zcard("dead") == 1, 10,
               "the retried job to fail back into `dead`")
    time.sleep(0.5)
    assert int(raw_redis.hget(jobs.FAILS, "f1")) == 3 + pushed
    ((job, _score),) = retry_entries(raw_redis, "dead")
    assert job["jid"] == jid and job["retry_count"] == 2


def check_pages(redis_url: str, prefix: str, jid: str, text: str) -> None:
    """Every Sidekiq::Web page answers (detail pages included); the detail page for ``jid`` shows ``text``."""
    pages = ruby(redis_url, "web.rb", "check")["pages"]
    bad = {path: page["status"] for path, page in pages.items()
           if page["status"] != (302 if path == "/dashboard/stats" else 200)}
    assert not bad, f"Sidekiq::Web pages not 200: {bad}\n" + "\n".join(
        pages[path]["body"][:3000] for path in bad)
    details = [path for path in pages if path.startswith(prefix) and path.endswith(jid)]
    assert len(details) == 1, sorted(pages)
    body = pages[details[0]]["body"]
    assert jid in body and text in body
