"""djwork.testing's fake() and inline() modes, ALWAYS_EAGER and the djwork_jobs pytest fixture (docs/testing.md)."""

from __future__ import annotations

import textwrap
import time

import pytest
from django.test import override_settings

import djwork.testing
from djwork.payload import ArgumentError
from tests import testing_mode_jobs as jobs
from tests.helpers_worker import ROOT

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _fresh_records():
    jobs.CALLS.clear()
    jobs.ATTEMPTS.clear()


def _redis_untouched(raw_redis) -> None:
    assert raw_redis.keys("*") == [], "a testing mode wrote to Redis"


def test_fake_collects_pushes_instead_of_writing_them(raw_redis):
    with djwork.testing.fake() as pushed:
        ref = jobs.add.delay(1, 2)
        jobs.add.apply_async((3, 4), countdown=60)
        jobs.remember.set(queue="low").delay(("a", "tuple"))
        jobs.add.delay_many([(5, 6), {"a": 7, "b": 8}])
        assert len(pushed) == 5 and jobs.CALLS == []
        adds = pushed.for_job(jobs.add)
        assert [job.args for job in adds] == [[1, 2], [3, 4], [5, 6], []]
        assert adds[0].jid == ref.jid and adds[0].at is None
        assert adds[1].at is not None and adds[1].at > time.time() + 50  # scheduled, kept with its time
        assert adds[3].kwargs == {"a": 7, "b": 8}
        assert pushed.for_job("tests.testing_mode_jobs.remember") == pushed.for_queue("low")
        assert pushed.for_queue("low")[0].args == [["a", "tuple"]]  # through JSON, as Redis would keep it
        pushed.clear()
        assert len(pushed) == 0
    _redis_untouched(raw_redis)


def test_drain_runs_nested_and_scheduled_jobs_until_none_is_left(raw_redis):
    with djwork.testing.fake() as pushed:
        jobs.fan_out.delay(2)
        jobs.add.apply_async((10, 20), countdown=3600)  # scheduled an hour ahead: drain runs it now
        runs = pushed.drain()
        assert len(pushed) == 0
    # fan_out(2) -> add x2 + fan_out(1) -> add x1; plus the scheduled add.
    assert runs == 6
    assert sorted(jobs.CALLS) == sorted([
        ("fan_out", (2,)), ("add", (0, 100)), ("add", (1, 100)), ("fan_out", (1,)), ("add", (0, 100)),
        ("add", (10, 20)),
    ])
    _redis_untouched(raw_redis)


def test_drain_retries_a_failing_job_per_its_retry_options_without_waiting():
    with djwork.testing.fake() as pushed:
        jobs.flaky.delay("k", 2)
        assert pushed.drain() == 3
    assert jobs.ATTEMPTS["k"] == 3
    assert jobs.CALLS == [("flaky", ("k", 2))]  # self.request.retries counts the retries, as on a worker


def test_drain_raises_once_a_job_is_out_of_retries_or_keeps_it_in_failed():
    with djwork.testing.fake() as pushed:
        jobs.always_fails.delay("x")
        with pytest.raises(ValueError, match="x failed"):
            pushed.drain()
        assert jobs.ATTEMPTS["x"] == 3  # the first run and retry=2
        jobs.always_fails.delay("y")
        jobs.add.delay(1, 1)
        assert pushed.drain(raise_errors=False) == 4
        (failed, error), = [entry for entry in pushed.failed if entry[0].args == ["y"]]
        assert isinstance(error, ValueError) and failed.payload["error_class"] == "ValueError"
        assert failed.payload["retry_count"] == 2
    assert ("add", (1, 1)) in jobs.CALLS


def test_arguments_are_checked_as_a_real_enqueue_checks_them(raw_redis):
    with djwork.testing.fake() as pushed:
        with pytest.raises(ArgumentError, match=r"argument .b. is a builtins\.object"):
            jobs.add.delay(1, object())
        with pytest.raises(TypeError, match="missing a required argument: 'b'"):
            jobs.add.delay(1)
        assert len(pushed) == 0
    with djwork.testing.inline(), pytest.raises(ArgumentError, match="argument 'a'"):
        jobs.add.delay({1, 2}, 3)
    assert jobs.CALLS == []
    _redis_untouched(raw_redis)


def test_inline_runs_each_job_at_its_push_and_its_error_reaches_the_caller(raw_redis):
    with djwork.testing.inline():
        ref = jobs.fan_out.delay(1)
        assert ref.jid and jobs.CALLS == [("fan_out", (1,)), ("add", (0, 100))]
        jobs.add.apply_async((2, 3), countdown=3600)  # scheduled: runs now all the same
        jobs.add_async.delay(4, 5)
        with pytest.raises(ValueError, match="z failed"):
            jobs.always_fails.delay("z")
    assert jobs.CALLS[-2:] == [("add", (2, 3)), ("add_async", (4, 5))]
    assert jobs.ATTEMPTS["z"] == 1  # no retries inline
    _redis_untouched(raw_redis)


def test_the_innermost_mode_wins_and_unique_jobs_are_not_locked(raw_redis):
    with djwork.testing.fake() as pushed:
        with djwork.testing.inline():
            jobs.remember.delay("inline")
        jobs.remember.delay("fake")
        jobs.unique_sync.delay(1)
        jobs.unique_sync.delay(1)  # no lock in fake mode: both pushes are collected
        assert [job.args for job in pushed] == [["fake"], [1], [1]]
    assert jobs.CALLS == [("remember", ("inline",))]
    _redis_untouched(raw_redis)


def test_always_eager_runs_jobs_at_push_and_propagates_their_errors(raw_redis, settings):
    with override_settings(DJWORK={**settings.DJWORK, "ALWAYS_EAGER": True}):
        jobs.add.delay(1, 2)
        jobs.add.delay_many([(3, 4)])
        with pytest.raises(ValueError, match="e failed"):
            jobs.always_fails.delay("e")
        with djwork.testing.fake() as pushed:  # a fake() block still collects
            jobs.add.delay(5, 6)
            assert len(pushed) == 1
    assert jobs.CALLS == [("add", (1, 2)), ("add", (3, 4))]
    _redis_untouched(raw_redis)
    jobs.add.delay(7, 8)  # ALWAYS_EAGER off again: written to Redis
    assert raw_redis.llen("queue:default") == 1


def test_the_djwork_jobs_fixture_through_the_documented_plugin(pytester):
    pytester.makeconftest('pytest_plugins = ["djwork.testing.pytest_plugin"]\n')
    pytester.makepyfile(test_signup=textwrap.dedent("""
        from tests import testing_mode_jobs as jobs

        def test_uses_the_fixture(djwork_jobs):
            jobs.fan_out.delay(1)
            assert [job.name for job in djwork_jobs] == ["tests.testing_mode_jobs.fan_out"]
            assert djwork_jobs.drain() == 2
            assert jobs.CALLS == [("fan_out", (1,)), ("add", (0, 100))]

        def test_each_test_gets_an_empty_collector(djwork_jobs):
            assert len(djwork_jobs) == 0
    """))
    result = pytester.runpytest_subprocess("-p", "django", "--ds", "tests.settings", "--rootdir", str(pytester.path),
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


@pytest.fixture
def pytester(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    return pytester
