"""IterableJob without a worker: enqueueing, a direct call, the saved state, and djwork.iterate's iterators
(the worker's side, with real processes and signals: tests/test_iterable_worker.py)."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext

import djwork
import djwork.testing
from djwork.iterable import state
from djwork.iterable.job import IterableJob
from djwork.redis import keys
from tests import iterable_jobs as jobs


def test_an_iterable_job_is_enqueued_like_any_job_under_its_dotted_path(raw_redis):
    ref = jobs.CountTo.set(queue="low").delay("enqueue", 3)
    payload = json.loads(raw_redis.lindex(keys.queue("low"), 0))
    assert (payload["jid"], payload["class"], payload["args"]) == (ref.jid, "tests.iterable_jobs.CountTo",
                                                                   ["enqueue", 3])
    with pytest.raises(TypeError, match=r"tests\.iterable_jobs\.CountTo"):
        jobs.CountTo.delay("too", 1, 2, 3)  # build_iterator's signature is the job's


def test_a_subclass_without_each_is_refused_when_defined():
    with pytest.raises(TypeError, match="defines both build_iterator"):
        class OnlyIterator(IterableJob):
            def build_iterator(self, cursor):
                return iter(())


@pytest.mark.parametrize(("option", "value"), [("checkpoint_items", 0), ("checkpoint_items", 2.5),
                                               ("checkpoint_seconds", 0), ("cancel_check_seconds", -1)])
def test_a_bad_interval_is_refused_when_the_class_is_defined(option, value):
    with pytest.raises(TypeError, match=option):
        type("Bad", (IterableJob,), {option: value, "build_iterator": lambda self, cursor: iter(()),
                                     "each": lambda self, item: None})


def test_a_direct_call_walks_everything_and_saves_nothing(raw_redis):
    jobs.CountTo.instance()("direct", 5)  # the registered instance, called: runs inline
    assert raw_redis.hgetall(jobs.marks("direct")) == {str(n).encode(): b"1" for n in range(5)}
    assert raw_redis.lrange(jobs.events("direct"), 0, -1) == [b"start", b"complete:5"]
    assert not list(raw_redis.scan_iter(match=f"{keys.ITERATION_PREFIX}*"))


def test_a_checkpoint_is_one_key_with_its_ttl(raw_redis):
    state.save("j1", state.Progress(cursor={"pk": 7}, items=8, checkpoints=1, segments=2), 600)
    assert 0 < raw_redis.ttl(keys.iteration("j1")) <= 600
    assert state.load("j1") == state.Progress(cursor={"pk": 7}, items=8, checkpoints=1, segments=2)
    state.delete("j1")
    assert state.peek("j1") is None and state.load("j1") == state.Progress()


def test_a_cursor_json_cannot_carry_is_refused_by_name():
    with pytest.raises(TypeError, match="cursor"):
        state.save("j2", state.Progress(cursor=object()), 600)


def test_a_saved_state_that_is_not_ours_is_reported_not_resumed(raw_redis):
    raw_redis.set(keys.iteration("j3"), b"not json")
    with pytest.raises(ValueError, match="delete djwork:iteration:j3"):
        state.load("j3")


def test_numbers_and_items_resume_after_the_cursor():
    assert list(djwork.iterate.numbers(0, 5)) == [(n, n) for n in range(5)]
    assert list(djwork.iterate.numbers(0, 5, 2)) == [(3, 3), (4, 4)]
    assert list(djwork.iterate.numbers(10, 0, 7, step=-3)) == [(4, 4), (1, 1)]
    assert list(djwork.iterate.items(["a", "b", "c"], 0)) == [("b", 1), ("c", 2)]


def test_lines_resume_at_a_byte_offset(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("été\nb\r\nc")
    walked = list(djwork.iterate.lines(str(path)))
    assert [line for line, _ in walked] == ["été", "b", "c"]
    assert list(djwork.iterate.lines(str(path), walked[0][1])) == walked[1:]


def test_csv_rows_resume_after_the_row_number_even_across_quoted_newlines(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text('a,"two\nlines"\nb,2\nc,3\n')
    walked = list(djwork.iterate.csv_rows(str(path)))
    assert walked == [(["a", "two\nlines"], 0), (["b", "2"], 1), (["c", "3"], 2)]
    assert list(djwork.iterate.csv_rows(str(path), 1)) == walked[2:]


def test_batches_carry_the_last_items_cursor():
    assert list(djwork.iterate.batches(djwork.iterate.numbers(0, 5), 2)) == [([0, 1], 1), ([2, 3], 3), ([4], 4)]
    assert list(djwork.iterate.batches(djwork.iterate.numbers(0, 5, 3), 2)) == [([4], 4)]


@pytest.mark.django_db(transaction=True)
def test_a_queryset_is_walked_by_primary_key_without_offset():
    Group.objects.bulk_create(Group(name=f"g{n}") for n in range(7))
    pks = sorted(Group.objects.values_list("pk", flat=True))
    with CaptureQueriesContext(connection) as queries:
        walked = list(djwork.iterate.queryset(Group.objects.order_by("-name"), chunk_size=3))
    assert [cursor for _, cursor in walked] == pks and [row.pk for row, _ in walked] == pks
    assert len(queries) == 3  # 3 + 3 + 1 rows: the short page ends it
    assert not any("OFFSET" in query["sql"].upper() for query in queries.captured_queries)
    assert [row.pk for row, _ in djwork.iterate.queryset(Group.objects.all(), pks[4])] == pks[5:]


def test_apply_and_the_testing_modes_run_the_whole_walk_without_saving(raw_redis):
    result = jobs.CountTo.apply(args=["eager", 4])
    assert result.successful()
    with djwork.testing.inline():
        jobs.CountTo.delay("inline", 3)
        with pytest.raises(RuntimeError, match="item 2 fails once"):
            jobs.CountTo.delay("inline-failed", 5, fail_at=2)  # a worker would save its cursor here
    assert raw_redis.lrange(jobs.events("eager"), 0, -1) == [b"start", b"complete:4"]
    assert raw_redis.lrange(jobs.events("inline"), 0, -1) == [b"start", b"complete:3"]
    assert not list(raw_redis.scan_iter(match=f"{keys.ITERATION_PREFIX}*"))
