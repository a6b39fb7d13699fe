"""djwork.api.Periodic (the read model and the operator's writes) and djwork.cron.locks, against the private Redis."""

from __future__ import annotations

import json

import pytest

from djwork import keys
from djwork.api import ApiError, Periodic, StaleEntry
from djwork.api import periodic as periodic_api
from djwork.conf import build_config
from djwork.cron import locks
from djwork.worker.history import append
from tests.browser import seed
from tests.support.periodic import BASE, HOUR, entry, queued, ticker_at

NIGHTLY = {"cron": "30 2 * * *", "job": "tests.periodic_jobs.tick", "name": "nightly", "tz": "Europe/Berlin",
           "args": ["n"], "catch_up": "none", "overlap": False}
HOURLY = entry(name="hourly", args=["h"])


def api(*entries) -> Periodic:
    return Periodic(build_config({"PERIODIC": list(entries), "TEST_CLOCK": {"start": BASE + 10.5 * HOUR,
                                                                             "origin": 0, "speed": 1}}))


def test_the_listing_shows_schedule_next_run_history_with_outcomes_and_skips(raw_redis):
    ticker_at(raw_redis, BASE + 0.25 * HOUR, HOURLY, NIGHTLY).run_once()
    ticker_at(raw_redis, BASE + 3.01 * HOUR, HOURLY, NIGHTLY).run_once()  # 3 h down: latest fires 03:00 only
    (fired,) = queued(raw_redis)
    seed.history(raw_redis, jid=fired["jid"], status="ok", klass=fired["class"])

    # Entries read on a clock that says 03:30 that day.
    seconds, micros = raw_redis.time()
    periodic = Periodic(build_config({"PERIODIC": [HOURLY, NIGHTLY], "TEST_CLOCK": {
        "origin": seconds + micros / 1e6, "start": BASE + 3.5 * HOUR}}))
    hourly, nightly = periodic.entries()
    assert (hourly.id, hourly.cron, hourly.tz, hourly.job, hourly.queue, hourly.args) == (
        "hourly", "0 * * * *", "UTC", "tests.periodic_jobs.tick", "periodic-out", ["h"])
    assert hourly.configured and not hourly.paused and not hourly.overdue and hourly.running_jid == ""
    assert hourly.last_slot.timestamp() == BASE + 3 * HOUR
    assert hourly.next_run_utc.timestamp() == BASE + 4 * HOUR
    assert hourly.missed == 2 and hourly.counters["fired"] == 1
    (run,) = hourly.runs
    assert (run.kind, run.jid, run.slot.timestamp(), run.skipped, run.outcome) == (
        "slot", fired["jid"], BASE + 3 * HOUR, 2, "ok")
    # 02:30 in Berlin is 00:30 UTC on 1 June: in the downtime, and 'none' skips it.
    assert nightly.next_run.isoformat() == "2026-06-02T02:30:00+02:00"
    assert nightly.next_run_utc.isoformat() == "2026-06-02T00:30:00+00:00"
    assert nightly.overlap is False and nightly.catch_up == "none" and nightly.missed == 1
    (skip,) = nightly.runs
    assert (skip.kind, skip.reason, skip.skipped, skip.jid, skip.outcome) == ("skipped", "missed", 1, "", "")


def test_outcomes_are_found_inside_batched_entries_within_a_bound_counted_in_runs(raw_redis, monkeypatch):
    ticker_at(raw_redis, BASE + 0.25 * HOUR, HOURLY).run_once()
    ticker_at(raw_redis, BASE + 3.01 * HOUR, HOURLY).run_once()
    (fired,) = queued(raw_redis)
    others = [(f"other-{n}", "app.jobs.Other", "default", "ok", BASE, 1.0, "", "") for n in range(399)]
    # The run is the oldest of a 300-run flush (two entries), with a 100-run flush after it: the 400th newest run.
    append(raw_redis, "host:1:abc", 10_000, [(fired["jid"], fired["class"], "periodic-out", "dead", BASE, 1.0,
                                              "RuntimeError", "boom"), *others[:299]])
    append(raw_redis, "host:1:abc", 10_000, others[299:])
    seconds, micros = raw_redis.time()

    def outcome() -> str:
        periodic = Periodic(build_config({"PERIODIC": [HOURLY], "TEST_CLOCK": {
            "origin": seconds + micros / 1e6, "start": BASE + 3.5 * HOUR}}))
        (hourly,) = periodic.entries()
        return hourly.runs[0].outcome

    assert outcome() == "dead"
    monkeypatch.setattr(periodic_api, "HISTORY_SCAN", 400)
    assert outcome() == "dead"
    monkeypatch.setattr(periodic_api, "HISTORY_SCAN", 399)  # 399 runs searched, though only 3 entries read
    assert outcome() == ""


def test_an_entry_no_longer_configured_stays_listed_with_its_history(raw_redis):
    ticker_at(raw_redis, BASE + 0.25 * HOUR, HOURLY, NIGHTLY).run_once()
    ticker_at(raw_redis, BASE + 1.01 * HOUR, HOURLY, NIGHTLY).run_once()
    # The next deploy drops "hourly"; its leader records only "nightly".
    ticker = ticker_at(raw_redis, BASE + 1.02 * HOUR, NIGHTLY)
    ticker.leader.term = 2
    ticker.run_once()
    nightly, hourly = api(NIGHTLY).entries()
    assert nightly.configured and not hourly.configured
    assert hourly.cron == "0 * * * *" and [run.kind for run in hourly.runs] == ["slot"]
    assert api(NIGHTLY).get("hourly").runs[0].jid == queued(raw_redis)[0]["jid"]
    with pytest.raises(StaleEntry):
        api(NIGHTLY).get("never-configured")
    with pytest.raises(StaleEntry, match="not configured in this deploy"):
        api(NIGHTLY).run_now("hourly")
    # A deploy with no entries at all still says so (no row of its own would).
    empty = ticker_at(raw_redis, BASE + 1.03 * HOUR)
    empty.leader.term = 3
    empty.run_once()
    assert [(entry.id, entry.configured) for entry in api().entries()] == [("hourly", False), ("nightly", False)]


def test_pause_unpause_and_run_now_with_the_configured_arguments(raw_redis):
    periodic = api(HOURLY, NIGHTLY)
    periodic.pause("hourly")
    assert periodic.get("hourly").paused and periodic.get("hourly").paused_at is not None
    jid = periodic.run_now("hourly")  # paused or not: the operator asked
    (job,) = queued(raw_redis)
    assert job["jid"] == jid and job["args"] == ["h"] and job["djwork_periodic"] == {"entry": "hourly"}
    assert periodic.get("hourly").runs[0].kind == "run-now"
    periodic.unpause("hourly")
    assert not periodic.get("hourly").paused
    with pytest.raises(StaleEntry):
        periodic.pause("nope")


def test_run_now_of_a_no_overlap_entry_takes_its_lock_and_is_refused_while_a_run_holds_it(raw_redis):
    periodic = api(NIGHTLY)
    jid = periodic.run_now("nightly")
    lock = keys.periodic_lock("nightly")
    assert raw_redis.get(lock).decode() == jid and periodic.get("nightly").running_jid == jid
    with pytest.raises(ApiError, match=f"its run {jid} is still queued, running or retrying"):
        periodic.run_now("nightly")
    assert periodic.release_lock("nightly") is True
    assert periodic.release_lock("nightly") is False
    assert periodic.run_now("nightly") != jid


def test_running_lock_of_reads_only_payloads_that_hold_a_lock(raw_redis):
    periodic = api(NIGHTLY, HOURLY)
    periodic.run_now("nightly")
    periodic.run_now("hourly")
    with_lock, without = (raw for raw in reversed(raw_redis.lrange("queue:periodic-out", 0, -1)))
    assert locks.running_lock_of(with_lock) == locks.running_lock_of(with_lock.decode()) == \
        locks.running_lock_of(json.loads(with_lock)) == "djwork:periodic-running:nightly"
    assert locks.running_lock_of(without) is None
    assert locks.running_lock_of('{"class": "x", "args": [], "note": "djwork:periodic-running:"') is None  # bad JSON
    assert locks.lock_ttl_ms_of(with_lock) == 24 * 3600 * 1000 and locks.jid_of(with_lock)


def test_retake_renews_its_own_lock_takes_a_free_one_and_reports_another_holder(raw_redis):
    def payload(entry_id: str, jid: str) -> dict:
        return {"class": "x", "jid": jid, "djwork_periodic": {"entry": entry_id, "lock": keys.periodic_lock(entry_id),
                                                               "lock_ttl": 60}}

    raw_redis.set(keys.periodic_lock("own"), "j1", px=1000)
    raw_redis.set(keys.periodic_lock("other"), "j9", px=50_000)
    others = locks.retake([payload("own", "j1"), payload("free", "j2"), payload("other", "j3"), {"jid": "plain"}],
                          extra_ms=30_000)
    assert others == {keys.periodic_lock("other"): "j9"}
    assert raw_redis.get(keys.periodic_lock("own")) == b"j1" and raw_redis.pttl(keys.periodic_lock("own")) > 80_000
    assert raw_redis.get(keys.periodic_lock("free")) == b"j2"
    assert raw_redis.get(keys.periodic_lock("other")) == b"j9"
