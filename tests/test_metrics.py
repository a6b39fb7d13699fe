"""Execution metrics in Sidekiq 8's layout, queue samples, deploy marks (docs/metrics.md).

``sidekiq_top_jobs`` below is a line-by-line Python reading of Sidekiq 8's
``Sidekiq::Metrics::Query#top_jobs`` (docs/metrics.md, Reading): it builds
its key names itself, from Sidekiq's strftime patterns, not from
djwork/redis/keys.py, so a key djwork names differently from Sidekiq shows up as
a mismatch.
"""

from __future__ import annotations

import datetime as dt
import signal

import orjson
import pytest

from djwork.api import Metrics, mark_deploy
from djwork.metrics.layout import BUCKET_BOUNDS, HISTOGRAM_READ, bucket_index
from djwork.worker import queue_samples
from djwork.worker.metrics import ExecutionMetrics, queue_writes
from tests import worker_jobs
from tests.helpers_worker import counts, wait_until

NOW = dt.datetime(2026, 2, 4, 8, 3, 30, tzinfo=dt.UTC)


def sidekiq_top_jobs(conn, now: dt.datetime, minutes: int | None = None, hours: int | None = None) -> dict:
    """Query#top_jobs: walk back from ``now`` one stride at a time, HGETALL each key, add up per class."""
    if not minutes and not hours:
        minutes = 60
    granularity = "hourly" if hours else "minutely"
    count = hours * 6 if hours else minutes
    stride = 600 if granularity == "hourly" else 60

    def keyproc(time: dt.datetime) -> str:
        if granularity == "minutely":  # time.strftime("j|%y%m%d|%-H:%M")
            return f"j|{time.strftime('%y%m%d')}|{time.hour}:{time.strftime('%M')}"
        m = time.minute  # mins = (m < 10) ? "0" : m.to_s[0]
        mins = "0" if m < 10 else str(m)[0]
        return f"j|{time.strftime('%y%m%d')}|{time.hour}:{mins}"

    time = now
    pipe = conn.pipeline(transaction=False)
    for _ in range(count):
        pipe.hgetall(keyproc(time))
        time -= dt.timedelta(seconds=stride)
    totals: dict[str, dict[str, int]] = {}
    for reply in pipe.execute():
        for key, value in reply.items():
            kls, metric = key.decode().split("|")
            totals.setdefault(kls, {"p": 0, "f": 0, "ms": 0})[metric] += int(value)
    return totals


def api_totals(result) -> dict:
    return {name: {"p": item.processed, "f": item.failed, "ms": item.totals.get("ms", 0)}
            for name, item in result.classes.items()}


def test_a_window_lands_in_sidekiqs_keys_with_their_ttls_and_histogram(raw_redis):
    recorder = ExecutionMetrics()
    for ms in (0.4, 19.9, 20.0, 280.0, 400_000.0):
        recorder.record("App::Fast", ms, False)
    recorder.record("App::Fast", 5000.0, True)  # a failure: counted, its time left out
    recorder.record("App::Other", 12.0, False)
    recorder.record(["not", "a", "name"], 1.0, True)  # a hand-written payload's "wrapped": never breaks the beat
    pipe = raw_redis.pipeline(transaction=False)
    queue_writes(pipe, recorder.take(), NOW)
    pipe.execute()
    assert recorder.pending() == 0 and not recorder.take()

    minute, ten = raw_redis.hgetall("j|260204|8:03"), raw_redis.hgetall("j|260204|8:0")
    fast_ms = str(0 + 19 + 20 + 280 + 400_000).encode()
    assert minute == ten == {b"App::Fast|p": b"6", b"App::Fast|f": b"1", b"App::Fast|ms": fast_ms,
                             b"App::Other|p": b"1", b"App::Other|ms": b"12",
                             b"['not', 'a', 'name']|p": b"1", b"['not', 'a', 'name']|f": b"1"}
    assert 8 * 3600 - 5 < raw_redis.ttl("j|260204|8:03") <= 8 * 3600
    assert 72 * 3600 - 5 < raw_redis.ttl("j|260204|8:0") <= 72 * 3600
    # h|<Class>-<day>-<hour>:<minute>, nothing padded; 0 and 19 ms in bucket 0, 20 in 1, 280 in 7, 400 s "Slow".
    counts_read = raw_redis.execute_command("BITFIELD_RO", "h|App::Fast-4-8:3", *HISTOGRAM_READ)
    assert counts_read == [2, 1, 0, 0, 0, 0, 0, 1] + [0] * 17 + [1]
    assert 8 * 3600 - 5 < raw_redis.ttl("h|App::Fast-4-8:3") <= 8 * 3600
    # Sidekiq 7's names for the same minute (its Metrics page reads only these): j|YYYYMMDD|H:M, <Class>-DD-HH:M.
    assert raw_redis.hgetall("j|20260204|8:3") == minute
    assert 8 * 3600 - 5 < raw_redis.ttl("j|20260204|8:3") <= 8 * 3600
    assert raw_redis.execute_command("BITFIELD_RO", "App::Fast-04-08:3", *HISTOGRAM_READ) == counts_read
    assert 8 * 3600 - 5 < raw_redis.ttl("App::Fast-04-08:3") <= 8 * 3600
    assert [bucket_index(ms) for ms in (19, 20, 334_999, 335_000)] == [0, 1, 24, 25]
    assert len(BUCKET_BOUNDS) == 25


def test_limiter_reschedules_are_their_own_outcome_never_runs_or_run_time(raw_redis, db, django_user_model):
    # Issue #31, item 9: counted as successes with their wait as time, 4 limited jobs showed
    # djwork_jobs_total{outcome="success"} 10 and an average that was the limiter's wait.
    from django.contrib.auth.models import Permission
    from django.test import Client

    recorder = ExecutionMetrics()
    for _ in range(3):
        recorder.record_rescheduled("App::Limited")
    recorder.record("App::Limited", 50.0, False)
    recorder.record_rescheduled("App::OnlyRefused")
    pipe = raw_redis.pipeline(transaction=False)
    queue_writes(pipe, recorder.take(), NOW)
    pipe.execute()

    assert raw_redis.hgetall("j|260204|8:03") == {b"App::Limited|p": b"1", b"App::Limited|ms": b"50",
                                                  b"App::Limited|r": b"3", b"App::OnlyRefused|r": b"1"}
    assert sum(raw_redis.execute_command("BITFIELD_RO", "h|App::Limited-4-8:3", *HISTOGRAM_READ)) == 1  # one run
    item = Metrics(now=NOW).for_class("App::Limited", "1h").classes["App::Limited"]
    assert (item.processed, item.succeeded, item.rescheduled, item.average_ms) == (1, 1, 3, 50.0)
    by_class = Metrics(now=NOW).by_class("1h").classes
    assert (by_class["App::OnlyRefused"].processed, by_class["App::OnlyRefused"].rescheduled) == (0, 1)

    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_dashboard"))
    staff_client = Client()
    staff_client.force_login(viewer)
    _status, samples = scrape(staff_client)
    outcomes = {outcome: samples[("djwork_jobs_total", (("class", "App::Limited"), ("outcome", outcome)))]
                for outcome in ("success", "failure", "rescheduled")}
    assert outcomes == {"success": 1, "failure": 0, "rescheduled": 3}
    assert samples[("djwork_job_duration_seconds_sum", (("class", "App::Limited"),))] == pytest.approx(0.05)


def test_histogram_counters_saturate_at_65535(raw_redis):
    recorder = ExecutionMetrics()
    for _ in range(3):
        recorder.record("Busy", 1.0, False)
    raw_redis.execute_command("BITFIELD", "h|Busy-4-8:3", "SET", "u16", "#0", 65534)
    pipe = raw_redis.pipeline(transaction=False)
    queue_writes(pipe, recorder.take(), NOW)
    pipe.execute()
    assert raw_redis.execute_command("BITFIELD_RO", "h|Busy-4-8:3", "GET", "u16", "#0") == [65535]


def test_deploy_marks_one_per_label_per_minute_and_read_back(raw_redis):
    at = dt.datetime(2026, 2, 4, 7, 45, 59, tzinfo=dt.UTC)
    assert mark_deploy("v1.2 shipped", at) is True
    assert mark_deploy("v1.2 shipped", at + dt.timedelta(seconds=30)) is False  # another process of the same deploy
    assert raw_redis.hgetall("20260204-marks") == {b"2026-02-04T07:45:00Z": b"v1.2 shipped"}
    assert 0 < raw_redis.ttl("deploylock-v1.2 shipped") <= 60
    assert raw_redis.ttl("20260204-marks") > 89 * 24 * 3600
    (mark,) = Metrics(NOW).by_class("1h").marks
    assert (mark.label, mark.bucket) == ("v1.2 shipped", "2026-02-04T07:45:00Z")
    assert Metrics(NOW).marks(NOW - dt.timedelta(minutes=10), NOW) == []


def test_queue_samples_show_a_backlog_building_and_draining(raw_redis):
    def push_old(count: int, age: float) -> None:
        enqueued = dt.datetime.now(dt.UTC).timestamp() - age
        for number in range(count):
            raw_redis.lpush("queue:lat", orjson.dumps({"class": "X", "jid": f"j{number}", "args": [],
                                                      "enqueued_at": enqueued}))
        raw_redis.sadd("queues", "lat")

    start = dt.datetime.now(dt.UTC).replace(second=5, microsecond=0) - dt.timedelta(minutes=5)
    push_old(10, 30)
    queue_samples.sample_once(start)
    raw_redis.delete("queue:lat")
    push_old(40, 150)  # the oldest job now waits 150 s: the backlog grew
    queue_samples.sample_once(start + dt.timedelta(minutes=1))
    queue_samples.sample_once(start + dt.timedelta(minutes=1, seconds=30))
    raw_redis.delete("queue:lat")  # drained
    queue_samples.sample_once(start + dt.timedelta(minutes=2))
    raw_redis.zadd("retry", {"a": 1, "b": 2})
    queue_samples.sample_once(start + dt.timedelta(minutes=3))

    series = Metrics(start + dt.timedelta(minutes=3, seconds=10)).by_queue("1h")
    points = series.queues["lat"]
    assert [point.size for point in points] == [10, 40, 0, 0]
    assert 29 <= points[0].latency < 90 and 149 <= points[1].latency < 210
    assert points[2].latency == points[3].latency == 0
    assert [value for _bucket, value in series.totals["retry"]] == [0, 0, 0, 2]
    assert 8 * 3600 - 5 < raw_redis.ttl(f"djwork:qm|{start:%y%m%d}|{start.hour}:{start:%M}") <= 8 * 3600
    # The 10-minute rollup averages the same samples.
    rolled = Metrics(start + dt.timedelta(minutes=3)).by_queue("24h").queues["lat"]
    assert sum(point.size for point in rolled) > 0


def test_three_classes_read_the_same_through_sidekiqs_query_and_the_api(workers, raw_redis):
    fast, slow, failing = 1_958, 12, 30  # 2,000 jobs of three classes: one slow, one failing
    worker_jobs.record.delay_many([("fast",)] * fast)
    for _ in range(slow):
        worker_jobs.slow.delay("slow", 0.12)
    for number in range(failing):
        worker_jobs.always_fail.delay(f"fail-{number}")
    worker = workers.start("-c", "5", "-q", "default")
    wait_until(lambda: counts(raw_redis).get("fast") == fast and counts(raw_redis).get("slow") == slow
               and raw_redis.zcard("retry") == failing, 60, "every job to run once")
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(40) == 0  # the final flush runs at shutdown

    now = dt.datetime.now(dt.UTC)
    expected = sidekiq_top_jobs(raw_redis, now)
    names = {"fast": "tests.worker_jobs.record", "slow": "tests.worker_jobs.slow",
             "failing": "tests.worker_jobs.always_fail"}
    assert expected[names["fast"]]["p"] == fast and expected[names["fast"]]["f"] == 0
    assert expected[names["slow"]]["p"] == slow and expected[names["slow"]]["ms"] >= slow * 120
    assert expected[names["failing"]] == {"p": failing, "f": failing, "ms": 0}
    assert api_totals(Metrics(now).by_class("1h")) == expected
    assert api_totals(Metrics(now).by_class("72h")) == sidekiq_top_jobs(raw_redis, now, hours=72) == expected

    detail = Metrics(now).for_class(names["slow"]).classes[names["slow"]]
    assert sum(detail.histogram) == slow and detail.average_ms >= 120
    percentiles = detail.percentiles()
    assert percentiles["p50"] >= 150 and percentiles["p99"] >= percentiles["p50"]  # 120 ms runs: the 150 ms bucket
    assert Metrics(now).for_class(names["failing"]).classes[names["failing"]].histogram == [0] * 26


def scrape(client, **headers) -> tuple[int, dict]:
    from prometheus_client.parser import text_string_to_metric_families

    response = client.get("/djwork/metrics", **headers)
    if response.status_code != 200:
        return response.status_code, {}
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return 200, samples


def test_prometheus_numbers_match_the_read_api_and_anonymous_is_refused(raw_redis, db, django_user_model, settings):
    from django.contrib.auth.models import Permission
    from django.test import Client

    from djwork import api

    recorder = ExecutionMetrics()
    for ms in (5.0, 25.0, 25.0, 700.0):
        recorder.record("App::Mixed", ms, False)
    recorder.record("App::Mixed", 3.0, True)
    recorder.record("App::Broken", 1.0, True)
    pipe = raw_redis.pipeline(transaction=False)
    queue_writes(pipe, recorder.take(), dt.datetime.now(dt.UTC))
    pipe.execute()
    enqueued = dt.datetime.now(dt.UTC).timestamp() - 42
    raw_redis.lpush("queue:mail", orjson.dumps({"class": "X", "jid": "a", "args": [], "enqueued_at": enqueued}))
    raw_redis.lpush("queue:mail", orjson.dumps({"class": "X", "jid": "b", "args": [], "enqueued_at": enqueued + 40}))
    raw_redis.sadd("queues", "mail")
    raw_redis.zadd("dead", {"d1": 1})
    raw_redis.zadd("retry", {"r1": 1, "r2": 2})
    from djwork.limiter import window

    window("partner-api", 10, 60).acquire()
    window("partner-api", 10, 60).acquire()

    anonymous = Client()
    assert scrape(anonymous)[0] == 401
    settings.DJWORK = {**settings.DJWORK, "METRICS_TOKEN": "s3cret"}
    assert scrape(anonymous, HTTP_AUTHORIZATION="Bearer wrong")[0] == 401
    status, by_token = scrape(anonymous, HTTP_AUTHORIZATION="Bearer s3cret")
    assert status == 200
    settings.DJWORK = {key: value for key, value in settings.DJWORK.items() if key != "METRICS_TOKEN"}
    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_dashboard"))
    staff_client = Client()
    staff_client.force_login(viewer)
    status, samples = scrape(staff_client)
    assert status == 200
    assert set(samples) == set(by_token) and samples[("djwork_dead_size", ())] == by_token[("djwork_dead_size", ())]

    result = Metrics().by_class("1h")
    for name, item in result.classes.items():
        assert samples[("djwork_jobs_total", (("class", name), ("outcome", "success")))] == item.succeeded
        assert samples[("djwork_jobs_total", (("class", name), ("outcome", "failure")))] == item.failed
    mixed = result.classes["App::Mixed"]
    assert samples[("djwork_job_duration_seconds_count", (("class", "App::Mixed"),))] == mixed.succeeded == 4
    assert samples[("djwork_job_duration_seconds_sum", (("class", "App::Mixed"),))] == pytest.approx(mixed.seconds)
    assert samples[("djwork_job_duration_seconds_bucket", (("class", "App::Mixed"), ("le", "0.02")))] == 1
    assert samples[("djwork_job_duration_seconds_bucket", (("class", "App::Mixed"), ("le", "0.03")))] == 3
    assert samples[("djwork_job_duration_seconds_bucket", (("class", "App::Mixed"), ("le", "+Inf")))] == 4
    (mail,) = [queue for queue in api.Queue.all() if queue.name == "mail"]
    assert samples[("djwork_queue_size", (("queue", "mail"),))] == mail.size == 2
    assert samples[("djwork_queue_latency_seconds", (("queue", "mail"),))] == pytest.approx(mail.latency, abs=2)
    assert 41 <= samples[("djwork_queue_latency_seconds", (("queue", "mail"),))] < 60
    stats = api.Stats.fetch()
    assert (samples[("djwork_retry_size", ())], samples[("djwork_dead_size", ())]) == (stats.retries, stats.dead)
    assert (stats.retries, stats.dead) == (2, 1)
    assert samples[("djwork_scheduled_size", ())] == 0 and samples[("djwork_processes", ())] == 0
    (limiter,) = api.Limiters().all()
    assert samples[("djwork_limiter_used", (("kind", "window"), ("limiter", "partner-api")))] == limiter.used == 2
    assert samples[("djwork_limiter_admissions_total", (("how", "immediate"), ("limiter", "partner-api")))] == 2


def test_metrics_false_builds_no_recorder_and_no_sampler_thread(raw_redis):
    from djwork.settings.conf import build_config
    from djwork.worker.launcher import Launcher

    off = Launcher(build_config({"METRICS": False}))
    assert off.metrics is None and off.heartbeat.metrics is None
    off.queue_sampler.start()
    assert not off.queue_sampler.running
    on = Launcher(build_config({}))
    assert isinstance(on.metrics, ExecutionMetrics) and on.heartbeat.metrics is on.metrics


def test_periodic_series_carry_the_entries_counters(raw_redis):
    from djwork.api import Periodic
    from djwork.metrics.prometheus import periodic_families
    from djwork.settings.conf import build_config
    from tests.support.periodic import BASE, HOUR, entry, ticker_at

    hourly = entry(name="hourly", args=["h"])
    ticker_at(raw_redis, BASE + 0.25 * HOUR, hourly).run_once()
    ticker_at(raw_redis, BASE + 3.01 * HOUR, hourly).run_once()  # 3 h down: fires 03:00, 2 slots missed
    seconds, micros = raw_redis.time()
    (listed,) = Periodic(build_config({"PERIODIC": [hourly], "TEST_CLOCK": {
        "origin": seconds + micros / 1e6, "start": BASE + 3.5 * HOUR}})).entries()
    samples = {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
               for family in periodic_families([listed]) for sample in family.samples}
    assert samples[("djwork_periodic_runs_total", (("entry", "hourly"),))] == listed.counters["fired"] == 1
    assert samples[("djwork_periodic_skipped_total", (("entry", "hourly"), ("reason", "missed")))] == listed.missed == 2
    assert samples[("djwork_periodic_paused", (("entry", "hourly"),))] == 0
