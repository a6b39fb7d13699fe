"""djwork.api against real keys in the private Redis, in the shapes djwork and Ruby Sidekiq 6.4/7/8 write."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest
from redis.exceptions import RedisError

from djwork import api
from djwork.api.records import JobRecord, decode_backtrace, epoch_seconds, to_int
from tests.browser import seed

LINES = ["app/jobs/hard_job.rb:6:in `perform'", "sidekiq/processor.rb:202:in `execute_job'"]


# --- Stats ----------------------------------------------------------------------------------
def test_stats_reads_totals_sizes_busy_and_latency(raw_redis):
    raw_redis.set("stat:processed", "1234567")
    raw_redis.set("stat:failed", "12.5")  # Ruby's to_i reads 12 (docs/wire.md, Conventions)
    seed.zadd(raw_redis, "schedule", seed.job(), time.time() + 60)
    for n in range(3):
        seed.zadd(raw_redis, "retry", seed.failed(seed.job()), time.time() + n)
    seed.zadd(raw_redis, "dead", seed.failed(seed.job()), time.time())
    oldest = seed.job(enqueued_at=time.time() - 42.0)
    seed.push(raw_redis, oldest)
    seed.push(raw_redis, seed.job())
    seed.push(raw_redis, seed.job(queue="low"), queue="low")
    raw_redis.lpush("queue:hidden", "x")  # not in `queues`: invisible, as in Sidekiq (Q1)
    seed.process(raw_redis, "a:1:aa", busy_jobs=[seed.job(), seed.job()])
    seed.process(raw_redis, "b:2:bb", busy_jobs=[seed.job()])

    stats = api.Stats.fetch()
    assert (stats.processed, stats.failed) == (1234567, 12)
    assert (stats.scheduled, stats.retries, stats.dead) == (1, 3, 1)
    assert stats.queues == {"default": 2, "low": 1}
    assert stats.enqueued == 3
    assert stats.busy == 3 == stats.workers_size
    assert stats.processes == 2
    assert 41 < stats.default_queue_latency < 45
    assert stats.problems == ()
    assert stats.as_json()["busy"] == 3
    assert (stats.scheduled_size, stats.retry_size, stats.dead_size, stats.processes_size) == (1, 3, 1, 2)


def test_stats_tolerates_wrong_types_and_bad_timestamps(raw_redis):
    raw_redis.rpush("stat:processed", "1")
    raw_redis.set("retry", "not a zset")
    raw_redis.hset("queues", "a", "b")
    # An ISO string on the oldest default job makes every Sidekiq Web page 500 (docs/wire.md, Queues).
    raw_redis.lpush("queue:default", seed.dumps(seed.job(enqueued_at="2024-01-01T00:00:00Z")))
    stats = api.Stats.fetch()
    assert stats.queues == {} and any("queues" in problem for problem in stats.problems)
    raw_redis.delete("queues")
    stats = api.Stats.fetch()
    assert stats.processed == 0 and stats.retries == 0
    assert stats.default_queue_latency == 0
    assert any("stat:processed" in problem for problem in stats.problems)


def test_stats_latency_reads_sidekiq8_milliseconds(raw_redis):
    seed.push(raw_redis, seed.job(enqueued_at=int((time.time() - 30) * 1000)))
    assert 29 < api.Stats.fetch().default_queue_latency < 33


def test_stats_history_per_day(raw_redis):
    today = dt.datetime.now(dt.UTC).date()
    raw_redis.set(f"stat:processed:{today.isoformat()}", "100")
    raw_redis.set(f"stat:failed:{today.isoformat()}", "7")
    two_days_ago = today - dt.timedelta(days=2)
    raw_redis.set(f"stat:processed:{two_days_ago.isoformat()}", "5")
    history = api.Stats.history(3)
    assert [(day.date, day.processed, day.failed) for day in history] == [
        (today, 100, 7), (today - dt.timedelta(days=1), 0, 0), (two_days_ago, 5, 0)]


def test_redis_info():
    info = api.redis_info()
    assert info["redis_version"][0].isdigit()
    assert "used_memory_human" in info and "connected_clients" in info


# --- Queue ------------------------------------------------------------------------------------
def test_queue_listing_size_latency_paused(raw_redis):
    seed.push(raw_redis, seed.job(enqueued_at=time.time() - 10))
    seed.push(raw_redis, seed.job())
    seed.push(raw_redis, seed.job(queue="low"), queue="low")
    raw_redis.sadd("paused", "low")
    summaries = {q.name: q for q in api.Queue.all()}
    assert set(summaries) == {"default", "low"}
    assert summaries["default"].size == 2 and not summaries["default"].paused
    assert 9 < summaries["default"].latency < 12
    assert summaries["low"].paused
    queue = api.Queue("default")
    assert queue.size() == 2 and 9 < queue.latency() < 12 and not queue.paused()
    assert api.Queue("nothing").latency() == 0 and api.Queue("nothing").size() == 0


def test_queue_pause_and_resume(raw_redis):
    queue = api.Queue("default")
    queue.pause()
    assert raw_redis.sismember("paused", "default") and queue.paused()
    queue.resume()
    assert not raw_redis.sismember("paused", "default") and not queue.paused()


def test_queue_jobs_paged_both_orders(raw_redis):
    jobs = [seed.job(args=[n]) for n in range(7)]
    for payload in jobs:
        seed.push(raw_redis, payload)
    queue = api.Queue("default")
    newest = queue.jobs(1, 3)
    assert [record.args for record in newest.items] == [[6], [5], [4]]
    assert (newest.total, newest.pages, newest.has_next, newest.has_previous) == (7, 3, True, False)
    assert [record.args for record in queue.jobs(3, 3).items] == [[0]]
    oldest = queue.jobs(1, 3, oldest_first=True)
    assert [record.args for record in oldest.items] == [[0], [1], [2]]
    assert [record.args for record in queue.jobs(3, 3, oldest_first=True).items] == [[6]]


def test_queue_find_and_delete_exact_member(raw_redis):
    keep, target = seed.job(), seed.job()
    seed.push(raw_redis, keep)
    seed.push(raw_redis, target)
    raw_junk = seed.push(raw_redis, "{not json")
    queue = api.Queue("default")
    assert queue.find_job(target["jid"]).jid == target["jid"]
    assert queue.find_job("nope") is None
    deleted = queue.delete_job(target["jid"])
    assert deleted.jid == target["jid"]
    assert [json.loads(raw)["jid"] for raw in raw_redis.lrange("queue:default", 1, -1)] == [keep["jid"]]
    with pytest.raises(api.StaleEntry):
        queue.delete_job(target["jid"])
    junk_ident = JobRecord.parse(raw_junk).ident
    assert junk_ident.startswith("~")
    queue.delete_job(junk_ident)
    assert raw_redis.llen("queue:default") == 1


def test_queue_clear(raw_redis):
    for _ in range(4):
        seed.push(raw_redis, seed.job())
    seed.push(raw_redis, seed.job(queue="low"), queue="low")
    assert api.Queue("default").clear() == 4
    assert not raw_redis.exists("queue:default")
    assert raw_redis.smembers("queues") == {b"low"}


def test_queue_reads_tolerate_a_wrong_type_key(raw_redis):
    raw_redis.sadd("queues", "default")
    raw_redis.set("queue:default", "oops")
    queue = api.Queue("default")
    assert queue.size() == 0 and queue.latency() == 0
    assert queue.jobs().items == [] and queue.find_job("x") is None
    assert api.Queue.all()[0].size == 0
    raw_redis.set("queues", "oops")
    assert api.Queue.all() == []


# --- JobRecord --------------------------------------------------------------------------------
def test_job_record_reads_a_sidekiq7_entry():
    raw = ('{"retry":true,"queue":"slow","class":"SlowJob","args":[30],"jid":"9ea1986e8760e3bf84b07758",'
           '"created_at":1796228789.1168659,"enqueued_at":1796228789.1170127}')
    record = JobRecord.parse(raw)
    assert record.problems == []
    assert (record.klass, record.display_class, record.args, record.queue) == ("SlowJob", "SlowJob", [30], "slow")
    assert record.jid == record.ident == "9ea1986e8760e3bf84b07758"
    assert record.created_at == dt.datetime.fromtimestamp(1796228789.1168659, dt.UTC)
    assert record.valid and record.args_text == "30"


def test_job_record_flags_what_it_cannot_read():
    assert JobRecord.parse("{oops").problems[0].startswith("payload is not valid JSON")
    assert JobRecord.parse("[1,2]").problems == ["payload is a JSON list, not an object"]
    record = JobRecord.parse('{"args":"x","created_at":"yesterday","retry_count":"2"}')
    assert record.klass == "" and record.display_class == "(unknown class)" and record.args == []
    assert not record.valid
    joined = " | ".join(record.problems)
    for field in ("'class'", "'args'", "'jid'", "'created_at'", "'retry_count'"):
        assert field in joined
    assert record.created_at is None and record.ident.startswith("~")
    assert record.pretty.startswith("{")
    assert JobRecord.parse(b"\xff\xfe").problems  # not UTF-8 JSON: read, flagged, no exception


def test_job_record_unwraps_activejob_and_mailers():
    record = JobRecord.parse(seed.job(klass="ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper",
                                      wrapped="SendReport", args=[{"job_class": "SendReport", "arguments": [7, "x"]}]))
    assert record.display_class == "SendReport" and record.display_args == [7, "x"]
    mail = JobRecord.parse(seed.job(klass="Sidekiq::ActiveJob::Wrapper", wrapped="ActionMailer::MailDeliveryJob",
                                    args=[{"arguments": ["UserMailer", "welcome", "deliver_now", {"args": [1]}]}]))
    assert mail.display_class == "UserMailer#welcome" and mail.display_args == [{"args": [1]}]
    assert JobRecord.parse(seed.job(display_class="Nice")).display_class == "Nice"
    assert JobRecord.parse(seed.job(args=[1, "secret"], encrypt=True)).display_args == [1, "[encrypted data]"]
    assert JobRecord.parse(seed.job(args=[1], kwargs={"a": 2})).display_args == [1, {"a": 2}]


def test_job_record_timestamps_seconds_and_sidekiq8_milliseconds():
    assert epoch_seconds(1700000000.5) == 1700000000.5
    assert epoch_seconds(1700000000500) == 1700000000.5
    assert epoch_seconds("1700000000") is None and epoch_seconds(True) is None
    assert to_int(b"12.5") == 12 and to_int("abc") == 0 and to_int(None) == 0 and to_int("-3") == -3


def test_error_backtrace_strict_mime_legacy_and_junk():
    assert decode_backtrace(seed.strict_backtrace(LINES)) == (LINES, None)
    mime = seed.mime_backtrace(LINES * 10)
    assert "\n" in mime.strip()
    assert decode_backtrace(mime) == (LINES * 10, None)
    assert decode_backtrace(LINES) == (LINES, None)  # 6.4's legacy raw array
    lines, problem = decode_backtrace("aGVsbG8=")  # base64 of uncompressed text: Sidekiq 500s
    assert lines is None and "could not be decoded" in problem
    assert decode_backtrace(None) == (None, None)
    assert decode_backtrace(42)[0] is None
    assert api.encode_backtrace(LINES) == seed.strict_backtrace(LINES) or decode_backtrace(
        api.encode_backtrace(LINES))[0] == LINES
    record = JobRecord.parse(seed.failed(seed.job(), backtrace="!!!"))
    assert record.error_backtrace is None and any("error_backtrace" in p for p in record.problems)


# --- Processes --------------------------------------------------------------------------------
def test_process_set_reads_sidekiq7_and_64_heartbeats(raw_redis):
    seed.process(raw_redis, "web:10:aaa", tag="interop", labels=["blue"], quiet="true")
    seed.process(raw_redis, "old:20:bbb", version=None)
    seed.process(raw_redis, "new:30:ccc", extra_hash={"concurrency": "9"})  # 8.1.3+ hash field wins
    raw_redis.sadd("processes", "gone:1:zzz")  # no hash: skipped
    processes = api.ProcessSet(cleanup=False).all()
    assert [p.identity for p in processes] == ["new:30:ccc", "old:20:bbb", "web:10:aaa"]
    new, old, web = processes
    assert (web.hostname, web.pid, web.tag, web.labels, web.version) == ("web", 10, "interop", ["blue"], "7.3.10")
    assert web.queues == ["default", "low"] and web.weights == {"default": 0, "low": 0}
    assert web.stopping and web.quiet_flag == "true" and not old.stopping
    assert web.rss_kb == 27272 and web.rtt_us == 96 and web.concurrency == 5
    assert web.started_at is not None and web.last_beat is not None
    assert old.version == "" and not old.embedded and old.weights == {}
    assert new.concurrency == 9
    assert api.ProcessSet.identities() == ["gone:1:zzz", "new:30:ccc", "old:20:bbb", "web:10:aaa"]
    assert api.ProcessSet(cleanup=False).size() == 4
    assert api.ProcessSet(cleanup=False).total_concurrency() == 19
    assert api.ProcessSet(cleanup=False).total_rss_kb() == 3 * 27272


def test_process_quiet_flag_must_be_exactly_true(raw_redis):
    seed.process(raw_redis, "h:1:a", quiet="True")
    (process,) = api.ProcessSet(cleanup=False).all()
    assert not process.stopping  # docs/wire.md, Checks: P4: "True" is not quiet


def test_process_with_bad_info_is_shown_with_a_problem(raw_redis):
    raw_redis.sadd("processes", "bad:1:x", "wrongtype:1:y")
    raw_redis.hset("bad:1:x", mapping={"info": "{nope", "busy": "x", "beat": "later"})
    raw_redis.set("wrongtype:1:y", "string")
    (process,) = api.ProcessSet(cleanup=False).all()
    assert process.identity == "bad:1:x" and process.problems and process.busy == 0 and process.beat is None
    assert process.queues == [] and process.concurrency == 0 and process.started_at is None


def test_cleanup_prunes_members_without_hash_once_a_minute(raw_redis):
    seed.process(raw_redis, "live:1:a")
    raw_redis.sadd("processes", "dead:2:b")
    assert api.ProcessSet.cleanup() == 1
    assert raw_redis.smembers("processes") == {b"live:1:a"}
    assert 0 < raw_redis.ttl("process_cleanup") <= 60
    raw_redis.sadd("processes", "dead:3:c")
    api.ProcessSet()  # within the minute: no second cleanup
    assert raw_redis.sismember("processes", "dead:3:c")


def test_quiet_and_stop_push_signals_like_sidekiq(raw_redis):
    seed.process(raw_redis, "h:1:a")
    process = api.ProcessSet.get("h:1:a")
    process.quiet()
    assert raw_redis.lrange("h:1:a-signals", 0, -1) == [b"TSTP"]
    assert 0 < raw_redis.ttl("h:1:a-signals") <= 60
    process.stop()
    assert raw_redis.lrange("h:1:a-signals", 0, -1) == [b"TERM", b"TSTP"]
    process.dump_threads()
    assert raw_redis.lindex("h:1:a-signals", 0) == b"TTIN"
    assert api.ProcessSet.signal("h:1:a", "TSTP").identity == "h:1:a"


def test_signals_refuse_sidekiq_embedded_and_unknown_processes(raw_redis):
    seed.process(raw_redis, "emb:1:a", embedded=True)  # Sidekiq 7's embedded mode: a signal kills its host
    seed.process(raw_redis, "dj:3:c", embedded=True, version="djwork 0.1.0")  # acts in place: allowed
    seed.process(raw_redis, "std:2:b")
    with pytest.raises(api.EmbeddedProcess, match="would stop that application too"):
        api.ProcessSet.get("emb:1:a").stop()
    with pytest.raises(api.StaleEntry):
        api.ProcessSet.signal("nobody:1:x", "TERM")
    assert api.ProcessSet.get("nobody:1:x") is None
    done = api.ProcessSet(cleanup=False).signal_all("TSTP")
    assert [p.identity for p in done] == ["dj:3:c", "std:2:b"]
    assert not raw_redis.exists("emb:1:a-signals")
    assert raw_redis.lrange("std:2:b-signals", 0, -1) == [b"TSTP"]
    assert raw_redis.lrange("dj:3:c-signals", 0, -1) == [b"TSTP"]


def test_leader(raw_redis):
    assert api.ProcessSet.leader() == ""
    raw_redis.set("dear-leader", "h:1:a")
    assert api.ProcessSet.leader() == "h:1:a"
    raw_redis.delete("dear-leader")
    raw_redis.hset("dear-leader", "x", "y")
    assert api.ProcessSet.leader() == ""


# --- WorkSet ----------------------------------------------------------------------------------
def test_work_set_reads_work_and_legacy_workers(raw_redis):
    running = seed.job(klass="SlowJob", args=[30], queue="slow")
    legacy = seed.job(klass="OldJob")
    seed.process(raw_redis, "new:1:a", busy_jobs=[running])
    seed.process(raw_redis, "old:2:b", version=None, busy_jobs=[legacy], legacy_work_key=True)
    works = api.WorkSet().all()
    assert sorted(w.job.klass for w in works) == ["OldJob", "SlowJob"]
    slow = next(w for w in works if w.job.klass == "SlowJob")
    assert (slow.identity, slow.tid, slow.queue, slow.job.args) == ("new:1:a", "t0", "slow", [30])
    assert 25 < slow.runtime < 40 and slow.problems == []
    assert api.WorkSet.size() == 2
    assert len(list(api.WorkSet())) == 2


def test_work_set_tolerates_object_payloads_and_junk(raw_redis):
    seed.process(raw_redis, "h:1:a")
    raw_redis.hset("h:1:a:work", mapping={
        "obj": json.dumps({"queue": "q", "payload": seed.job(klass="ObjJob"), "run_at": int(time.time())}),
        "junk": "{nope",
        "nopayload": json.dumps({"queue": "q"}),
    })
    works = {w.tid: w for w in api.WorkSet().all()}
    assert works["obj"].job.klass == "ObjJob" and works["obj"].problems == []
    assert works["junk"].problems and works["junk"].run_at is None
    assert any("payload" in p for p in works["nopayload"].problems)


# --- Sorted sets ------------------------------------------------------------------------------
def _fill(raw_redis, key: str, count: int, start: float) -> list[dict]:
    jobs = []
    for n in range(count):
        payload = seed.failed(seed.job(klass=f"Job{n % 2}", args=[n]), count=1)
        seed.zadd(raw_redis, key, payload, start + n)
        jobs.append(payload)
    return jobs


def test_sorted_set_pages_sizes_and_orders(raw_redis):
    _fill(raw_redis, "retry", 5, 1000.0)
    retries = api.RetrySet()
    assert retries.size() == 5
    page = retries.page(1, 2)
    assert [e.score for e in page.items] == [1000.0, 1001.0] and page.pages == 3
    assert [e.score for e in retries.page(1, 2, newest_first=True).items] == [1004.0, 1003.0]
    dead = _fill(raw_redis, "dead", 2, 50.0)
    assert [e.jid for e in api.DeadSet().page().items] == [dead[1]["jid"], dead[0]["jid"]]  # newest first
    entry = page.items[0]
    assert entry.address == f"1000.0-{entry.jid}" and entry.at.year == 1970
    raw_redis.set("schedule", "x")
    assert api.ScheduledSet().page().items == [] and api.ScheduledSet().size() == 0


def test_sorted_set_search_find_and_get(raw_redis):
    jobs = _fill(raw_redis, "retry", 4, time.time())
    retries = api.RetrySet()
    assert {e.job.klass for e in retries.search("job1")} == {"Job1"}  # case-insensitive
    assert len(retries.search("JOB")) == 4
    assert retries.search("   ") == []
    assert retries.find_job(jobs[2]["jid"]).job.args == [2]
    assert retries.find_job("0" * 24) is None
    entry = retries.find_job(jobs[3]["jid"])
    assert retries.get(entry.address).jid == jobs[3]["jid"]
    assert retries.get(f"{entry.score!r}-{'f' * 24}") is None
    with pytest.raises(ValueError):
        retries.get("not-an-address")
    assert api.parse_address("1.5e-05-abc") == (1.5e-05, "abc")
    raw_redis.set("dead", "x")
    assert api.DeadSet().search("job") == []


def test_retry_pushes_then_removes_with_retry_count_decremented(raw_redis):
    payload = seed.failed(seed.job(klass="HardJob", queue="low"), count=3, backtrace=seed.strict_backtrace(LINES))
    payload["at"] = time.time() + 3600  # docs/wire.md, check J8: must not survive the push
    seed.zadd(raw_redis, "retry", payload, time.time() + 100)
    retries = api.RetrySet()
    entry = retries.find_job(payload["jid"])
    assert retries.retry(entry) == "low"
    assert raw_redis.zcard("retry") == 0
    pushed = json.loads(raw_redis.lindex("queue:low", 0))
    assert pushed["retry_count"] == 2 and pushed["jid"] == payload["jid"] and "at" not in pushed
    assert abs(pushed["enqueued_at"] - time.time()) < 5
    assert raw_redis.sismember("queues", "low")
    with pytest.raises(api.StaleEntry):
        retries.retry(entry)
    assert raw_redis.llen("queue:low") == 1


def test_retry_runs_client_middleware_which_may_reroute_or_stop_it(raw_redis, settings):
    settings.DJWORK = {**settings.DJWORK, "CLIENT_MIDDLEWARE": ["tests.jobs.stamp_tenant"]}
    payload = seed.failed(seed.job(klass="HardJob", args=["reroute-me"]), count=1)
    seed.zadd(raw_redis, "retry", payload, time.time() + 100)
    retries = api.RetrySet()
    assert retries.retry(retries.find_job(payload["jid"])) == "low"
    pushed = json.loads(raw_redis.lindex("queue:low", 0))
    assert pushed["tenant"] == "acme" and pushed["jid"] == payload["jid"]
    assert raw_redis.zcard("retry") == 0 and raw_redis.sismember("queues", "low")
    settings.DJWORK = {**settings.DJWORK, "CLIENT_MIDDLEWARE": ["tests.jobs.stop_everything"]}
    stopped = seed.job(klass="Later")
    seed.zadd(raw_redis, "schedule", stopped, time.time() + 600)
    scheduled = api.ScheduledSet()
    assert scheduled.add_to_queue(scheduled.find_job(stopped["jid"])) == "default"
    assert raw_redis.zcard("schedule") == 0 and not raw_redis.exists("queue:default")  # dropped, as a stopped push


def test_retry_into_a_wrong_type_queue_keeps_the_entry(raw_redis):
    raw_redis.set("queue:low", "not a list")
    payload = seed.failed(seed.job(klass="HardJob", queue="low"), count=1)
    raw = seed.zadd(raw_redis, "retry", payload, 100.0)
    retries = api.RetrySet()
    with pytest.raises(api.RedisUnavailable):
        retries.retry(retries.find_job(payload["jid"]))
    assert raw_redis.zrange("retry", 0, -1) == [raw.encode()]  # the push failed first, so nothing was removed


def test_redis_down_raises_redis_unavailable_not_redis_py_errors(raw_redis, settings):
    settings.DJWORK = {**settings.DJWORK, "REDIS_URL": "redis://127.0.0.1:1/0", "REDIS_MAX_ATTEMPTS": 1}
    with pytest.raises(api.RedisUnavailable) as raised:
        api.Stats.fetch()
    assert isinstance(raised.value, api.ApiError) and "Connection refused" in str(raised.value)
    assert isinstance(raised.value.__cause__, RedisError)
    with pytest.raises(api.RedisUnavailable):
        api.Queue("default").pause()


def test_retry_of_unreadable_entry_is_refused_and_kept(raw_redis):
    raw_redis.zadd("retry", {"{broken": 5.0})
    entry = api.RetrySet().page().items[0]
    with pytest.raises(api.NotRetryable):
        api.RetrySet().retry(entry)
    assert raw_redis.zcard("retry") == 1
    api.RetrySet().delete(api.RetrySet().get(entry.address))
    assert raw_redis.zcard("retry") == 0


def test_scheduled_add_to_queue_keeps_the_payload(raw_redis):
    payload = seed.job(klass="Later")
    payload.pop("enqueued_at")
    seed.zadd(raw_redis, "schedule", payload, time.time() + 600)
    scheduled = api.ScheduledSet()
    assert scheduled.add_to_queue(scheduled.find_job(payload["jid"])) == "default"
    pushed = json.loads(raw_redis.lindex("queue:default", 0))
    assert pushed["class"] == "Later" and "retry_count" not in pushed and "enqueued_at" in pushed


def test_delete_removes_the_exact_member(raw_redis):
    jobs = _fill(raw_redis, "dead", 2, 10.0)
    dead = api.DeadSet()
    entry = dead.find_job(jobs[0]["jid"])
    dead.delete(entry)
    assert [json.loads(m)["jid"] for m in raw_redis.zrange("dead", 0, -1)] == [jobs[1]["jid"]]
    with pytest.raises(api.StaleEntry):
        dead.delete(entry)
    with pytest.raises(api.NotRetryable):
        dead.kill(dead.find_job(jobs[1]["jid"]))


def test_kill_moves_to_dead_now_and_trims(raw_redis, settings):
    settings.DJWORK = {**settings.DJWORK, "DEAD_MAX_JOBS": 3}
    _fill(raw_redis, "dead", 3, time.time() - 100)
    jobs = _fill(raw_redis, "retry", 1, time.time() + 50)
    retries = api.RetrySet()
    entry = retries.find_job(jobs[0]["jid"])
    retries.kill(entry)
    assert raw_redis.zcard("retry") == 0
    assert raw_redis.zcard("dead") == 3  # trimmed to DEAD_MAX_JOBS, oldest first
    score = raw_redis.zscore("dead", entry.job.raw)
    assert score is not None and abs(score - time.time()) < 5
    with pytest.raises(api.StaleEntry):
        retries.kill(entry)


def test_bulk_actions_skip_unreadable_entries(raw_redis):
    _fill(raw_redis, "retry", 3, 100.0)
    raw_redis.zadd("retry", {"{junk": 50.0})
    retries = api.RetrySet()
    assert retries.retry_all() == (3, 1)
    assert raw_redis.llen("queue:default") == 3 and raw_redis.zcard("retry") == 1
    _fill(raw_redis, "retry", 2, 200.0)
    assert retries.kill_all() == (3, 0)  # junk can be buried: the move copies the raw member
    assert raw_redis.zcard("dead") == 3 and raw_redis.zcard("retry") == 0
    _fill(raw_redis, "retry", 2, 300.0)
    assert retries.delete_all() == 2 and not raw_redis.exists("retry")
    _fill(raw_redis, "schedule", 2, time.time() + 60)
    assert api.ScheduledSet().add_all_to_queue() == (2, 0)
    assert raw_redis.llen("queue:default") == 5
    assert api.DeadSet().clear() == 3


# --- History ------------------------------------------------------------------------------------
def test_history_recent_filters_and_pages(raw_redis):
    for n in range(6):
        seed.history(raw_redis, klass="app.jobs.Mail" if n % 2 else "app.jobs.Report",
                     status="ok" if n < 4 else "retry", queue="low" if n == 5 else "default",
                     error_class="RuntimeError" if n >= 4 else "", error_message="x" if n >= 4 else "")
    assert api.History.length() == 6
    page = api.History.recent(4)
    assert len(page.runs) == 4 and page.next_before == page.runs[-1].id and not page.truncated
    older = api.History.recent(4, before=page.next_before)
    assert len(older.runs) == 2 and older.next_before is None
    assert {r.klass for r in api.History.recent(10, klass="MAIL").runs} == {"app.jobs.Mail"}
    retried = api.History.recent(10, status="retry").runs
    assert len(retried) == 2 and all(r.failed and r.error_class == "RuntimeError" for r in retried)
    assert [r.queue for r in api.History.recent(10, queue="low").runs] == ["low"]
    run = page.runs[0]
    assert run.duration_ms == 12.5 and run.started is not None and run.identity == "host:1:abc"


def test_history_tolerates_missing_and_wrong_type_stream(raw_redis):
    assert api.History.recent().runs == [] and api.History.length() == 0
    raw_redis.set("djwork:history", "x")
    assert api.History.recent().runs == [] and api.History.length() == 0
