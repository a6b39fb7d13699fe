"""djwork and a real Ruby Sidekiq server (the `sidekiq` CLI: 6.4.1 on bookworm, 7.3.2 in CI's trixie leg) on one Redis.

* djwork -> Ruby: jobs djwork enqueues (now, scheduled, in bulk) under a Ruby
  class name run in the Sidekiq server (the Ruby jobs write to Redis).
* djwork reads a cluster run only by Ruby: djwork.api and the dashboard
  (Django test client) over Ruby's processes, busy threads (6.4.1's
  ``<identity>:workers``, 7.x's ``<identity>:work``), queues and Ruby-written
  retry/dead/schedule entries.
* Sidekiq 7's capsules: a capsule's queue runs djwork-enqueued jobs, and
  djwork reads the process's per-capsule ``weights``.
* djwork.api's Process.quiet()/stop() drive a Ruby Sidekiq process.
* A mixed fleet: one Ruby and one djwork process on the same queue, 2,000 jobs
  of each kind; with UNKNOWN_CLASS="retry" every job runs exactly once, in
  its own runtime (Ruby, symmetrically, retries what it can't load), with
  both running to the end; and idle, both win their share of the jobs that
  land on an empty shared queue.

One Sidekiq server serves the module (queues ``ruby`` and ``shared``); the
control and mixed-fleet tests start their own.
"""

from __future__ import annotations

import json
import signal
import time

import pytest
from django.urls import reverse

from djwork import api
from tests.helpers_worker import Workers, decode, wait_until
from tests.interop import jobs, ruby_jobs
from tests.interop.helpers import RubyFleet, move_due, ruby, ruby_beat, sidekiq_major, sidekiq_probe, stop_workers

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("sidekiq_version")]

RUBY_COUNTS = "t:ruby:counts"


@pytest.fixture(scope="module")
def fleet(redis, redis_url, tmp_path_factory):
    directory = tmp_path_factory.mktemp("interop-server")
    ruby_processes = RubyFleet(directory, redis_url)
    djwork_workers = Workers(directory, redis_url)
    try:
        yield ruby_processes, djwork_workers
    finally:
        redis.set("t:ruby:release", "1")
        redis.set(jobs.RELEASE, "1")
        try:
            stop_workers(djwork_workers)
        finally:
            ruby_processes.cleanup()


@pytest.fixture(scope="module")
def sidekiq(fleet, redis):
    ruby_processes, _ = fleet
    server = ruby_processes.sidekiq("ruby", "shared", concurrency=5, tag="interop", label="sidekiq")
    server.identity(redis)
    return server


@pytest.fixture
def data(redis, sidekiq):
    """Each test starts from empty data: every key goes except the live Sidekiq server's own."""
    identity = sidekiq.identity(redis)
    keep = {"processes", identity, f"{identity}:workers", f"{identity}:work"}
    for key in redis.scan_iter():
        if decode(key) not in keep:
            redis.delete(key)
    for member in redis.smembers("processes"):
        if decode(member) != identity:
            redis.srem("processes", member)
    return redis


def ruby_facts(redis) -> dict[str, dict]:
    rows = [json.loads(raw) for raw in reversed(redis.lrange("t:ruby:log", 0, -1))]
    return {row["args"][0]: row for row in rows}


def hash_counts(redis, key: str) -> dict[str, int]:
    return {decode(k): int(v) for k, v in redis.hgetall(key).items()}


# --- djwork -> Ruby ----------------------------------------------------------------------------------
def test_djwork_jobs_run_in_sidekiq(data, redis, sidekiq):
    job = ruby_jobs.interop_ruby_job
    start = time.time()
    jids = {
        "now": job.delay("now", 1, {"nested": ["ünï", None, 2.5]}).jid,
        "kwargs": job.delay("kwargs", flag=True).jid,  # kwargs travel in a field Sidekiq ignores
        "in-1": job.perform_in(1, "in-1").jid,
        "at-2": job.perform_at(start + 2, "at-2").jid,
        "countdown": job.apply_async(["countdown"], countdown=1).jid,
    }
    for key, ref in zip(["b0", "b1", "b2"], job.delay_many([("b0",), ("b1",), ("b2",)]), strict=True):
        jids[key] = ref.jid
    for key, ref in zip(["sb0", "sb1"], job.set(countdown=1).delay_many([("sb0",), ("sb1",)]), strict=True):
        jids[key] = ref.jid
    assert redis.zcard("schedule") == 5

    wait_until(lambda: set(hash_counts(redis, RUBY_COUNTS)) == set(jids), 20,
               "every djwork-enqueued job to run in Ruby Sidekiq")
    time.sleep(1.0)
    assert hash_counts(redis, RUBY_COUNTS) == dict.fromkeys(jids, 1)
    facts = ruby_facts(redis)
    assert {key: fact["jid"] for key, fact in facts.items()} == jids
    assert {fact["class"] for fact in facts.values()} == {"InteropRubyJob"}
    assert facts["now"]["args"] == ["now", 1, {"nested": ["ünï", None, 2.5]}]
    assert facts["kwargs"]["args"] == ["kwargs"]
    assert facts["at-2"]["time"] >= start + 2 - 0.05 and facts["in-1"]["time"] >= start + 1 - 0.05
    assert all(facts[key]["pid"] == sidekiq.pid for key in jids)
    assert redis.zcard("schedule") == 0 and redis.zcard("retry") == 0
    wait_until(lambda: int(redis.get("stat:processed") or 0) >= len(jids), 2 * ruby_beat() + 1,
               "Ruby's heartbeat to flush stat:processed")


# --- djwork reads a Ruby-only cluster ----------------------------------------------------------------
def test_djwork_api_and_dashboard_read_a_ruby_only_cluster(data, redis, redis_url, sidekiq, admin_client):
    identity = sidekiq.identity(redis)
    ruby(redis_url, "client.rb", stdin=[
        {"op": "push", "item": {"class": "RubySlowJob", "args": ["slow-1", 60], "queue": "ruby"}},
        {"op": "push", "item": {"class": "RubySlowJob", "args": ["slow-2", 60], "queue": "ruby"}},
        {"op": "push", "item": {"class": "RubyFailJob", "args": ["rf-retry"], "queue": "ruby", "retry": 3,
                                "backtrace": True, "tags": ["ruby"]}},
        {"op": "push", "item": {"class": "RubyFailJob", "args": ["rf-dead"], "queue": "ruby", "retry": 0}},
        {"op": "push", "item": {"class": "InteropRubyJob", "args": ["later"], "queue": "ruby",
                                "at": time.time() + 3600}},
        {"op": "push_bulk", "item": {"class": "InteropRubyJob", "args": [["w1"], ["w2"]], "queue": "ruby-waiting"}},
        {"op": "push", "item": {"class": "InteropRubyJob", "args": ["w-default"]}},
    ])
    try:
        wait_until(lambda: redis.hget(identity, "busy") == b"2" and redis.zcard("retry") == 1
                   and redis.zcard("dead") == 1, 3 * ruby_beat(), "two busy Ruby threads, a retry and a dead job")
        wait_until(lambda: int(redis.get("stat:failed") or 0) == 2, 2 * ruby_beat(), "Ruby's stat:failed")
        # 6.4.1 writes its busy threads under <identity>:workers only, 7.x under <identity>:work only.
        written, unwritten = (f"{identity}:work", f"{identity}:workers")
        if sidekiq_major() < 7:
            written, unwritten = unwritten, written
        assert redis.hlen(written) == 2 and not redis.exists(unwritten)

        stats = api.Stats.fetch()
        assert stats.problems == ()
        assert (stats.processes, stats.busy, stats.retries, stats.dead, stats.scheduled) == (1, 2, 1, 1, 1)
        assert stats.queues == {"ruby": 0, "ruby-waiting": 2, "default": 1}
        assert stats.failed == 2 and 0 <= stats.default_queue_latency < 60

        (process,) = api.ProcessSet().all()
        assert process.identity == identity and process.problems == []
        assert process.pid == sidekiq.pid and process.hostname and process.tag == "interop"
        assert process.queues == ["ruby", "shared"] and process.concurrency == 5 and process.busy == 2
        assert process.stopping is False and process.quiet_flag == "false"
        assert process.version == (sidekiq_probe()[0] if sidekiq_major() >= 7 else "")  # 6.4's info has none
        assert process.started_at is not None and process.last_beat is not None and process.rss_kb > 0
        work = api.WorkSet().all()
        assert sorted(w.job.args[0] for w in work) == ["slow-1", "slow-2"]
        assert all(w.identity == identity and w.queue == "ruby" and w.run_at and w.problems == [] for w in work)
        assert api.WorkSet.size() == 2

        waiting = api.Queue("ruby-waiting").jobs()
        assert [record.args for record in waiting.items] == [["w2"], ["w1"]]
        assert all(record.problems == [] and record.klass == "InteropRubyJob" for record in waiting.items)
        (retry,) = api.RetrySet().page().items
        assert retry.job.problems == [] and retry.job.error_class == "ArgumentError"
        assert retry.job.error_message == "RubyFailJob rf-retry fails" and retry.job.retry_count == 0
        assert retry.job.tags == ["ruby"] and any("perform" in line for line in retry.job.error_backtrace)
        # 6.4 writes MIME base64 (a newline every 60 characters), 7.x strict base64: djwork decodes both.
        assert ("\n" in retry.job.item["error_backtrace"]) == (sidekiq_major() < 7)
        (dead,) = api.DeadSet().page().items
        assert dead.job.problems == [] and dead.job.args == ["rf-dead"]
        (scheduled,) = api.ScheduledSet().page().items
        assert scheduled.job.problems == [] and scheduled.score > time.time() + 3000

        pages = [reverse(f"djwork_dashboard:{name}") for name in ("overview", "stats_json", "busy", "queues",
                                                                   "history")]
        pages += [reverse("djwork_dashboard:queue", args=[name]) for name in ("ruby", "ruby-waiting", "default")]
        pages += [reverse("djwork_dashboard:set", args=[kind]) for kind in ("scheduled", "retries", "dead")]
        entries = {"retries": retry, "dead": dead, "scheduled": scheduled}
        pages += [reverse("djwork_dashboard:set_entry", args=[kind, entry.address]) for kind, entry in entries.items()]
        bodies = {}
        for page in pages:
            response = admin_client.get(page)
            assert response.status_code == 200, page
            bodies[page] = response.content.decode()
        assert identity in bodies[reverse("djwork_dashboard:busy")]
        assert "RubySlowJob" in bodies[reverse("djwork_dashboard:busy")]
        assert "RubyFailJob rf-retry fails" in bodies[reverse("djwork_dashboard:set_entry",
                                                              args=["retries", retry.address])]
        assert "w1" in bodies[reverse("djwork_dashboard:queue", args=["ruby-waiting"])]
        overview = json.loads(bodies[reverse("djwork_dashboard:stats_json")])
        assert overview["busy"] == 2 and overview["processes"] == 1

        # djwork's admin writes are Sidekiq's: a scheduled Ruby job added to its queue now runs in Ruby.
        api.ScheduledSet().add_to_queue(scheduled)
        wait_until(lambda: redis.hget(RUBY_COUNTS, "later") == b"1", 10, "the Ruby job djwork moved to run")
        assert ruby_facts(redis)["later"]["jid"] == scheduled.jid
    finally:
        redis.set("t:ruby:release", "1")
        wait_until(lambda: redis.hmget(RUBY_COUNTS, "slow-1", "slow-2") == [b"1", b"1"] or not sidekiq.alive(),
                   10, "the slow Ruby jobs to end")
        redis.delete("t:ruby:release")


# --- djwork.api controls a Ruby process -------------------------------------------------------------
def test_djwork_api_quiets_and_stops_a_ruby_process(data, redis, fleet):
    ruby_processes, _ = fleet
    server = ruby_processes.sidekiq("ruby-control", concurrency=2, tag="control", label="sidekiq-control")
    identity = server.identity(redis)
    slow = ruby_jobs.ruby_slow_job.set(queue="ruby-control").delay("ctl-slow", 60).jid
    wait_until(lambda: redis.hget("t:ruby:starts", "ctl-slow"), 5, "the Ruby job to start")

    started = time.monotonic()
    api.ProcessSet.get(identity).quiet()
    # Sidekiq takes the signal on its next beat and reports it on the one after: two beats.
    wait_until(lambda: redis.hget(identity, "quiet") == b"true", 2 * ruby_beat() + 2, "quiet=true")
    assert time.monotonic() - started <= 2 * ruby_beat() + 2
    assert api.ProcessSet.get(identity).stopping
    after = ruby_jobs.interop_ruby_job.set(queue="ruby-control").delay("ctl-after-quiet").jid
    time.sleep(2.0)  # a quiet Sidekiq fetches nothing
    assert [json.loads(raw)["jid"] for raw in redis.lrange("queue:ruby-control", 0, -1)] == [after]

    api.ProcessSet.get(identity).stop()
    assert server.wait_exit(ruby_beat() + 2 + 10) == 0
    assert "Pushed 1 jobs back to Redis" in server.log() or "Bye!" in server.log()
    assert not redis.sismember("processes", identity) and not redis.exists(f"{identity}:workers")
    assert api.ProcessSet.get(identity) is None
    queued = [json.loads(raw)["jid"] for raw in redis.lrange("queue:ruby-control", 0, -1)]
    assert sorted(queued) == sorted([after, slow])  # the running job went back to its queue, nothing lost
    assert not hash_counts(redis, RUBY_COUNTS)


# --- mixed fleet ----------------------------------------------------------------------------------------
MIXED_JOBS = 2000
BUDGET = 100  # retries per job: each wrong pick uses one, and the bouncing must not exhaust them here


def push_mixed(redis_url: str, count: int) -> None:
    """``count`` MixedRubyJob (Sidekiq's client) and ``count`` djwork ``mixed`` jobs, interleaved in two rounds."""
    half = count // 2
    for chunk in range(2):
        keys_ = range(chunk * half, (chunk + 1) * half)
        ruby(redis_url, "client.rb", stdin=[{"op": "push_bulk", "item": {
            "class": "MixedRubyJob", "queue": "mixed", "retry": BUDGET, "args": [[f"r{n}"] for n in keys_]}}])
        jobs.mixed.set(queue="mixed", retry=BUDGET).delay_many([(f"p{n}",) for n in keys_])


def drain(redis, condition, timeout: float, message: str):
    """Wait for ``condition``, making every pending retry due now, again and again (Sidekiq's backoff is 15 s+)."""
    def step():
        move_due(redis)
        return condition()

    return wait_until(step, timeout, message, interval=0.3)


def test_mixed_fleet_runs_each_job_once_in_its_runtime(data, redis, redis_url, fleet):
    ruby_processes, djwork_workers = fleet
    server = ruby_processes.sidekiq("mixed", concurrency=5, tag="mixed", label="sidekiq-mixed")
    worker = djwork_workers.start("-c", "5", "-q", "mixed", label="mixed",
                                  overrides={"UNKNOWN_CLASS": "retry", "LOG_JOBS": False, "FETCH_TIMEOUT": 2})
    server.identity(redis)
    worker.identity(redis)
    push_mixed(redis_url, MIXED_JOBS)

    # Both run until every job has run in its own runtime: each sends what it can't load the retry way,
    # and the other takes it when it comes back (the retries' backoff is skipped by drain()).
    drain(redis, lambda: redis.hlen("t:mixed:ruby") == MIXED_JOBS and redis.hlen(jobs.MIXED) == MIXED_JOBS, 120,
          "the 2,000 Ruby and 2,000 djwork jobs to run")
    time.sleep(1.5)

    ruby_runs, djwork_runs = hash_counts(redis, "t:mixed:ruby"), hash_counts(redis, jobs.MIXED)
    assert ruby_runs == {f"r{n}": 1 for n in range(MIXED_JOBS)}  # Ruby ran its own, each once
    assert djwork_runs == {f"p{n}": 1 for n in range(MIXED_JOBS)}  # djwork ran its own, each once
    assert redis.llen("queue:mixed") == 0 and redis.zcard("retry") == 0 and redis.zcard("dead") == 0
    # Both runtimes took jobs they could not load and sent them the retry way, to be run by the other.
    via_djwork = {decode(v) for v in redis.hvals("t:mixed:ruby:bounced")}
    via_ruby = {decode(v) for v in redis.hvals(jobs.MIXED_BOUNCED)}
    assert via_djwork == {"djwork.UnknownJobClass"}, via_djwork
    assert via_ruby == {"NameError"}, via_ruby
    tries = [int(v) for v in redis.hvals("t:mixed:ruby:tries") + redis.hvals(jobs.MIXED_TRIES)]
    print(f"mixed fleet: {redis.hlen('t:mixed:ruby:bounced')} Ruby jobs came through djwork's retry path, "
          f"{redis.hlen(jobs.MIXED_BOUNCED)} djwork jobs through Ruby's, at most {max(tries)} wrong picks "
          f"for one job")
    assert max(tries) < BUDGET
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(10) == 0


ARRIVALS = 20


def test_idle_sidekiq_and_djwork_share_the_jobs_landing_on_a_shared_queue(data, redis, sidekiq, fleet):
    """Both idle on one queue: each job that lands goes to whichever blocked client waited longest.

    djwork's takers block in BLMOVE straight into the in-progress list, one per
    free slot, as Sidekiq's threads block in BRPOP; so djwork wins its share of
    the jobs landing on an empty queue (with a blocking peek it won none: every
    job went to Ruby first), and the ones Ruby takes come back through its
    retries until djwork gets them.
    """
    _, djwork_workers = fleet
    # FETCH_TIMEOUT as Sidekiq's BRPOP timeout (2 s): Redis serves the client blocked longest, so the side
    # that re-blocks more often (the suite's 1 s) would be behind in line most of the time.
    worker = djwork_workers.start("-c", "5", "-q", "shared", label="sharing",
                                  overrides={"UNKNOWN_CLASS": "retry", "FETCH_TIMEOUT": 2})
    worker.identity(redis)
    time.sleep(1.0)  # both sides idle and blocked on the queue
    # The module's Sidekiq server (5 threads) reads `shared` too. One job at a time, each onto an empty queue.
    for n in range(ARRIVALS):
        jobs.mixed.set(queue="shared", retry=25).delay(f"s{n}")
        wait_until(lambda: redis.llen("queue:shared") == 0, 5, "the job to be taken")
        time.sleep(0.1)
    try:
        drain(redis, lambda: redis.hlen(jobs.MIXED) + redis.zcard("dead") == ARRIVALS, 30,
              "every djwork job to run or die")
        assert redis.zcard("dead") == 0, [json.loads(m)["error_class"] for m in redis.zrange("dead", 0, -1)]
        assert hash_counts(redis, jobs.MIXED) == {f"s{n}": 1 for n in range(ARRIVALS)}
        through_ruby = redis.hlen(jobs.MIXED_BOUNCED)
        print(f"djwork took {ARRIVALS - through_ruby} of {ARRIVALS} jobs as they landed; "
              f"{through_ruby} went to Ruby first and came back through its retries")
        # 5 djwork takers against 5 Ruby threads: about half. A blocking peek took none.
        assert ARRIVALS - through_ruby >= ARRIVALS // 4
    finally:
        worker.send(signal.SIGTERM)
        worker.wait_exit(10)


# --- Sidekiq 7's capsules ------------------------------------------------------------------------------
def test_a_sidekiq_7_capsule_runs_djwork_jobs_and_djwork_reads_the_process(data, redis, fleet, admin_client):
    if sidekiq_major() < 7:
        pytest.skip("capsules are Sidekiq 7's (6.x has none); CI's trixie leg runs this against 7.3.2")
    ruby_processes, _ = fleet
    server = ruby_processes.sidekiq("ruby-main", concurrency=2, tag="capsules", label="sidekiq-capsules",
                                    capsule=("serial", "ruby-serial", 1))
    identity = server.identity(redis)
    try:
        # 7.x: `queues` flattens every capsule's, `concurrency` sums them, `weights` has one object per capsule.
        info = json.loads(redis.hget(identity, "info"))
        assert [sorted(group) for group in info["weights"]] == [["ruby-main"], ["ruby-serial"]]
        process = api.ProcessSet.get(identity)
        assert process.queues == ["ruby-main", "ruby-serial"] and process.concurrency == 3
        assert process.problems == []
        busy_page = admin_client.get(reverse("djwork_dashboard:busy"))
        assert busy_page.status_code == 200 and identity in busy_page.content.decode()

        # A djwork-enqueued job on the capsule's queue runs in the capsule's thread.
        jid = ruby_jobs.interop_ruby_job.set(queue="ruby-serial").delay("capsule").jid
        wait_until(lambda: redis.hget(RUBY_COUNTS, "capsule") == b"1", 10, "the capsule to run the djwork job")
        assert ruby_facts(redis)["capsule"]["jid"] == jid and ruby_facts(redis)["capsule"]["pid"] == server.pid
    finally:
        server.stop()
