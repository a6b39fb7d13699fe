"""retry.decide, directly: where a failed job goes (retry at a score, dead, drop), with no worker and no Redis.

The worker tests (tests/test_worker_retry.py) prove a worker files the
decision; these pin the decision itself, case by case, in microseconds.
"""

from __future__ import annotations

import pytest

import djwork
from djwork.jobs.task_class import Retry
from djwork.worker.retry import ERROR_MESSAGE_LIMIT, decide, max_retries_for, sidekiq_backoff

NOW = 1_000_000.0


def payload(**fields) -> dict:
    return {"class": "tests.jobs.add", "jid": "j1", "queue": "default", "args": [], **fields}


def test_a_first_failure_is_retried_at_sidekiqs_backoff_and_stamped_failed_at():
    decision = decide(payload(), ValueError("boom"), None, "default", 25, now=NOW)
    assert decision.target == "retry"
    assert decision.payload["retry_count"] == 0 and decision.payload["failed_at"] == NOW
    assert "retried_at" not in decision.payload
    assert (decision.payload["error_class"], decision.payload["error_message"]) == ("ValueError", "boom")
    # count**4 + 15 + rand(10) * (count + 1) with count 0: 15 to 24 seconds later.
    assert NOW + 15 <= decision.score <= NOW + 24


def test_a_later_failure_counts_up_and_stamps_retried_at():
    decision = decide(payload(retry_count=2, failed_at=NOW - 100), KeyError("k"), None, "default", 25, now=NOW)
    assert decision.payload["retry_count"] == 3 and decision.payload["retried_at"] == NOW
    assert decision.payload["failed_at"] == NOW - 100
    assert NOW + 3 ** 4 + 15 <= decision.score <= NOW + 3 ** 4 + 15 + 9 * 4


@pytest.mark.parametrize("count", [0, 1, 5, 24])
def test_sidekiqs_backoff_stays_within_its_jitter(count):
    low = count ** 4 + 15
    assert all(low <= sidekiq_backoff(count) <= low + 9 * (count + 1) for _ in range(50))


def test_the_last_allowed_retry_goes_to_dead_and_retry_false_drops():
    assert decide(payload(retry=3, retry_count=2), ValueError(), None, "default", 25, now=NOW).target == "dead"
    assert decide(payload(retry=3, retry_count=1), ValueError(), None, "default", 25, now=NOW).target == "retry"
    assert decide(payload(retry=False), ValueError(), None, "default", 25, now=NOW).target == "drop"
    # dead: false means no dead set: out of retries, the job is dropped, not buried.
    assert decide(payload(retry=0, dead=False), ValueError(), None, "default", 25, now=NOW).target == "drop"


@pytest.mark.parametrize(("value", "expected"), [(True, 25), (None, 25), (False, None), (3, 3), (-2, 0),
                                                  ("5", 0), ({"max": 5}, 0)])
def test_max_retries_reads_the_payloads_retry_field_cautiously(value, expected):
    assert max_retries_for({"retry": value}, 25) == expected


def test_retry_for_past_its_window_goes_to_dead_even_with_retries_left():
    late = payload(retry=25, retry_count=1, retry_for=60, failed_at=NOW - 61)
    in_time = payload(retry=25, retry_count=1, retry_for=60, failed_at=NOW - 59)
    assert decide(late, ValueError(), None, "default", 25, now=NOW).target == "dead"
    assert decide(in_time, ValueError(), None, "default", 25, now=NOW).target == "retry"


def test_a_requested_retry_uses_its_countdown_its_max_retries_and_shows_its_cause():
    requested = Retry(exc=OSError("disk"), countdown=42, max_retries=1)
    decision = decide(payload(retry_count=0), requested, None, "default", 25, now=NOW)
    assert (decision.target, decision.score) == ("dead", NOW)  # count 1 reached max_retries=1
    first = decide(payload(), Retry(exc=OSError("disk"), countdown=42), None, "default", 25, now=NOW)
    assert (first.target, first.score) == ("retry", NOW + 42)
    assert (first.payload["error_class"], first.payload["error_message"]) == ("OSError", "disk")


def test_the_retry_queue_field_moves_the_retried_job():
    decision = decide(payload(retry_queue="slow"), ValueError(), None, "default", 25, now=NOW)
    assert decision.payload["queue"] == "slow"


def test_an_unreadable_or_huge_message_is_stored_bounded_and_valid():
    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no")

    assert decide(payload(), Unprintable(), None, "default", 25, now=NOW).payload["error_message"]
    huge = decide(payload(), ValueError("x" * (ERROR_MESSAGE_LIMIT + 5)), None, "default", 25, now=NOW)
    assert len(huge.payload["error_message"]) == ERROR_MESSAGE_LIMIT
    surrogate = decide(payload(), ValueError("\ud800"), None, "default", 25, now=NOW)
    surrogate.payload["error_message"].encode("utf-8")  # raises if not valid UTF-8


@djwork.job(autoretry_for=(KeyError,), retry_kwargs={"max_retries": 2, "countdown": 7})
def autoretrying(x):
    return x


def test_autoretry_for_retries_its_exceptions_with_retry_kwargs_and_fails_others_at_once():
    kept = decide(payload(), KeyError("k"), autoretrying, "default", 25, now=NOW)
    assert (kept.target, kept.score) == ("retry", NOW + 7)
    assert decide(payload(retry_count=1), KeyError("k"), autoretrying, "default", 25, now=NOW).target == "dead"
    assert decide(payload(), ValueError("v"), autoretrying, "default", 25, now=NOW).target == "dead"
