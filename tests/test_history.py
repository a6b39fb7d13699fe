"""The history stream (djwork/worker/history.py + lua/history_append.lua, read by djwork/api/history.py).

What one flush writes (batched entries of at most CHUNK runs), the cap counted in runs,
and reading it back: pages across entry boundaries, older one-run entries, malformed entries.
"""

from __future__ import annotations

import orjson
import pytest

from djwork import api
from djwork.api import history as reader
from djwork.worker import history
from djwork.worker.history import CHUNK, HistoryRecorder

STARTED = 1796269938.8094115


def entries(raw_redis) -> list[tuple[str, dict[str, str]]]:
    return [(entry_id.decode(), {key.decode(): value.decode() for key, value in fields.items()})
            for entry_id, fields in raw_redis.xrange("djwork:history")]


def stored_jids(raw_redis) -> list[str]:
    """Every run's jid, oldest first, straight from the entries' JSON."""
    return [run[0] for _id, fields in entries(raw_redis) for run in orjson.loads(fields["runs"])]


def write(recorder: HistoryRecorder, first: int, count: int) -> None:
    for number in range(first, first + count):
        recorder.record(f"jid-{number}", "app.jobs.ok", "default", "ok", STARTED + number, 1.5)
    recorder.flush()


def legacy(raw_redis, number: int) -> str:
    """A one-run entry as djwork wrote them before batched entries."""
    return raw_redis.xadd("djwork:history", {
        "jid": f"old-{number}", "class": "app.jobs.old", "queue": "default", "status": "ok",
        "started": f"{STARTED:.6f}", "duration_ms": "2.000", "error_class": "", "error_message": "",
        "identity": "host:9:old"}).decode()


def every_page(per_page: int, **filters) -> tuple[list[str], list[str]]:
    """(jids, run ids) of every run, newest first, paging with next_before until the end."""
    jids, ids, before = [], [], None
    while True:
        page = api.History.recent(per_page, before=before, **filters)
        jids += [run.jid for run in page.runs]
        ids += [run.id for run in page.runs]
        if page.next_before is None:
            return jids, ids
        before = page.next_before


def test_a_flush_writes_one_entry_holding_its_runs_as_json(raw_redis):
    recorder = HistoryRecorder("host:1:abc", 100)
    recorder.record("jid-ok", "app.jobs.ok", "default", "ok", STARTED, 0.4321)
    recorder.record("", "app.jobs.bad", "low", "retry", 1796269939.5, 12.0, "ValueError", "é" * 1500)
    recorder.flush()
    ((entry_id, fields),) = entries(raw_redis)
    assert list(fields) == ["identity", "count", "through", "runs"]
    assert (fields["identity"], fields["count"], fields["through"]) == ("host:1:abc", "2", "2")
    assert orjson.loads(fields["runs"]) == [
        ["jid-ok", "app.jobs.ok", "default", "ok", STARTED, 0.4321, "", "", 0],
        ["", "app.jobs.bad", "low", "retry", 1796269939.5, 12.0, "ValueError", "é" * 1000, 0]]
    recorder.flush()  # nothing buffered: nothing written
    assert raw_redis.xlen("djwork:history") == 1

    failed, ok = api.History.recent().runs  # newest first
    assert (ok.id, failed.id) == (f"{entry_id}/0", f"{entry_id}/1")
    assert (ok.jid, ok.klass, ok.queue, ok.status, ok.duration_ms, ok.identity) == (
        "jid-ok", "app.jobs.ok", "default", "ok", 0.4321, "host:1:abc")
    assert ok.started is not None and ok.started.timestamp() == pytest.approx(STARTED, abs=1e-6)
    assert (failed.error_class, failed.error_message, failed.jid) == ("ValueError", "é" * 1000, "")
    assert api.History.length() == 2


def test_a_resumed_run_is_marked_at_position_8_and_an_eight_value_run_reads_as_not_resumed(raw_redis):
    recorder = HistoryRecorder("host:1:abc", 100)
    recorder.record("jid-it", "app.jobs.Walk", "default", "rescheduled", STARTED, 3.0,
                    "djwork.iterable.Interrupted", "interrupted after 5 items (segment 2)", resumed=True)
    recorder.flush()
    # A run as a djwork before the resumed mark wrote it: 8 values.
    raw_redis.xadd("djwork:history", {"identity": "host:2:old", "count": 1, "through": 2,
                                      "runs": orjson.dumps([["jid-old", "app.jobs.Walk", "default", "ok",
                                                             STARTED, 1.0, "", ""]])})
    ((_first_id, first), _second) = entries(raw_redis)
    assert orjson.loads(first["runs"])[0][8] == 1
    old, resumed = api.History.recent().runs  # newest first
    assert (resumed.jid, resumed.resumed) == ("jid-it", True)
    assert (old.jid, old.resumed) == ("jid-old", False)


def test_a_flush_is_chunked_at_200_runs_per_entry_and_through_counts_every_run(raw_redis):
    recorder = HistoryRecorder("host:1:abc", 10_000)
    write(recorder, 0, 2 * CHUNK + 50)
    write(recorder, 1000, 10)
    written = entries(raw_redis)
    assert [(fields["count"], fields["through"]) for _id, fields in written] == [
        ("200", "200"), ("200", "400"), ("50", "450"), ("10", "460")]
    assert stored_jids(raw_redis) == [f"jid-{n}" for n in range(450)] + [f"jid-{n}" for n in range(1000, 1010)]
    assert api.History.length() == 460


def test_entries_a_full_buffer_refused_are_counted_in_the_log(raw_redis, monkeypatch, caplog):
    # While Redis is away the buffer fills; what it refuses must leave a count, not a silent gap.
    monkeypatch.setattr(history, "MAX_BUFFER", 3)
    recorder = HistoryRecorder("host:1:abc", 100)
    for number in range(5):
        recorder.record(f"jid-{number}", "app.jobs.ok", "default", "ok", 1796269938.0, 1.0)
    with caplog.at_level("WARNING", logger="djwork.history"):
        recorder.flush()
    assert stored_jids(raw_redis) == ["jid-0", "jid-1", "jid-2"]
    assert "2 history entries dropped" in caplog.text
    caplog.clear()
    recorder.flush()
    assert "dropped" not in caplog.text  # counted once


def test_a_flush_redis_refuses_is_logged_and_not_replayed(raw_redis, caplog):
    raw_redis.set("djwork:history", "not a stream")
    recorder = HistoryRecorder("host:1:abc", 100)
    for number in range(3):
        recorder.record(f"jid-{number}", "app.jobs.ok", "default", "ok", STARTED, 1.0)
    with caplog.at_level("WARNING", logger="djwork.history"):
        recorder.flush()
    assert "3 history entries lost" in caplog.text
    raw_redis.delete("djwork:history")
    recorder.flush()
    assert not raw_redis.exists("djwork:history")  # the lost runs are not written again


def test_the_cap_counts_runs_and_drops_whole_oldest_entries(raw_redis):
    recorder = HistoryRecorder("host:1:abc", 200)
    for flush in range(3):
        write(recorder, flush * 150, 150)
        kept = stored_jids(raw_redis)
        assert len(kept) >= 200 or len(kept) == (flush + 1) * 150
        assert len(kept) <= 200 + CHUNK
        assert kept == [f"jid-{n}" for n in range((flush + 1) * 150 - len(kept), (flush + 1) * 150)]  # newest kept
    # 450 written, 200 wanted: the first flush's entry went, the second's stays (without it only 150 remain).
    assert stored_jids(raw_redis) == [f"jid-{n}" for n in range(150, 450)]
    assert api.History.length() == 300
    write(recorder, 450, 60)  # now the second flush's entry can go: 210 runs remain without it
    assert stored_jids(raw_redis) == [f"jid-{n}" for n in range(300, 510)]
    assert api.History.length() == 210


def test_the_cap_holds_over_many_flushes_of_every_size(raw_redis):
    recorder = HistoryRecorder("host:1:abc", 500)
    written = 0
    for size in [1, 7, 199, 200, 201, 450, 3, 900, 1, 1, 650, 20] * 3:
        write(recorder, written, size)
        written += size
        kept = stored_jids(raw_redis)
        assert min(500, written) <= len(kept) <= 500 + CHUNK, size
        assert kept == [f"jid-{n}" for n in range(written - len(kept), written)]
        assert api.History.length() == len(kept)


def test_older_one_run_entries_are_read_and_go_once_new_entries_hold_the_cap(raw_redis):
    old_ids = [legacy(raw_redis, number) for number in range(5)]
    assert api.History.length() == 5
    recorder = HistoryRecorder("host:1:abc", 100)
    write(recorder, 0, 60)
    runs = api.History.recent(100).runs
    assert [run.jid for run in runs] == [f"jid-{n}" for n in reversed(range(60))] + [
        f"old-{n}" for n in reversed(range(5))]
    assert [run.id for run in runs[60:]] == old_ids[::-1]
    assert runs[-1].identity == "host:9:old" and runs[-1].duration_ms == 2.0
    assert api.History.length() == 5 + 60  # both formats: an estimate, exact with one batched entry
    # Paging from an older entry's bare id continues below it.
    assert [run.jid for run in api.History.recent(10, before=old_ids[3]).runs] == ["old-2", "old-1", "old-0"]
    write(recorder, 60, 60)  # 120 new runs: the cap of 100 no longer needs the older entries
    assert [run.jid for run in api.History.recent(200).runs] == [f"jid-{n}" for n in reversed(range(120))]
    assert api.History.length() == 120


def test_the_running_total_continues_past_one_run_entries_an_older_worker_wrote_in_between(raw_redis):
    recorder = HistoryRecorder("host:1:abc", 1000)
    write(recorder, 0, 30)
    for number in range(20):  # a rolling deploy: an older worker still writes one entry per run
        legacy(raw_redis, number)
    write(recorder, 30, 5)
    assert entries(raw_redis)[-1][1]["through"] == "35"


def test_pages_cross_entry_boundaries_without_repeating_or_skipping_a_run(raw_redis):
    recorder = HistoryRecorder("host:1:abc", 10_000)
    for first, size in ((0, 7), (7, 1), (8, 230), (238, 13)):  # entries of 7, 1, 200, 30 and 13 runs
        write(recorder, first, size)
    newest_first = [f"jid-{n}" for n in reversed(range(251))]
    for per_page in (1, 3, 13, 50, 200, 251, 300):
        jids, ids = every_page(per_page)
        assert jids == newest_first, per_page
        assert len(set(ids)) == 251
    # A bare entry id (what an older page marker looks like) starts below that whole entry.
    third_entry = entries(raw_redis)[2][0]
    assert [run.jid for run in api.History.recent(300, before=third_entry).runs] == [
        f"jid-{n}" for n in reversed(range(8))]
    # "<entry>/<index>": the runs of that entry below the index, then the older entries.
    assert [run.jid for run in api.History.recent(5, before=f"{third_entry}/2").runs] == [
        "jid-9", "jid-8", "jid-7", "jid-6", "jid-5"]
    assert api.History.recent(5, before=f"{third_entry}/0").runs[0].jid == "jid-7"


def test_a_page_marker_whose_entry_was_trimmed_continues_with_older_runs(raw_redis):
    recorder = HistoryRecorder("host:1:abc", 10_000)
    write(recorder, 0, 5)
    write(recorder, 5, 5)
    _first, (second, _) = entries(raw_redis)
    raw_redis.xdel("djwork:history", second)
    assert [run.jid for run in api.History.recent(10, before=f"{second}/3").runs] == [
        f"jid-{n}" for n in reversed(range(5))]
    assert api.History.recent(10, before="nonsense/x").runs == []


def test_filters_count_runs_examined_and_stop_inside_an_entry(raw_redis, monkeypatch):
    monkeypatch.setattr(reader, "SCAN_LIMIT", 150)
    recorder = HistoryRecorder("host:1:abc", 10_000)
    recorder.record("rare-0", "app.jobs.Rare", "default", "retry", STARTED, 1.0)
    recorder.flush()
    write(recorder, 0, 400)  # a 1-run entry below two entries of 200 and 200
    page = api.History.recent(10, status="retry")
    assert page.runs == [] and page.truncated
    jids, _ids = every_page(10, status="retry")
    assert jids == ["rare-0"]
    newest = entries(raw_redis)[2][0]
    assert page.next_before == f"{newest}/50"  # the 150th run examined, newest first


def test_malformed_entries_and_runs_are_skipped(raw_redis):
    recorder = HistoryRecorder("host:1:abc", 10_000)
    write(recorder, 0, 2)
    stream = "djwork:history"
    raw_redis.xadd(stream, {"identity": "x", "count": "1", "through": "3", "runs": "{not json"})
    raw_redis.xadd(stream, {"identity": "x", "count": "1", "through": "4", "runs": '{"a": 1}'})
    raw_redis.xadd(stream, {"identity": "x", "count": "5", "through": "9", "runs": orjson.dumps([
        "flat", ["short", "list"], [1, 2, 3, 4, 5, 6, 7, 8], None,
        ["jid-odd", "app.jobs.ok", "default", "ok", "not a time", None, "", "", "a later field"]])})
    write(recorder, 2, 1)
    runs = api.History.recent(50).runs
    assert [run.jid for run in runs] == ["jid-2", "jid-odd", "jid-1", "jid-0"]
    assert runs[1].started is None and runs[1].duration_ms is None and runs[1].identity == "x"
    assert [run.jid for run in api.History.recent(50, klass="app").runs] == ["jid-2", "jid-odd", "jid-1", "jid-0"]
    jids, _ids = every_page(1)
    assert jids == ["jid-2", "jid-odd", "jid-1", "jid-0"]
