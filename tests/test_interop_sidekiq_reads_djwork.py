"""Sidekiq's API and Web UI read a live djwork cluster; Sidekiq's process API controls a djwork worker.

Sidekiq 6.4.1 on bookworm, 7.3.2 in CI's trixie leg (.ci/trixie).

One djwork worker per module holds three busy jobs while the Ruby side reads:
jobs waiting in two queues (one with keyword arguments), retries on their
first and later attempts, dead jobs (exhausted, ``retry: 0``, unknown class,
invalid JSON), scheduled jobs (single and bulk). Sidekiq's API must read all
of it without an exception, Sidekiq::Workers must list djwork's busy jobs
(6.4.1 reads ``<identity>:workers``), and Sidekiq::Web on WEBrick must answer
200 everywhere. The wire checks (docs/wire.md, Checks) are asserted on the raw
keys of the same cluster. Sidekiq::Process#quiet! and #stop! then drive a second
djwork worker through quiet and a clean exit.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
import time
import zlib

import pytest

from djwork import client
from djwork.payload import build
from tests.helpers_worker import Workers, decode, wait_beats, wait_until
from tests.interop import jobs
from tests.interop.helpers import RubyFleet, move_due, ruby, stop_workers
from tests.support.signals import assert_quiet_with_the_beat_that_took_the_signal

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("sidekiq_version")]

HOLD_SECONDS = 240
QUEUE_NAME = re.compile(r"\A[a-z_:.\-0-9]+\Z", re.I)
TODAY = re.compile(r"\Astat:(processed|failed):\d{4}-\d{2}-\d{2}\Z")


@pytest.fixture(scope="module")
def fleet(redis, redis_url, tmp_path_factory):
    directory = tmp_path_factory.mktemp("interop-reads")
    djwork_workers = Workers(directory, redis_url)
    ruby_processes = RubyFleet(directory, redis_url)
    try:
        yield djwork_workers, ruby_processes
    finally:
        redis.set(jobs.RELEASE, "1")  # let the held jobs end, so the worker can stop cleanly
        try:
            stop_workers(djwork_workers)
        finally:
            ruby_processes.cleanup()


def in_set(redis, key: str, **match) -> list[dict]:
    jobs_ = [json.loads(member) for member in redis.zrange(key, 0, -1)]
    return [job for job in jobs_ if all(job.get(k) == v for k, v in match.items())]


@pytest.fixture(scope="module")
def cluster(redis, fleet):
    """Build the cluster once; returns what the tests look for."""
    djwork_workers, _ = fleet
    worker = djwork_workers.start("-c", "3", "-q", "default", "-q", "interop", "--tag", "interop",
                                  overrides={"LABELS": ["interop", "reads"]}, label="cluster")
    identity = worker.identity(redis)

    # A retry on its second attempt (retry_count 1, retried_at), then one on its first.
    later = jobs.fail.set(queue="interop", retry=3, backtrace=5).delay("r-later").jid
    wait_until(lambda: in_set(redis, "retry", jid=later), 10, "the first failure")
    move_due(redis)
    wait_until(lambda: in_set(redis, "retry", jid=later, retry_count=1), 10, "the second failure")
    first = jobs.fail.set(queue="interop", retry=3, backtrace=True, tags=["wire", "interop"]).delay("r-first").jid
    # Dead: retry 0 (Ruby's truthy 0: no retries, then dead), an unknown class, invalid JSON.
    dead_zero = jobs.fail.set(queue="interop", retry=0).delay("d-zero").jid
    unknown = client.push(build("NoSuchJobAnywhere", ["u"], None, queue="interop"))
    redis.lpush("queue:interop", "{not json")
    wait_until(lambda: in_set(redis, "retry", jid=first) and redis.zcard("dead") == 3, 10,
               "the first failure and three dead jobs")
    # Sidekiq's backoff brings 'first' back after 15-25 s, and on a loaded machine the module's readers outlast
    # that (one saw 4 of the 5 entries): the scores djwork gave are kept for the backoff check, then the entries
    # are pinned an hour out, where the worker's poller leaves them for every reader.
    retry_scores = {json.loads(member)["jid"]: score for member, score in redis.zrange("retry", 0, -1, withscores=True)}
    redis.zadd("retry", {member: score + 3600 for member, score in redis.zrange("retry", 0, -1, withscores=True)},
               xx=True)

    # Scheduled: one at a time and in bulk, far in the future.
    scheduled = [jobs.record.set(queue="interop").perform_in(3600, "s-in").jid,
                 jobs.record.perform_at(time.time() + 7200, "s-at", note="kw").jid,
                 *(ref.jid for ref in jobs.record.set(countdown=5400).delay_many([("s-bulk-1",), ("s-bulk-2",)]))]

    # Busy: three held jobs fill the worker; what comes after them waits in its queue.
    held = [ref.jid for ref in jobs.hold.delay_many([(f"h{n}", HOLD_SECONDS) for n in range(3)])]
    # Each event its own wait: the three jobs started (the threads were free), then a beat that shows them (an
    # idle run once gave the two one shared 10 s).
    wait_until(lambda: all(redis.hget(jobs.STARTS, f"h{n}") for n in range(3)), 30, "the three held jobs to start")
    wait_until(lambda: redis.hget(identity, "busy") == b"3" and redis.hlen(f"{identity}:workers") == 3, 10,
               "three busy threads in the heartbeat")
    waiting = [jobs.record.delay("w-plain").jid, jobs.record.delay("w-kwargs", flag=True, n=[1, 2]).jid,
               jobs.record.set(queue="low").delay("w-low").jid]
    wait_until(lambda: int(redis.get("stat:failed") or 0) >= 6, 10, "the failure counters flushed")
    return {"worker": worker, "identity": identity, "held": held, "waiting": waiting, "scheduled": scheduled,
            "retry": {"first": first, "later": later}, "dead": {"zero": dead_zero, "unknown": unknown},
            "retry_scores": retry_scores}


# --- Sidekiq's API ---------------------------------------------------------------------------------
def test_sidekiq_api_reads_live_djwork_cluster(cluster, redis, redis_url):
    seen = ruby(redis_url, "api_read.rb")
    identity = cluster["identity"]

    (process,) = [p for p in seen["processes"] if p["identity"] == identity]
    assert process["pid"] == cluster["worker"].pid and process["hostname"]
    assert process["busy"] == 3 and process["quiet"] == "false" and process["stopping"] is False
    assert process["concurrency"] == 3 and process["queues"] == ["default", "interop"]
    assert process["tag"] == "interop" and process["labels"] == ["interop", "reads"]
    assert abs(process["beat"] - time.time()) < 10 and abs(process["started_time"] - time.time()) < 300
    assert process["rss"] > 0 and process["version"].startswith("djwork")

    # Sidekiq::Workers (6.4.1 reads <identity>:workers) lists djwork's three busy jobs.
    busy = [w for w in seen["workers"] if w["process"] == identity]
    assert sorted(w["jid"] for w in busy) == sorted(cluster["held"])
    assert {w["klass"] for w in busy} == {"tests.interop.jobs.hold"} and {w["queue"] for w in busy} == {"default"}
    assert all(isinstance(w["run_at"], int) and abs(w["run_at"] - time.time()) < 120 for w in busy)
    assert seen["workers_size"] == 3 and seen["stats"]["workers_size"] == 3

    stats = seen["stats"]
    assert stats["enqueued"] == 3 and stats["queues"] == {"default": 2, "low": 1, "interop": 0}
    assert stats["scheduled_size"] == 4 and stats["retry_size"] == 2 and stats["dead_size"] == 3
    assert stats["processes_size"] == 1
    assert 0 <= stats["default_queue_latency"] < 60
    assert stats["processed"] == stats["failed"] == 6  # six failed runs (failures count as processed)
    today = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    assert stats["history_processed"][today] == stats["history_failed"][today] == 6

    queues = {q["name"]: q for q in seen["queues"]}
    assert [job["jid"] for job in reversed(queues["default"]["jobs"])] == cluster["waiting"][:2]
    kw = queues["default"]["jobs"][0]
    assert kw["args"] == ["w-kwargs"] and kw["klass"] == "tests.interop.jobs.record"  # kwargs ride along unseen
    assert kw["item"]["kwargs"] == {"flag": True, "n": [1, 2]}
    assert 0 <= queues["default"]["latency"] < 60 and queues["low"]["size"] == 1

    retries = {entry["jid"]: entry for entry in seen["retry"]}
    assert retries[cluster["retry"]["first"]]["retry_count"] == 0
    assert retries[cluster["retry"]["first"]]["tags"] == ["wire", "interop"]
    assert retries[cluster["retry"]["later"]]["retry_count"] == 1
    for entry in retries.values():
        assert entry["error_class"] == "RuntimeError" and entry["error_message"].startswith("interop fail")
        assert entry["error"] is True and entry["queue"] == "interop"
        assert entry["error_backtrace"] and all(isinstance(line, str) for line in entry["error_backtrace"])
    assert len(retries[cluster["retry"]["later"]]["error_backtrace"]) == 5  # backtrace: 5 lines
    dead = {entry["jid"]: entry for entry in seen["dead"]}
    assert dead[cluster["dead"]["zero"]]["error_class"] == "RuntimeError"
    assert dead[cluster["dead"]["unknown"]]["error_class"] == "djwork.UnknownJobClass"
    (invalid,) = [e for e in dead.values() if e["klass"] == "djwork.InvalidPayload"]
    assert invalid["args"] == ["{not json"]
    scheduled = {entry["jid"]: entry for entry in seen["scheduled"]}
    assert set(scheduled) == set(cluster["scheduled"])
    for entry in scheduled.values():
        assert "at" not in entry["item"] and entry["at"] > time.time() + 3000
    # The only djwork process won the election (docs/periodic.md): Sidekiq's API names it the leader.
    assert seen["process_set"] == {"size": 1, "total_concurrency": 3, "total_rss_in_kb": process["rss"],
                                   "leader": identity}


@pytest.fixture(scope="module")
def web(fleet):
    _, ruby_processes = fleet
    return ruby_processes.web()


def test_sidekiq_web_answers_200_on_webrick(cluster, web, redis_url):
    seen = ruby(redis_url, "api_read.rb")
    pages = ["/", "/busy", "/queues", "/retries", "/scheduled", "/morgue", "/stats", "/stats/queues",
             *(f"/queues/{q['name']}" for q in seen["queues"]),
             *(f"/retries/{e['web_key']}" for e in seen["retry"]),
             *(f"/scheduled/{e['web_key']}" for e in seen["scheduled"]),
             *(f"/morgue/{e['web_key']}" for e in seen["dead"])]
    assert len(pages) == 8 + 3 + 2 + 4 + 3
    bodies = {}
    for path in pages:
        status, body = web.get(path)
        assert status == 200, f"GET {path} -> {status}\n{body[:3000]}"
        bodies[path] = body
    assert cluster["identity"] in bodies["/busy"] and "tests.interop.jobs.hold" in bodies["/busy"]
    for kind in ("retry", "dead"):
        for entry in seen[kind]:
            page = bodies[f"/{'retries' if kind == 'retry' else 'morgue'}/{entry['web_key']}"]
            assert entry["jid"] in page and entry["error_class"] in page
    assert "w-kwargs" in bodies["/queues/default"]


# --- docs/wire.md, Checks, on the raw keys djwork wrote -------------------------------------------
def hash_of(redis, key: str) -> dict[str, str]:
    return {decode(k): decode(v) for k, v in redis.hgetall(key).items()}


def test_wire_processes_p1_to_p17(cluster, redis):
    identity = cluster["identity"]
    members = [decode(m) for m in redis.smembers("processes")]
    assert members == [identity]
    fields = hash_of(redis, identity)
    assert 0 < redis.ttl(identity) <= 60  # P1/P2
    beat = float(fields["beat"])
    wait_until(lambda: float(redis.hget(identity, "beat")) > beat, 5, "the next beat refreshing the hash")
    assert 0 < redis.ttl(identity) <= 60
    assert {"info", "busy", "beat", "quiet", "rss", "rtt_us"} <= set(fields)  # P3
    assert fields["quiet"] in ("true", "false")  # P4
    assert re.fullmatch(r"\d+", fields["busy"])  # P5
    assert re.fullmatch(r"\d+\.\d+(e[+-]?\d+)?", fields["beat"]) and abs(beat - time.time()) < 10  # P6
    info = json.loads(fields["info"])  # P7
    assert isinstance(info, dict)
    assert info["identity"] == identity  # P8
    assert isinstance(info["hostname"], str) and info["hostname"]  # P9
    assert type(info["pid"]) is int  # P10
    assert type(info["started_at"]) is float and abs(info["started_at"] - time.time()) < 600  # P11
    assert isinstance(info["queues"], list) and all(isinstance(q, str) for q in info["queues"])  # P12
    assert type(info["concurrency"]) is int and fields["concurrency"] == str(info["concurrency"])  # P13
    assert isinstance(info["labels"], list) and all(isinstance(x, str) for x in info["labels"])  # P15
    assert isinstance(info["weights"], list)  # P16
    assert all(isinstance(group, dict) and all(isinstance(k, str) and type(v) is int for k, v in group.items())
               for group in info["weights"])
    assert info["embedded"] is False  # P17
    assert isinstance(info["tag"], str) and isinstance(info["version"], str)


def test_wire_busy_threads_w0_to_w4(cluster, redis):
    identity = cluster["identity"]
    work, workers_ = hash_of(redis, f"{identity}:work"), hash_of(redis, f"{identity}:workers")
    assert work == workers_ and len(work) == 3  # W0: both names, same content
    for key in (f"{identity}:work", f"{identity}:workers"):
        assert 0 < redis.ttl(key) <= 60
    for value in work.values():
        entry = json.loads(value)
        assert isinstance(entry["queue"], str) and entry["queue"] == "default"  # W1
        assert type(entry["run_at"]) is int and abs(entry["run_at"] - time.time()) < 300  # W2
        assert isinstance(entry["payload"], str)  # W3 + W4b: the job JSON as a string
        assert json.loads(entry["payload"])["jid"] in cluster["held"]  # W4


def stored_jobs(redis) -> list[tuple[str, dict]]:
    """(where, job) for every job djwork stored: queues, the three sorted sets, the work hashes."""
    out = []
    for key in redis.scan_iter("queue:*"):
        out += [(decode(key), json.loads(raw)) for raw in redis.lrange(key, 0, -1)]
    for key in ("schedule", "retry", "dead"):
        out += [(key, json.loads(raw)) for raw in redis.zrange(key, 0, -1)]
    for value in hash_of(redis, f"{cluster_identity(redis)}:work").values():
        out.append(("work", json.loads(json.loads(value)["payload"])))
    return out


def cluster_identity(redis) -> str:
    (member,) = redis.smembers("processes")
    return decode(member)


def test_wire_jobs_j0_to_j10(cluster, redis):
    stored = stored_jobs(redis)
    assert len(stored) == 3 + 4 + 2 + 3 + 3
    now = time.time()
    for where, job in stored:
        assert isinstance(job, dict), where  # J0
        assert isinstance(job["class"], str) and job["class"]  # J1
        assert isinstance(job["args"], list)  # J2
        assert isinstance(job["jid"], str) and re.fullmatch(r"[0-9a-f]{24}", job["jid"])  # J3, J3b
        assert isinstance(job["queue"], str) and QUEUE_NAME.match(job["queue"])  # J4
        assert job["retry"] is True or job["retry"] is False or type(job["retry"]) is int  # J5
        assert type(job["created_at"]) is float and now - 600 < job["created_at"] <= now  # J6: seconds, not ms
        if where.startswith("queue:") or where in ("work", "retry", "dead"):
            assert type(job["enqueued_at"]) is float and now - 600 < job["enqueued_at"] <= now, where  # J7
        if where == "schedule":
            assert "at" not in job  # J8
        if "tags" in job:
            assert isinstance(job["tags"], list) and all(isinstance(t, str) for t in job["tags"])  # J9
        if "error_backtrace" in job:  # J10: strict base64 of zlib-deflated JSON lines
            raw = job["error_backtrace"]
            assert "\n" not in raw and raw.startswith("eJ")
            lines = json.loads(zlib.decompress(base64.b64decode(raw, validate=True)))
            assert lines and all(isinstance(line, str) for line in lines)


def test_wire_retry_entries_r1_to_r5(cluster, redis):
    entries = in_set(redis, "retry") + in_set(redis, "dead")
    assert len(entries) == 5
    for job in entries:
        assert isinstance(job["error_class"], str) and job["error_class"]  # R1
        assert isinstance(job["error_message"], str)  # R2
        assert type(job["retry_count"]) is int and job["retry_count"] >= 0  # R3
        assert type(job["failed_at"]) is float  # R4
        if job["retry_count"] > 0:
            assert type(job["retried_at"]) is float and job["retried_at"] >= job["failed_at"]  # R5
        else:
            assert "retried_at" not in job
    (later,) = in_set(redis, "retry", jid=cluster["retry"]["later"])
    assert later["retry_count"] == 1
    for member in redis.zrange("retry", 0, -1):  # Sidekiq's backoff, on the scores djwork gave (before the pin)
        job = json.loads(member)
        score = cluster["retry_scores"][job["jid"]]
        count = job["retry_count"]
        base = job.get("retried_at", job["failed_at"])
        assert count**4 + 15 <= score - base <= count**4 + 15 + 9 * (count + 1) + 1


def test_wire_sorted_sets_z0_z1(cluster, redis):
    now = time.time()
    for key in ("schedule", "retry", "dead"):
        assert decode(redis.type(key)) == "zset"  # Z0
        for member, score in redis.zrange(key, 0, -1, withscores=True):
            assert now - 86400 < score < now + 86400, (key, score)  # Z1: epoch seconds, not ms
            job = json.loads(member)
            assert {"class", "args", "jid", "queue"} <= set(job)  # the full job JSON


def test_wire_queues_q1_q2(cluster, redis):
    listed = {decode(m) for m in redis.smembers("queues")}
    lists = {decode(k)[len("queue:"):] for k in redis.scan_iter("queue:*")}
    assert lists <= listed  # Q1
    assert listed == {"default", "interop", "low"}
    assert all(QUEUE_NAME.match(name) for name in listed)  # Q2


def test_wire_counters_t1_to_t3(cluster, redis):
    processed, failed = int(redis.get("stat:processed")), int(redis.get("stat:failed"))
    assert redis.get("stat:processed") == str(processed).encode() and failed <= processed  # T1
    today = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")  # T2: the UTC date
    assert int(redis.get(f"stat:processed:{today}")) == processed
    assert int(redis.get(f"stat:failed:{today}")) == failed
    assert 5 * 365 * 86400 - 120 < redis.ttl(f"stat:processed:{today}") <= 5 * 365 * 86400
    names = {decode(k) for k in redis.scan_iter("stat:*")}
    assert all(name in ("stat:processed", "stat:failed") or TODAY.match(name) for name in names), names  # T3


def test_wire_leader_l1(cluster, redis):
    # L1: the lease holds a live process's identity, with a TTL (it lapses if its holder dies).
    leader = redis.get("dear-leader")
    assert leader == cluster["identity"].encode() and redis.sismember("processes", leader)
    assert 0 < redis.pttl("dear-leader") <= 30_000


# --- Sidekiq's process API on a djwork worker (S1) -------------------------------------------------
def test_sidekiq_process_quiet_and_stop_a_djwork_worker(cluster, fleet, redis, redis_url):
    djwork_workers, _ = fleet
    beat = 1.0
    worker = djwork_workers.start("-c", "2", "-q", "control", label="control",
                                  overrides={"HEARTBEAT_INTERVAL": beat, "TIMEOUT": 2})
    identity = worker.identity(redis)
    held = jobs.hold.set(queue="control").delay("control-held", HOLD_SECONDS).jid
    wait_until(lambda: redis.hget(identity, "busy") == b"1", 3 * beat, "the held job to show as busy")

    # An unknown signal is ignored, TTIN dumps threads; the list need not exist (it doesn't, until now).
    redis.lpush(f"{identity}-signals", "USR2")
    ruby(redis_url, "control.rb", "dump", identity)
    worker.wait_log("thread dump", 3 * beat)
    assert "no handler for signal 'USR2'" in worker.log() and worker.alive()

    # quiet!: the beat that takes the signal says quiet, Sidekiq reads it as stopping, nothing new is fetched.
    # Counted in beats, not timed: Ruby's own start (seconds under load) came inside the timed span.
    ruby(redis_url, "control.rb", "quiet", identity)
    assert_quiet_with_the_beat_that_took_the_signal(redis, identity)
    (process,) = [p for p in ruby(redis_url, "api_read.rb")["processes"] if p["identity"] == identity]
    assert process["stopping"] is True and process["busy"] == 1
    queued = jobs.record.set(queue="control").delay("after-quiet").jid
    wait_beats(redis, identity, 2)  # two loops of its own in which it could have fetched the job
    assert [json.loads(raw)["jid"] for raw in redis.lrange("queue:control", 0, -1)] == [queued]
    assert not redis.hexists(jobs.COUNTS, "after-quiet")

    # stop!: the held job is pushed back (to the pop end), the process leaves `processes` and exits 0.
    ruby(redis_url, "control.rb", "stop", identity)
    assert worker.wait_exit(2 * beat + 2 + 10) == 0
    assert not redis.sismember("processes", identity)
    assert not redis.exists(f"{identity}:work", f"{identity}:workers")
    assert [json.loads(raw)["jid"] for raw in redis.lrange("queue:control", 0, -1)] == [queued, held]
    assert 0 < redis.ttl(identity) <= 60  # the hash is left to expire, as Sidekiq leaves it
    assert cluster_identity(redis) == cluster["identity"]  # the other worker is untouched


def test_sidekiq_web_busy_buttons_quiet_and_stop_a_djwork_worker(cluster, fleet, web, redis):
    """The Busy page's Quiet and Stop buttons (POST /busy with the session's CSRF token) on a djwork worker."""
    djwork_workers, _ = fleet
    beat = 1.0
    worker = djwork_workers.start("-c", "1", "-q", "buttons", label="buttons", overrides={"HEARTBEAT_INTERVAL": beat})
    identity = worker.identity(redis)
    wait_until(lambda: identity in web.get("/busy")[1], 5, "the worker on the Busy page")
    assert web.post("/busy", {"identity": identity, "quiet": "1"})[0] == 403  # no token: refused
    assert not redis.exists(f"{identity}-signals")
    token = web.form_token("/busy")
    assert web.post("/busy", {"identity": identity, "quiet": "1", "authenticity_token": token})[0] == 302
    assert_quiet_with_the_beat_that_took_the_signal(redis, identity)
    token = web.form_token("/busy")
    assert web.post("/busy", {"identity": identity, "stop": "1", "authenticity_token": token})[0] == 302
    assert worker.wait_exit(2 * beat + 10) == 0
    assert not redis.sismember("processes", identity)
    assert identity not in web.get("/busy")[1]
