"""HistoryRecorder (djwork/worker/history.py + lua/history_append.lua): what one flush writes to the stream."""

from __future__ import annotations

from djwork.worker.history import FIELDS, HistoryRecorder


def test_a_flush_writes_one_entry_per_run_with_every_field_as_a_string(raw_redis):
    recorder = HistoryRecorder("host:1:abc", 100)
    recorder.record("jid-ok", "app.jobs.ok", "default", "ok", 1796269938.8094115, 0.4321)
    recorder.record("", "app.jobs.bad", "low", "retry", 1796269939.5, 12.0, "ValueError", "é" * 1500)
    recorder.flush()
    entries = [{key.decode(): value.decode() for key, value in fields.items()}
               for _id, fields in raw_redis.xrange("djwork:history")]
    assert [list(entry) for entry in entries] == [list(FIELDS)] * 2
    ok, failed = entries
    assert ok == {"jid": "jid-ok", "class": "app.jobs.ok", "queue": "default", "status": "ok",
                  "started": f"{1796269938.8094115:.6f}", "duration_ms": "0.432", "error_class": "",
                  "error_message": "", "identity": "host:1:abc"}
    assert failed["started"] == "1796269939.500000" and failed["duration_ms"] == "12.000"
    assert failed["error_class"] == "ValueError" and failed["error_message"] == "é" * 1000
    assert failed["jid"] == ""
    recorder.flush()  # nothing buffered: nothing written
    assert raw_redis.xlen("djwork:history") == 2


def test_entries_a_full_buffer_refused_are_counted_in_the_log(raw_redis, monkeypatch, caplog):
    # While Redis is away the buffer fills; what it refuses must leave a count, not a silent gap.
    from djwork.worker import history

    monkeypatch.setattr(history, "MAX_BUFFER", 3)
    recorder = HistoryRecorder("host:1:abc", 100)
    for number in range(5):
        recorder.record(f"jid-{number}", "app.jobs.ok", "default", "ok", 1796269938.0, 1.0)
    with caplog.at_level("WARNING", logger="djwork.history"):
        recorder.flush()
    assert raw_redis.xlen("djwork:history") == 3
    assert "2 history entries dropped" in caplog.text
    caplog.clear()
    recorder.flush()
    assert "dropped" not in caplog.text  # counted once
