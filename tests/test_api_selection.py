"""djwork.api's job lookup and selection (the CLI's retry/delete/kill with filters, and `job <jid>`)."""

from __future__ import annotations

import time

from djwork import api
from tests.browser import seed


def test_select_entries_matches_class_or_text_and_says_how_far_it_looked(raw_redis):
    wanted = [seed.failed(seed.job("Billing::Invoice", args=[n])) for n in range(3)]
    other = seed.failed(seed.job("Mail::Send", args=["invoice@example.com"]))
    for n, job in enumerate([*wanted, other]):
        seed.zadd(raw_redis, "dead", job, time.time() - n)
    chosen = api.select_entries(api.DeadSet(), klass="Billing::Invoice")
    assert {entry.jid for entry in chosen.entries} == {job["jid"] for job in wanted} and chosen.complete
    assert [entry.jid for entry in api.select_entries(api.DeadSet(), term="INVOICE@").entries] == [other["jid"]]
    bounded = api.select_entries(api.DeadSet(), klass="Billing::Invoice", scan_max=2)
    assert (len(bounded.entries), bounded.scanned, bounded.total, bounded.complete) == (2, 2, 4, False)
    limited = api.select_entries(api.DeadSet(), klass="Billing::Invoice", limit=1)
    assert len(limited.entries) == 1 and limited.limit_reached and not limited.complete


def test_act_on_skips_an_entry_that_left_meanwhile_and_acts_on_the_rest(raw_redis):
    jobs = [seed.failed(seed.job("Billing::Invoice", args=[n])) for n in range(2)]
    for job in jobs:
        seed.zadd(raw_redis, "dead", job, time.time())
    entries = api.select_entries(api.DeadSet(), klass="Billing::Invoice").entries
    raw_redis.zrem("dead", entries[0].job.member)  # another operator got there first
    outcome = api.act_on(api.DeadSet(), entries, "retry")
    assert outcome.done == 1 and len(outcome.problems) == 1 and "no longer in dead" in outcome.problems[0]
    assert raw_redis.llen("queue:default") == 1 and raw_redis.zcard("dead") == 0


def test_select_queue_jobs_reads_the_queue_newest_first(raw_redis):
    jobs = [seed.job("A" if n % 2 else "B", args=[n]) for n in range(5)]
    for job in jobs:
        seed.push(raw_redis, job)
    chosen = api.select_queue_jobs(api.Queue("default"), klass="A")
    assert [job.jid for job in chosen.entries] == [jobs[3]["jid"], jobs[1]["jid"]] and chosen.complete


def test_find_job_in_each_place_with_its_runs(raw_redis):
    queued, scheduled, retrying, dead = (seed.job(klass) for klass in ("Q", "S", "R", "D"))
    seed.push(raw_redis, queued)
    seed.zadd(raw_redis, "schedule", scheduled, time.time() + 60)
    seed.zadd(raw_redis, "retry", seed.failed(retrying), time.time() + 60)
    seed.zadd(raw_redis, "dead", seed.failed(dead), time.time())
    running = seed.job("Running")
    seed.process(raw_redis, "web:1:aa", busy_jobs=[running])
    seed.history(raw_redis, jid=dead["jid"], status="retry")
    seed.history(raw_redis, jid=seed.jid(), status="ok")
    seed.history(raw_redis, jid=dead["jid"], status="dead")
    places = {job["jid"]: api.find_job(job["jid"]) for job in (queued, scheduled, retrying, dead, running)}
    assert [(found.where, found.job.klass) for found in places.values()] == [
        ("queued", "Q"), ("scheduled", "S"), ("retry", "R"), ("dead", "D"), ("running", "Running")]
    assert places[dead["jid"]].address == api.DeadSet().find_job(dead["jid"]).address
    assert [run.status for run in places[dead["jid"]].runs] == ["dead", "retry"]
    assert api.find_job("nosuchjid").where == "gone" and api.find_job("nosuchjid").job is None


def test_history_filters_by_jid(raw_redis):
    mine = seed.jid()
    seed.history(raw_redis, jid=mine, status="retry")
    seed.history(raw_redis, status="ok")
    assert [run.jid for run in api.History.recent(10, jid=mine).runs] == [mine]
