"""The cluster-health strip every dashboard page shows (docs/dashboard.md, Cluster health)."""

from __future__ import annotations

import re
import signal
import time

from django.urls import reverse

from tests.browser import seed
from tests.helpers_worker import wait_until

ALL_PAGES = ["overview", "busy", "queues", "history", "limits", "locks", "periodic"]


def strip(response) -> str:
    assert response.status_code == 200
    html = response.content.decode()
    match = re.search(r'<section class="health[^"]*" id="health".*?</section>', html, re.S)
    assert match, "no health strip on the page"
    return match.group(0)


def counts(html: str) -> tuple[int, int]:
    running = re.search(r'data-health="running"><strong>(\d+)</strong>', html)
    quiet = re.search(r'data-health="quiet"><strong>(\d+)</strong>', html)
    return int(running.group(1)), int(quiet.group(1))


def overview(client) -> str:
    return strip(client.get(reverse("djwork_dashboard:overview")))


def test_strip_follows_a_real_worker_through_quiet_and_stop(admin_client, workers, raw_redis):
    worker = workers.start("-q", "default", "-c", "1", overrides={"HEARTBEAT_INTERVAL": 2, "ORPHAN_THRESHOLD": 10})
    identity = worker.identity(raw_redis)
    html = overview(admin_client)
    assert counts(html) == (1, 0) and "data-warning" not in html
    admin_client.post(reverse("djwork_dashboard:busy_action"), {"action": "quiet", "identity": identity})
    seen: list[tuple[int, bytes | None, bytes | None]] = []  # (signals waiting, beat stamp, quiet) per look

    def quiet_reported() -> bool:
        pending, beat, quiet = (raw_redis.pipeline(transaction=True).llen(f"{identity}-signals")
                                .hget(identity, "beat").hget(identity, "quiet").execute())
        seen.append((pending, beat, quiet))
        return quiet == b"true" and not pending

    wait_until(quiet_reported, 20, "the worker to report quiet and take the signal")
    # quiet=true came with the beat that took the signal, not one interval later: the beat stamp first read
    # with quiet=true is still the stamp once the signal is gone (the beat publishes quiet, then pops).
    first_quiet = next(beat for _pending, beat, quiet in seen if quiet == b"true")
    assert first_quiet == seen[-1][1]
    # quiet=true is published as the signal is taken, while the takers are still being recalled: one still
    # blocked in BLMOVE would take a job pushed now and give it back a moment later (not run it: the last
    # assertion counts all 3 still enqueued after the stop). Push once no connection is blocked in Redis.
    wait_until(lambda: not any("b" in client["flags"] for client in raw_redis.client_list()), 20,
               "the quiet worker's queue takers to leave Redis")
    for n in range(3):
        seed.push(raw_redis, seed.job(klass="tests.worker_jobs.record", args=[f"waiting-{n}"]))
    html = overview(admin_client)
    assert counts(html) == (0, 1)
    assert 'data-warning="no-listener" data-queue="default"' in html
    assert "Queue default has 3 jobs but every process is quiet or asked to quiet." in html
    worker.send(signal.SIGTERM)
    worker.wait_exit(30)
    html = overview(admin_client)
    assert counts(html) == (0, 0)
    assert "No process is running: nothing takes jobs (3 enqueued)." in html


def test_every_page_carries_the_strip(admin_client, raw_redis):
    seed.process(raw_redis, "web.1:1:a", queues=["default"])
    for name in ALL_PAGES:
        assert counts(strip(admin_client.get(reverse(f"djwork_dashboard:{name}")))) == (1, 0), name


def test_queue_nobody_listens_to_latency_and_late_beat(admin_client, raw_redis, settings):
    settings.DJWORK = {**settings.DJWORK, "DASHBOARD_LATENCY_WARNING": 60, "HEARTBEAT_INTERVAL": 5}
    seed.process(raw_redis, "web.1:1:a", queues=["default"])
    seeded_at = time.time()
    seed.process(raw_redis, "web.2:2:b", queues=["default"], extra_hash={"beat": repr(seeded_at - 30)})
    seed.push(raw_redis, seed.job(queue="mail", enqueued_at=time.time() - 400), queue="mail")
    seed.push(raw_redis, seed.job(queue="default", enqueued_at=time.time() - 30))
    seed.push(raw_redis, seed.job(queue="reports", enqueued_at=time.time() - 10), queue="reports")
    raw_redis.sadd("paused", "reports")  # paused on purpose: not a "nobody listens" warning
    html = overview(admin_client)
    rendered_within = time.time() - seeded_at
    assert "Queue mail has 1 job but no running process listens to it." in html
    assert 'data-warning="latency" data-queue="mail"' in html
    assert "the oldest job has waited 6m 4" in html and "(warning above 1m 00s)" in html
    assert 'data-queue="default"' not in html and 'data-queue="reports"' not in html
    # The beat's age is read at render time: 30 s plus however long seeding and rendering took (under load, 31).
    late = re.search(r"Process web\.2:2:b last beat (\d+)s ago \(expected every 5s\)\.", html)
    assert late, html
    assert 30 <= int(late.group(1)) <= 30 + rendered_within + 0.5  # shown rounded to the second
    assert "web.1:1:a last beat" not in html


def test_a_requested_quiet_no_longer_counts_as_listening(admin_client, raw_redis):
    seed.process(raw_redis, "web.1:1:a", queues=["default"])
    seed.push(raw_redis, seed.job())
    assert "data-warning" not in overview(admin_client)
    admin_client.post(reverse("djwork_dashboard:busy_action"), {"action": "quiet", "identity": "web.1:1:a"})
    assert "Queue default has 1 job but every process is quiet or asked to quiet." in overview(admin_client)


def test_busy_shows_a_requested_quiet_or_stop_at_once(admin_client, raw_redis):
    seed.process(raw_redis, "web.1:1:a", queues=["default"])  # no heartbeat: the signal stays queued
    busy = reverse("djwork_dashboard:busy")
    response = admin_client.post(reverse("djwork_dashboard:busy_action"),
                                 {"action": "quiet", "identity": "web.1:1:a", "next": busy}, follow=True)
    html = response.content.decode()
    assert "Quiet requested for web.1:1:a: the signal is queued" in html
    row = re.search(r'<tr data-identity="web.1:1:a".*?</tr>', html, re.S).group(0)
    assert "quiet requested" in row and 'value="quiet"' not in row and 'value="stop"' in row
    admin_client.post(reverse("djwork_dashboard:busy_action"), {"action": "stop", "identity": "web.1:1:a"})
    row = re.search(r'<tr data-identity="web.1:1:a".*?</tr>', admin_client.get(busy).content.decode(), re.S)
    assert "stop requested" in row.group(0)
    assert 'data-refresh="5"' in html and "data-refresh-toggle" in html


def test_the_strip_counts_processes_as_the_busy_rows_show_them(admin_client, raw_redis):
    for identity in ("web.1:1:a", "web.2:2:b", "web.3:3:c"):
        seed.process(raw_redis, identity, queues=["default"])  # no heartbeat: a signal stays queued
    for identity, action in (("web.1:1:a", "quiet"), ("web.2:2:b", "stop")):
        admin_client.post(reverse("djwork_dashboard:busy_action"), {"action": action, "identity": identity})
    busy = admin_client.get(reverse("djwork_dashboard:busy")).content.decode()
    assert "quiet requested" in busy and "stop requested" in busy
    # It said "3 running · 0 quiet" beside rows reading "quiet requested" and "stop requested".
    assert counts(strip(admin_client.get(reverse("djwork_dashboard:busy")))) == (1, 2)


def test_busy_lists_a_job_as_soon_as_its_process_took_it_not_at_the_next_beat(admin_client, workers,
                                                                              raw_redis):
    # A beat every 30 s: the work hash lists the job only then, the in-progress list at once.
    worker = workers.start("-q", "default", "-c", "2", overrides={"HEARTBEAT_INTERVAL": 30, "ORPHAN_THRESHOLD": 90})
    identity = worker.identity(raw_redis)
    wait_until(lambda: raw_redis.hget(identity, "beat"), 20, "the first beat")
    seed.push(raw_redis, seed.job(klass="tests.worker_jobs.slow", args=["busy-now", 8]))

    def taken() -> bool:
        held = raw_redis.lrange(f"djwork:inprogress:{identity}|default", 0, -1)
        return any(b"busy-now" in raw for raw in held)

    wait_until(taken, 20, "the worker to take the job")
    assert not raw_redis.hgetall(f"{identity}:work")  # the next beat is up to 30 s away
    page = admin_client.get(reverse("djwork_dashboard:busy")).content.decode()
    assert re.search(r'id="running-count">1<', page) and "busy-now" in page
    assert re.search(r'data-label="Busy">1 / 2<', page) and "1 / 2</span>" in page  # the row and "Threads busy"
    assert "taken since the process" in page
    worker.send(signal.SIGTERM)
    worker.wait_exit(30)
