"""The examples of Celery's user guide pages "Calling Tasks", "Tasks" and "Canvas" that need no worker:
what a call writes to Redis, eager runs (``task.apply()``, calling a task or a signature), and the shapes
djwork refuses. Each test names the guide section it follows; expected values are the ones the guide
prints. The examples that need a worker are in tests/test_celery_guide_worker.py; docs/celery.md lists
every option and API of those pages.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import time

import pytest
from django.db import transaction

import djwork
from djwork.options import OptionError
from djwork.worker.retry import decide
from tests import celery_demo_jobs as demo
from tests import celery_guide_jobs as guide
from tests.support.queues import only_job


@pytest.fixture(autouse=True)
def results_on(settings):
    """These tests read jobs' states and results: stored, as in a Celery project with CELERY_RESULT_BACKEND
    set (RESULTS=True; results are opt-in, docs/celery.md). A test of results off turns them off itself."""
    settings.DJWORK = {**settings.DJWORK, "RESULTS": True}


def scheduled(redis) -> list[tuple[dict, float]]:
    return [(json.loads(member), score) for member, score in redis.zrange("schedule", 0, -1, withscores=True)]


# --- Calling Tasks: basics and the cheat sheet ----------------------------------------------------------
def test_delay_and_apply_async_write_the_same_call(raw_redis):
    guide.dump_context.delay(1, y=2)
    guide.dump_context.apply_async(args=[1], kwargs={"y": 2})
    guide.dump_context.s(1, y=2).apply_async()
    jobs = [json.loads(raw) for raw in raw_redis.lrange("queue:default", 0, -1)]
    assert [(job["args"], job["kwargs"]) for job in jobs] == [([1], {"y": 2})] * 3


def test_calling_a_task_runs_it_here_and_sends_nothing(raw_redis):
    assert demo.add(2, 2) == 4
    assert demo.add.s(2, 2)() == 4  # Canvas: calling a signature runs it inline too
    assert guide.subtract.s(10)(30) == 20  # partial arguments go first
    assert guide.subtract.si(5, 3)(100) == 2  # immutable: the extra argument is ignored
    assert raw_redis.dbsize() == 0


def test_cheat_sheet_countdown_eta_expires_task_id(raw_redis):
    before = time.time()
    in_ten = demo.add.apply_async((2, 2), countdown=10)
    at_ten = demo.add.apply_async((2, 2), eta=djwork_now() + dt.timedelta(seconds=10))
    delayed = demo.add.apply_async((2, 2), countdown=60, expires=120)
    in_two_days = djwork_now() + dt.timedelta(days=2)
    expiring = demo.add.apply_async((2, 2), expires=in_two_days)
    mine = demo.add.apply_async((2, 2), task_id="my_own_task_id")
    after = time.time()
    jobs = {job["jid"]: (job, score) for job, score in scheduled(raw_redis)}
    for ref, delay in ((in_ten, 10), (at_ten, 10), (delayed, 60)):
        assert before + delay - 0.01 <= jobs[ref.id][1] <= after + delay
    # Different from Celery: a duration counts from when the job is due (60 + 120), not from the call.
    job, score = jobs[delayed.id]
    assert job["expires_at"] == pytest.approx(score + 120, abs=0.01)
    queued = {job["jid"]: job for job in map(json.loads, raw_redis.lrange("queue:default", 0, -1))}
    assert set(queued) == {"my_own_task_id", expiring.id} and mine.id == "my_own_task_id"
    assert queued[expiring.id]["expires_at"] == pytest.approx(in_two_days.timestamp(), abs=0.001)


def djwork_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def test_options_the_calling_guide_shows_that_djwork_refuses(raw_redis):
    with pytest.raises(djwork.CanvasError, match="expected a signature"):
        demo.add.apply_async((2, 2), link=[demo.add.s(16), guide.tsum.s()])  # a list of links
    with pytest.raises(TypeError, match=r"unknown enqueue option\(s\) \['compression'\]"):
        demo.add.apply_async((2, 2), compression="zlib")
    for option in ("exchange", "routing_key", "expiration", "timestamp"):
        with pytest.raises(TypeError, match=option):
            demo.add.apply_async((2, 3), **{option: "x"})
    with pytest.raises(OptionError, match="priority"):
        demo.add.apply_async((2, 2), priority=255)
    with pytest.raises(OptionError, match="argsrepr must be the text"):
        demo.add.apply_async((2, 2), argsrepr=(2, 2))
    with pytest.raises(OptionError, match="app_id must be a string"):
        demo.add.apply_async((2, 2), app_id=1234)
    with pytest.raises(OptionError, match="content_type='application/x-python-serialize' is not supported"):
        demo.add.apply_async((2, 2), content_type="application/x-python-serialize")
    assert raw_redis.dbsize() == 0
    demo.add.apply_async((10, 10), serializer="json")
    demo.add.apply_async((2, 2), retry=True, retry_policy={"max_retries": 3, "interval_start": 0,
                                                           "interval_step": 0.2, "interval_max": 0.2})
    assert [json.loads(raw)["args"] for raw in raw_redis.lrange("queue:default", 0, -1)] == [[2, 2], [10, 10]]


def test_headers_travel_to_the_request(raw_redis):
    ref = demo.add.apply_async((1, 2), headers={"periodic_task_name": "task_name"})
    assert only_job(raw_redis)["headers"] == {"periodic_task_name": "task_name"}
    result = guide.dump_context.apply((1, 2), headers={"periodic_task_name": "task_name"})
    assert result.get()["headers"] == {"periodic_task_name": "task_name"}
    assert ref.id


# --- Tasks: names, binding, argument checking, retries, classes, handlers -------------------------------
def test_names():
    assert guide.named_add.name == "sum-of-two-numbers"
    assert guide.tsum.name == "tests.celery_guide_jobs.tsum"  # module + function, as Celery's automatic name
    assert djwork.signature("sum-of-two-numbers", args=(2, 2), countdown=10).task == "sum-of-two-numbers"


def logged(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return ["logged", func(*args, **kwargs)]

    return wrapper


@djwork.shared_task(name="tests.test_celery_guide.decorated_add")
@logged
def decorated_add(x, y):
    return x + y


def test_multiple_decorators_with_the_task_decorator_applied_last():
    assert decorated_add.apply((2, 2)).get() == ["logged", 4]
    with pytest.raises(TypeError):  # the arity check sees through functools.wraps
        decorated_add.delay(8)


def test_dump_context_reads_the_request_eagerly():
    result = guide.dump_context.apply((1, 2), task_id="ctx-1")
    context = result.get()
    assert (context["id"], context["args"], context["kwargs"], context["retries"]) == ("ctx-1", [1, 2], {}, 0)
    assert (context["is_eager"], context["called_directly"]) == (True, False)
    assert guide.dump_context(1, 2)["called_directly"] is True  # called as a function: no worker, no id


def test_argument_checking_and_typing_false(raw_redis):
    demo.add.delay(8, 8)
    with pytest.raises(TypeError):
        demo.add.delay(8)

    @djwork.shared_task(typing=False, name="tests.test_celery_guide.loose_add")
    def loose_add(x, y):
        return x + y

    loose_add.delay(8)  # works locally; the worker's run would fail
    assert [json.loads(raw)["args"] for raw in raw_redis.lrange("queue:default", 0, -1)] == [[8], [8, 8]]


def test_retry_with_countdown_and_past_max_retries_eagerly():
    assert guide.send_twitter_status.apply(("hi", 2)).get() == "posted hi after 2 retries"
    # Out of retries (max_retries=3): the exception given to retry(exc=...) is raised.
    failed = guide.send_twitter_status.apply(("hi", 10))
    assert failed.state == "FAILURE" and isinstance(failed.result, guide.FailWhaleError)


def test_autoretry_and_its_hand_written_equivalent_give_up_after_five_retries(raw_redis):
    payload = {"class": "x", "jid": "j", "queue": "default", "retry": guide.refresh_timeline.payload_retry}
    targets = []
    for _attempt in range(6):
        decision = decide(payload, guide.FailWhaleError("w"), guide.refresh_timeline, "default", 25, now=0.0)
        targets.append((decision.target, decision.score))
        payload = decision.payload
    assert targets == [("retry", 180)] * 5 + [("dead", 0)]  # default_retry_delay 3 minutes, 5 retries
    for task in (guide.refresh_timeline, guide.refresh_timeline_by_hand):
        result = task.apply(("ada",))
        assert result.state == "FAILURE" and isinstance(result.result, guide.FailWhaleError)
    # The retries of the hand-written one are counted by the request: 5, then the exception.
    guide.refresh_timeline_by_hand.push_request(retries=5)
    try:
        with pytest.raises(guide.FailWhaleError):
            guide.refresh_timeline_by_hand.retry(exc=guide.FailWhaleError("w"), max_retries=5)
    finally:
        guide.refresh_timeline_by_hand.pop_request()


def test_retry_options_of_a_task_class():
    payload = {"class": "x", "jid": "j", "queue": "default", "retry": guide.backoff_by_class.payload_retry}
    delays = []
    for _attempt in range(6):
        decision = decide(payload, TypeError("t"), guide.backoff_by_class, "default", 25, now=0.0)
        delays.append(decision.score if decision.target == "retry" else decision.target)
        payload = decision.payload
    assert delays == [1, 2, 4, 8, 16, "dead"]  # retry_backoff=True, no jitter, 5 retries
    assert guide.backoff_by_class.retry_backoff_max == 700


def test_unsupported_task_options_are_refused_by_name():
    for option in ("throws", "store_errors_even_if_ignored", "compression", "backend", "Request"):
        with pytest.raises(TypeError, match=rf"unknown job option\(s\) \['{option}'\]"):
            djwork.shared_task(name=f"tests.test_celery_guide.{option}", **{option: True})(lambda: None)


def test_handlers_run_in_the_guides_order_eagerly(raw_redis):
    assert guide.my_task.apply((1, 2), task_id="h-1").get() == 3
    # The guide's base=MyTask with a KeyError: eagerly a failure at once, as in Celery.
    assert guide.key_error_task.apply((1, 2), task_id="h-2").state == "FAILURE"
    assert guide.calls() == ["before_start h-1 [1, 2]", "on_success h-1 3", "after_return h-1 SUCCESS",
                             "before_start h-2 [1, 2]", "on_failure h-2 KeyError()", "after_return h-2 FAILURE"]


def test_a_task_class_keeps_its_resource_per_process(raw_redis):
    first = guide.process_rows.apply().get()
    assert guide.process_rows.apply().get() == first
    assert int(raw_redis.get("t:guide:db-connects") or 0) <= 1  # made once (or before this test, then kept)


def test_ignore_result_eagerly_and_on_commit(raw_redis, settings):
    # Asked for no result, by the task or the call: get() is None at once, the state PENDING (Celery's).
    ignored = guide.mytask_ignored.apply_async((1, 2))
    assert (ignored.get(), ignored.result, ignored.state) == (None, None, "PENDING")
    assert guide.mytask.apply_async((1, 2), ignore_result=True).get() is None
    assert guide.mytask.set(ignore_result=True).apply_async((1, 2)).get() is None
    # Results off by the setting alone: a clear error at once, not a wait for a record nothing writes.
    settings.DJWORK = {**settings.DJWORK, "RESULTS": False}
    with pytest.raises(djwork.ResultsOff, match=r"RESULTS'\] = True.*ignore_result=False"):
        guide.mytask.apply_async((1, 2)).get()
    assert raw_redis.llen("queue:default") == 4


@pytest.mark.django_db(transaction=True)
def test_delay_on_commit_pushes_once_the_transaction_commits(raw_redis):
    with transaction.atomic():
        ref = demo.rename_widget.delay_on_commit(1, "after")
        assert raw_redis.llen("queue:default") == 0
    assert only_job(raw_redis)["jid"] == ref.id


# --- Canvas: signatures, partials, immutability, shapes ------------------------------------------------
def test_signatures_keep_args_kwargs_options():
    s = demo.add.signature((2, 2), {"debug": True}, countdown=10)
    assert (s.args, s.kwargs, s.options) == ([2, 2], {"debug": True}, {"countdown": 10})  # args: a JSON list
    assert repr(demo.add.s(2, 2)) == "tests.celery_demo_jobs.add(2, 2)"
    assert repr(djwork.signature("tasks.add", args=(2, 2), countdown=10)) == "tasks.add(2, 2)"
    assert demo.add.s(2, 2).set(countdown=1).options == {"countdown": 1}
    assert demo.add.s(2).clone(args=(4,), kwargs={"debug": True}) == demo.add.s(4, 2, debug=True)
    assert demo.add.signature((2, 2), countdown=10).clone(countdown=1).options == {"countdown": 1}
    assert demo.add.signature((2, 2), immutable=True) == demo.add.si(2, 2)
    assert demo.add.si(2, 2).clone((1,), {"debug": True}, countdown=5) == demo.add.si(2, 2).set(countdown=5)
    assert guide.reset_buffers.signature(immutable=True).immutable
    assert demo.add.s(2, 2).set(task_id="sig-id").options == {"jid": "sig-id"}


def test_a_second_link_is_refused_not_dropped():
    s = demo.add.s(2, 2)
    s.link(demo.mul.s(4))
    with pytest.raises(djwork.CanvasError, match="one link per signature"):
        s.link(guide.log_error.s())
    s.on_error(guide.log_error.s())
    assert s.options["link"] == demo.mul.s(4) and s.options["link_error"] == guide.log_error.s()


def test_chain_shapes_and_reprs():
    c = djwork.chain(demo.add.s(4, 4), demo.mul.s(8), demo.mul.s(10))
    module = "tests.celery_demo_jobs"
    assert repr(c) == f"{module}.add(4, 4) | {module}.mul(8) | {module}.mul(10)"
    c2 = demo.add.s(4, 16) | demo.mul.s(2) | (demo.add.s(4) | demo.mul.s(8))
    assert len(c2.tasks) == 4  # a chain inside a chain is flattened
    assert isinstance(djwork.group(demo.add.s(i, i) for i in range(10)) | guide.tsum.s(), djwork.chord)
    # Nested shapes: a group after a chain, a group inside a chain (docs/canvas.md, Nesting).
    ended = demo.add.s(4, 4) | demo.mul.s(2) | djwork.group(demo.add.si(i, i) for i in range(10))
    assert isinstance(ended, djwork.chain) and isinstance(ended.tasks[-1], djwork.group)
    assert len(djwork.chain(demo.add.s(2, 2), djwork.group(demo.add.s(1)), demo.add.s(1)).tasks) == 3
    # Celery's group.link: the first member's callback, made immutable; group.link_error: every member's.
    linked = djwork.group(demo.add.s(2, 2), demo.add.s(4, 4))
    linked.link(demo.add.s(1, 1))
    assert [task.options.get("link") for task in linked.tasks] == [demo.add.si(1, 1), None]
    failing = djwork.group(guide.raising_task.s(), guide.raising_task.s())
    failing.link_error(guide.log_error.s())
    assert [task.options["link_error"] for task in failing.tasks] == [guide.log_error.s()] * 2


def test_group_skew_sets_each_members_countdown(raw_redis):
    g = demo.add.chunks(zip(range(100), range(100), strict=True), 10).group()
    assert [task.options["countdown"] for task in g.skew(start=1, stop=10).tasks] == [float(i) for i in range(1, 11)]
    held = djwork.group(demo.add.s(i, i) for i in range(5)).skew(start=1, stop=3)
    assert [task.options["countdown"] for task in held.tasks] == [1.0, 2.0, 3.0, 3.0, 3.0]
    before = time.time()
    ref = djwork.group(demo.add.s(1, 1), demo.add.s(2, 2)).skew(start=5, step=5)()
    after = time.time()
    scores = sorted(score for _job, score in scheduled(raw_redis))
    assert len(ref.jids) == 2
    assert [before + 5 - 0.01 <= scores[0] <= after + 5, before + 10 - 0.01 <= scores[1] <= after + 10] == [True] * 2
