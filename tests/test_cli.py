"""``manage.py djwork`` in-process (call_command) against the private Redis: every verb's output checked against
djwork.api's numbers, every acting verb's refusal without --yes and its effect in Redis with it."""

from __future__ import annotations

import json
import time

import pytest
from django.conf import settings
from django.test import override_settings

import djwork
from djwork import api, limiter
from djwork.redis import keys
from tests import batch_jobs
from tests.browser import seed
from tests.support.cli import Terminal, cli, documented_fields

DEAD_CLASS = "Billing::Invoice"


def dead_jobs(raw_redis, klass: str, count: int) -> list[dict]:
    jobs = [seed.failed(seed.job(klass, args=[n]), count=25, message=f"boom {n}") for n in range(count)]
    for n, job in enumerate(jobs):
        seed.zadd(raw_redis, "dead", job, time.time() - n)
    return jobs


def queue_jids(raw_redis, queue: str = "default") -> set[str]:
    return {json.loads(raw)["jid"] for raw in raw_redis.lrange(f"queue:{queue}", 0, -1)}


def set_jids(raw_redis, key: str) -> set[str]:
    return {json.loads(raw)["jid"] for raw in raw_redis.zrange(key, 0, -1)}


def contents(raw_redis) -> dict[bytes, object]:
    """Every key's value, read by its type (DUMP's bytes vary with a hash's internal order)."""
    read = {b"string": raw_redis.get, b"hash": raw_redis.hgetall, b"set": raw_redis.smembers,
            b"list": lambda key: raw_redis.lrange(key, 0, -1), b"stream": raw_redis.xrange,
            b"zset": lambda key: raw_redis.zrange(key, 0, -1, withscores=True)}
    return {key: read[raw_redis.type(key)](key) for key in raw_redis.scan_iter()}


# --- status ---------------------------------------------------------------------------------------
def test_status_json_has_the_apis_numbers_and_exit_0_when_healthy(raw_redis):
    seed.process(raw_redis, "web:1:aa", queues=["default"], busy_jobs=[seed.job()], concurrency=7)
    for _ in range(3):
        seed.push(raw_redis, seed.job())
    dead_jobs(raw_redis, DEAD_CLASS, 2)
    seed.zadd(raw_redis, "retry", seed.failed(seed.job()), time.time() + 60)
    raw_redis.set("stat:processed", 41)

    result = cli("status", "--json")
    assert result.code == 0, result
    status = result.object()
    stats = api.Stats.fetch()
    assert status["healthy"] is True and status["warnings"] == []
    assert (status["processes"], status["running"], status["quiet"]) == (1, 1, 0)
    assert (status["busy"], status["concurrency"]) == (stats.busy, 7) == (1, 7)
    assert (status["processed"], status["enqueued"], status["retries"], status["dead"]) == (
        stats.processed, stats.enqueued, stats.retries, stats.dead) == (41, 3, 1, 2)
    (queue,) = status["queues"]
    assert (queue["name"], queue["size"], queue["paused"]) == ("default", 3, False)
    assert status["redis"]["redis_version"] == api.redis_info()["redis_version"]
    assert "s3cret" not in result.out and status["redis_location"].startswith("redis://127.0.0.1:")

    text = cli("status")
    assert text.code == 0
    assert "Processes  1 (1 running, 0 quiet)   Busy 1 / 7" in text.out
    assert "enqueued 3" in text.out and "dead 2" in text.out
    assert "OK: nothing needs attention." in text.out


def test_status_exits_1_when_a_queue_has_jobs_and_no_process_listens_to_it(raw_redis):
    seed.process(raw_redis, "web:1:aa", queues=["default"])
    seed.push(raw_redis, seed.job(queue="reports"), queue="reports")

    result = cli("status", "--json")
    assert result.code == 1
    (warning,) = result.object()["warnings"]
    assert (warning["kind"], warning["queue"]) == ("no-listener", "reports")
    text = cli("status")
    assert text.code == 1
    assert "! Queue reports has 1 job but no running process listens to it." in text.out


def test_status_exits_1_with_no_process_at_all(raw_redis):
    result = cli("status", "--json")
    assert result.code == 1
    assert [w["kind"] for w in result.object()["warnings"]] == ["no-process"]


# --- processes, quiet, stop -------------------------------------------------------------------------
def test_processes_lists_each_process_and_its_running_jobs(raw_redis):
    running = seed.job("Reports::Build")
    seed.process(raw_redis, "web:1:aa", queues=["default", "low"], busy_jobs=[running])
    seed.process(raw_redis, "web:2:bb", quiet="true")
    rows = cli("processes", "--json").objects()
    expected = api.ProcessSet(cleanup=False).all()
    assert [row["identity"] for row in rows] == [p.identity for p in expected] == ["web:1:aa", "web:2:bb"]
    first, second = rows
    assert (first["busy"], first["concurrency"], first["queues"], first["state"]) == (1, 5, ["default", "low"],
                                                                                      "running")
    assert [(job["jid"], job["class"]) for job in first["jobs"]] == [(running["jid"], "Reports::Build")]
    assert second["state"] == "quiet"
    text = cli("processes").out
    assert "web:1:aa" in text and "1 / 5" in text and "Reports::Build" in text


@pytest.mark.parametrize(("verb", "signal"), [("quiet", "TSTP"), ("stop", "TERM")])
def test_quiet_and_stop_refuse_without_yes_then_queue_the_signal(raw_redis, verb, signal):
    seed.process(raw_redis, "web:1:aa")
    refused = cli(verb, "web:1:aa")
    assert refused.code == 2
    assert refused.err.startswith(f"djwork: refused: {verb.capitalize()} process web:1:aa")
    assert "--yes" in refused.err and refused.err.count("\n") == 1
    assert raw_redis.lrange("web:1:aa-signals", 0, -1) == []

    done = cli(verb, "web:1:aa", "--yes")
    assert done.code == 0, done
    assert raw_redis.lrange("web:1:aa-signals", 0, -1) == [signal.encode()]


def test_quiet_all_asks_with_the_count_and_signals_every_process(raw_redis):
    for identity in ("web:1:aa", "web:2:bb"):
        seed.process(raw_redis, identity)
    declined = cli("quiet", "--all", stdin=Terminal("n\n"))
    assert declined.code == 1
    assert "Quiet all 2 processes" in declined.err
    assert not raw_redis.exists("web:1:aa-signals")
    agreed = cli("quiet", "--all", "--json", stdin=Terminal("y\n"))
    assert agreed.code == 0
    assert agreed.object() == {"action": "quiet", "done": 2, "identities": ["web:1:aa", "web:2:bb"]}
    assert [raw_redis.lrange(f"{i}-signals", 0, -1) for i in ("web:1:aa", "web:2:bb")] == [[b"TSTP"], [b"TSTP"]]


def test_quiet_an_unknown_process_is_an_error(raw_redis):
    result = cli("quiet", "nobody:1:x", "--yes")
    assert result.code == 2 and "no running process nobody:1:x" in result.err


# --- queues, pause, resume, clear --------------------------------------------------------------------
def test_queues_match_the_api_and_pause_resume_write_the_paused_set(raw_redis):
    seed.push(raw_redis, seed.job(enqueued_at=time.time() - 30))
    seed.push(raw_redis, seed.job(queue="low"), queue="low")
    rows = cli("queues", "--json").objects()
    assert [(r["name"], r["size"], r["paused"]) for r in rows] == [
        (q.name, q.size, q.paused) for q in api.Queue.all()] == [("default", 1, False), ("low", 1, False)]
    assert rows[0]["latency"] >= 30

    assert cli("pause", "low").code == 2
    assert not raw_redis.sismember("paused", "low")
    paused = cli("pause", "low", stdin=Terminal("yes\n"))
    assert paused.code == 0 and "Pause queue low (1 job waiting)" in paused.err
    assert raw_redis.sismember("paused", "low")
    assert [r["paused"] for r in cli("queues", "--json").objects()] == [False, True]
    assert cli("resume", "low", "--yes").code == 0
    assert not raw_redis.sismember("paused", "low")


def test_clear_a_queue_states_the_count_and_removes_it(raw_redis):
    for _ in range(3):
        seed.push(raw_redis, seed.job(queue="low"), queue="low")
    refused = cli("clear", "low")
    assert refused.code == 2 and "all 3 jobs" in refused.err and raw_redis.llen("queue:low") == 3
    done = cli("clear", "low", "--yes", "--json")
    assert done.code == 0 and done.object()["done"] == 3
    assert not raw_redis.exists("queue:low") and not raw_redis.sismember("queues", "low")


def test_a_bad_queue_name_is_an_error_that_writes_nothing(raw_redis):
    result = cli("pause", "a b", "--yes")
    assert result.code == 2 and "is not a queue name" in result.err
    assert not raw_redis.exists("paused")


# --- jobs, job -------------------------------------------------------------------------------------------
def test_jobs_of_a_set_filtered_by_class_and_text_with_a_limit(raw_redis):
    invoices = dead_jobs(raw_redis, DEAD_CLASS, 3)
    others = dead_jobs(raw_redis, "Mail::Send", 2)
    rows = cli("jobs", "dead", "--class", DEAD_CLASS, "--json").objects()
    assert {row["jid"] for row in rows} == {job["jid"] for job in invoices}
    assert {row["where"] for row in rows} == {"dead"} and all(row["error_class"] == "RuntimeError" for row in rows)
    page = api.DeadSet().page(1, 2)
    assert [row["jid"] for row in cli("jobs", "dead", "--limit", "2", "--json").objects()] == [
        entry.jid for entry in page.items]
    (found,) = cli("jobs", "dead", "--search", others[1]["jid"], "--json").objects()
    assert found["class"] == "Mail::Send" and found["address"] == api.DeadSet().find_job(others[1]["jid"]).address
    text = cli("jobs", "dead", "--class", DEAD_CLASS).out
    assert text.count(DEAD_CLASS) == 3 and "3 shown, matching in dead (5 jobs)" in text


def test_jobs_of_a_queue_and_of_a_queue_named_like_a_set(raw_redis):
    job = seed.job("Reports::Build")
    seed.push(raw_redis, job)
    odd = seed.job(queue="retry")
    seed.push(raw_redis, odd, queue="retry")
    (row,) = cli("jobs", "default", "--json").objects()
    assert (row["jid"], row["class"], row["where"], row["at"]) == (job["jid"], "Reports::Build", "queued", None)
    assert [r["jid"] for r in cli("jobs", "queue:retry", "--json").objects()] == [odd["jid"]]
    assert cli("jobs", "retry", "--json").objects() == []


def test_job_says_where_it_is_with_its_error_and_runs(raw_redis):
    (job,) = dead_jobs(raw_redis, DEAD_CLASS, 1)
    run_id = seed.history(raw_redis, jid=job["jid"], klass=DEAD_CLASS, status="dead", error_class="RuntimeError",
                          error_message="boom 0")
    found = cli("job", job["jid"], "--json")
    assert found.code == 0
    data = found.object()
    assert (data["where"], data["class"], data["error_message"]) == ("dead", DEAD_CLASS, "boom 0")
    assert data["payload"]["jid"] == job["jid"] and data["address"] == api.DeadSet().find_job(job["jid"]).address
    assert [(run["id"], run["status"]) for run in data["runs"]] == [(run_id, "dead")]
    text = cli("job", job["jid"]).out
    assert f"Job {job['jid']}: dead" in text and "RuntimeError: boom 0" in text and "Runs (newest first)" in text

    queued = seed.job()
    seed.push(raw_redis, queued)
    assert cli("job", queued["jid"], "--json").object()["where"] == "queued"
    missing = cli("job", "nosuchjid", "--json")
    assert missing.code == 1 and missing.object()["where"] == "gone"


# --- retry, delete, kill -------------------------------------------------------------------------------
def test_retry_every_dead_job_of_one_class_in_one_command(raw_redis):
    invoices = dead_jobs(raw_redis, DEAD_CLASS, 3)
    others = dead_jobs(raw_redis, "Mail::Send", 2)

    refused = cli("retry", "dead", "--class", DEAD_CLASS)
    assert refused.code == 2
    assert f"Retry 3 jobs of class {DEAD_CLASS} in dead" in refused.err
    assert raw_redis.zcard("dead") == 5 and not raw_redis.exists("queue:default")

    asked = cli("retry", "dead", "--class", DEAD_CLASS, stdin=Terminal("y\n"))
    assert asked.code == 0, asked
    assert f"Retry 3 jobs of class {DEAD_CLASS} in dead: they are pushed to their queues now." in asked.err
    assert "Retried 3 jobs in dead." in asked.out
    assert queue_jids(raw_redis) == {job["jid"] for job in invoices}
    assert set_jids(raw_redis, "dead") == {job["jid"] for job in others}


def test_retry_one_jid_delete_with_a_search_and_kill_all(raw_redis):
    retries = [seed.failed(seed.job("Mail::Send", args=[n])) for n in range(3)]
    for n, job in enumerate(retries):
        seed.zadd(raw_redis, "retry", job, time.time() + 60 + n)
    one = cli("retry", "retry", retries[0]["jid"], "--yes", "--json")
    assert one.object() == {"action": "retry", "target": "retry", "done": 1, "skipped": 0, "problems": []}
    assert queue_jids(raw_redis) == {retries[0]["jid"]}

    deleted = cli("delete", "retry", "--search", retries[1]["jid"], "--yes")
    assert deleted.code == 0 and "Deleted 1 job in retry." in deleted.out
    assert set_jids(raw_redis, "retry") == {retries[2]["jid"]}

    assert cli("kill", "retry", "--all", "--yes").code == 0
    assert raw_redis.zcard("retry") == 0 and set_jids(raw_redis, "dead") == {retries[2]["jid"]}


def test_retry_scheduled_enqueues_now_and_deleting_one_queued_job_by_jid(raw_redis):
    later = seed.job()
    seed.zadd(raw_redis, "schedule", later, time.time() + 3600)
    assert cli("retry", "scheduled", later["jid"], "--yes").code == 0
    assert queue_jids(raw_redis) == {later["jid"]} and raw_redis.zcard("schedule") == 0
    assert cli("delete", "default", later["jid"], "--yes").code == 0
    assert raw_redis.llen("queue:default") == 0


@pytest.mark.parametrize(("args", "message"), [
    (("retry", "dead"), "say which jobs, with one of a jid, --class/--search, or --all"),
    (("retry", "dead", "--all", "--class", "X"), "say which jobs"),
    (("kill", "dead", "--all"), "jobs in dead are dead already"),
    (("retry", "default", "--all"), "retry does not apply to queue default"),
    (("delete", "retry", "nosuchjid"), "job nosuchjid is not in retry"),
    (("delete", "default", "--class", "X"), "takes one jid"),
])
def test_an_action_without_a_clear_target_is_an_error_that_does_nothing(raw_redis, args, message):
    dead_jobs(raw_redis, DEAD_CLASS, 1)
    result = cli(*args, "--yes")
    assert result.code == 2 and message in result.err, result
    assert raw_redis.zcard("dead") == 1


def test_a_filter_that_matches_nothing_does_nothing_and_exits_0(raw_redis):
    dead_jobs(raw_redis, DEAD_CLASS, 1)
    result = cli("retry", "dead", "--class", "Nope")
    assert result.code == 0 and "No job in dead matches" in result.out and raw_redis.zcard("dead") == 1


# --- history, metrics ---------------------------------------------------------------------------------
def test_history_matches_the_api_with_filters(raw_redis):
    seed.history(raw_redis, klass="A", status="ok")
    seed.history(raw_redis, klass="B", status="dead", error_class="KeyError", error_message="x")
    rows = cli("history", "--json").objects()
    assert [(r["class"], r["status"]) for r in rows] == [(run.klass, run.status) for run in
                                                         api.History.recent(50).runs] == [("B", "dead"), ("A", "ok")]
    assert [r["class"] for r in cli("history", "--status", "dead", "--json").objects()] == ["B"]
    assert "KeyError: x" in cli("history").out
    assert "(resumed)" not in cli("history").out


def test_history_says_which_runs_resumed_an_iteration(raw_redis):
    seed.history(raw_redis, klass="app.jobs.Export", status="rescheduled", jid="c" * 24)
    seed.history(raw_redis, klass="app.jobs.Export", jid="c" * 24, resumed=True)
    assert [(r["status"], r["resumed"]) for r in cli("history", "--json").objects()] == [
        ("ok", True), ("rescheduled", False)]
    assert "ok (resumed)" in cli("history").out


def test_metrics_lists_each_class_as_the_api_reads_it(raw_redis):
    bucket = time.strftime("j|%y%m%d|%-H:%M", time.gmtime())
    raw_redis.hset(bucket, mapping={"Reports::Build|p": 4, "Reports::Build|f": 1, "Reports::Build|ms": 300})
    (row,) = cli("metrics", "--json").objects()
    (item,) = api.Metrics().by_class("1h").classes.values()
    assert (row["class"], row["processed"], row["failed"], row["seconds"]) == (
        item.name, item.processed, item.failed, item.seconds) == ("Reports::Build", 4, 1, 0.3)
    assert cli("metrics", "--hours", "3").code == 2


# --- periodic, limits, locks, batches -----------------------------------------------------------------------
PERIODIC = [{"cron": "0 3 * * *", "job": "tests.periodic_jobs.tick", "name": "nightly"}]


def test_periodic_lists_and_runs_pauses_and_resumes_an_entry(raw_redis):
    with override_settings(DJWORK={**settings.DJWORK, "PERIODIC": PERIODIC}):
        (row,) = cli("periodic", "--json").objects()
        assert (row["id"], row["cron"], row["paused"], row["configured"]) == ("nightly", "0 3 * * *", False, True)
        assert cli("periodic", "pause", "nightly").code == 2
        assert cli("periodic", "pause", "nightly", "--yes").code == 0
        assert api.Periodic().get("nightly").paused
        assert cli("periodic", "resume", "nightly", "--yes").code == 0
        assert not api.Periodic().get("nightly").paused
        ran = cli("periodic", "run", "nightly", "--yes", "--json").object()
        assert queue_jids(raw_redis, "periodic-out") == {ran["jid"]}
        assert cli("periodic", "run", "nope", "--yes").code == 2


def test_limits_list_and_reset_frees_the_window(raw_redis):
    window = limiter.window("cli-mail", 5, "minute")
    for _ in range(3):
        with window.within_limit():
            pass
    (row,) = cli("limits", "--json").objects()
    (summary,) = api.Limiters().all()
    assert (row["name"], row["kind"], row["used"], row["size"]) == (summary.name, summary.kind, summary.used, 5)
    assert row["used"] == 3
    assert cli("limit", "reset", "cli-mail").code == 2
    assert api.Limiter("cli-mail").summary().used == 3
    assert cli("limit", "reset", "cli-mail", "--yes").code == 0
    assert api.Limiter("cli-mail").summary().used == 0


def test_locks_list_and_release_is_owner_checked(raw_redis):
    job = seed.job("Reports::Build")
    seed.push(raw_redis, job)
    raw_redis.set(keys.unique("d1g3st"), job["jid"], ex=600)
    (row,) = cli("locks", "--json").objects()
    assert (row["digest"], row["owner"], row["where"], row["class"]) == ("d1g3st", job["jid"], "queued",
                                                                         "Reports::Build")
    refused = cli("lock", "release", "d1g3st")
    assert refused.code == 2 and "Reports::Build" in refused.err and raw_redis.exists(keys.unique("d1g3st"))
    assert cli("lock", "release", "d1g3st", "--yes").code == 0
    assert not raw_redis.exists(keys.unique("d1g3st"))


def test_batches_list_show_and_invalidate(raw_redis):
    batch = djwork.Batch(description="nightly import", on_success=batch_jobs.on_event)
    with batch.jobs():
        batch_jobs.member.delay("a")
        batch_jobs.member.delay("b")
    (row,) = cli("batches", "--json").objects()
    status = api.Batch(batch.bid).status()
    assert (row["bid"], row["total"], row["pending"], row["state"]) == (batch.bid, status.total, status.pending,
                                                                         "running") and row["total"] == 2
    # A bid may start with "-" (token_urlsafe): after "--" it is never read as an option.
    shown = cli("batch", "--json", "--", batch.bid).object()
    assert sorted(shown["pending_jids"]) == sorted(status.pending_jids)
    assert cli("batch", "--", "invalidate", batch.bid).code == 2
    assert api.Batch(batch.bid).status().invalidated_at is None
    assert cli("batch", "--yes", "--", "invalidate", batch.bid).code == 0
    assert api.Batch(batch.bid).status().invalidated_at is not None
    assert cli("batch", "not a bid").code == 2


# --- revoke, result ---------------------------------------------------------------------------------------
def test_revoke_removes_a_waiting_job_and_result_reads_revoked(raw_redis):
    job = seed.job()
    seed.push(raw_redis, job)
    refused = cli("revoke", job["jid"])
    assert refused.code == 2 and "HardJob" in refused.err and queue_jids(raw_redis) == {job["jid"]}
    assert cli("revoke", job["jid"], "--yes").code == 0
    assert raw_redis.llen("queue:default") == 0 and raw_redis.zscore(keys.REVOKED, job["jid"]) is not None
    result = cli("result", job["jid"], "--json").object()
    assert (result["state"], result["ready"]) == ("REVOKED", True)
    assert cli("result", "bad jid").code == 2


# --- the documented JSON ---------------------------------------------------------------------------------
def test_every_verbs_json_has_exactly_the_fields_docs_cli_md_lists(raw_redis):
    documented = documented_fields()
    seed.process(raw_redis, "web:1:aa", busy_jobs=[seed.job()])
    queued = seed.job()
    seed.push(raw_redis, queued)
    (dead,) = dead_jobs(raw_redis, DEAD_CLASS, 1)
    seed.history(raw_redis, jid=dead["jid"], status="dead")
    raw_redis.set(keys.unique("d1g3st"), queued["jid"], ex=600)
    raw_redis.hset(time.strftime("j|%y%m%d|%-H:%M", time.gmtime()), "A|p", 1)
    with limiter.window("cli-mail", 5, "minute").within_limit():
        pass
    batch = djwork.Batch(description="docs")
    with batch.jobs():
        batch_jobs.member.delay("a")
    with override_settings(DJWORK={**settings.DJWORK, "PERIODIC": PERIODIC}):
        looking = {"status": ["status"], "processes": ["processes"], "queues": ["queues"], "jobs": ["jobs", "dead"],
                   "job": ["job", dead["jid"]], "history": ["history"], "periodic": ["periodic"],
                   "limits": ["limits"], "batches": ["batches"], "batch": ["batch", "--", batch.bid],
                   "locks": ["locks"], "result": ["result", dead["jid"]], "metrics": ["metrics"]}
        acting = {"retry": ["retry", "dead", dead["jid"]], "quiet": ["quiet", "web:1:aa"], "pause": ["pause", "low"],
                  "periodic run": ["periodic", "run", "nightly"], "limit reset": ["limit", "reset", "cli-mail"],
                  "lock release": ["lock", "release", "d1g3st"], "revoke": ["revoke", queued["jid"]],
                  "batch invalidate": ["batch", "--", "invalidate", batch.bid]}
        assert set(documented) == set(looking) | set(acting), "docs/cli.md lists a verb this test does not run"
        for verb, args in {**looking, **acting}.items():
            extra = ["--yes"] if verb in acting else []
            split = args.index("--") if "--" in args else len(args)
            objects = cli(*args[:split], "--json", *extra, *args[split:]).objects()
            assert objects, f"{verb} printed no JSON"
            for value in objects:
                assert list(value) == documented[verb], f"{verb}: {list(value)} != docs/cli.md's {documented[verb]}"


def test_djangos_options_work_after_the_verb_and_a_bad_interval_is_refused(raw_redis):
    seed.push(raw_redis, seed.job())
    after = cli("queues", "--json", "-v", "2", "--settings", "tests.settings")
    assert after.code == 0 and [row["size"] for row in after.objects()] == [1]
    for bad in ("0", "-1", "nan", "soon"):
        refused = cli("status", "--watch", "--interval", bad)
        assert refused.code == 2 and "--interval" in refused.err


def test_every_acting_verb_refuses_without_yes_on_a_non_terminal_and_writes_nothing(raw_redis):
    seed.process(raw_redis, "web:1:aa")
    queued = seed.job()
    seed.push(raw_redis, queued)
    (dead,) = dead_jobs(raw_redis, DEAD_CLASS, 1)
    retrying = seed.failed(seed.job())
    seed.zadd(raw_redis, "retry", retrying, time.time() + 60)
    raw_redis.sadd("paused", "low")
    raw_redis.set(keys.unique("d1g3st"), queued["jid"], ex=600)
    with limiter.window("cli-mail", 5, "minute").within_limit():
        pass
    batch = djwork.Batch(description="refusals")
    with batch.jobs():
        batch_jobs.member.delay("a")
    commands = [("quiet", "web:1:aa"), ("stop", "--all"), ("pause", "default"), ("resume", "low"),
                ("retry", "dead", dead["jid"]), ("retry", "dead", "--all"), ("delete", "retry", "--all"),
                ("delete", "default", queued["jid"]), ("kill", "retry", "--class", "HardJob"), ("clear", "default"),
                ("periodic", "run", "nightly"), ("periodic", "pause", "nightly"), ("limit", "reset", "cli-mail"),
                ("lock", "release", "d1g3st"), ("batch", "--", "invalidate", batch.bid), ("revoke", queued["jid"])]
    with override_settings(DJWORK={**settings.DJWORK, "PERIODIC": PERIODIC}):
        before = contents(raw_redis)
        for command in commands:
            refused = cli(*command)
            assert refused.code == 2, (command, refused)
            assert refused.err.startswith("djwork: refused: ") and refused.out == "", (command, refused)
        assert contents(raw_redis) == before
