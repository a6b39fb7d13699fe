"""Celery's task API without a worker: options, base classes, task.apply's EagerResult, send_task, publish signals.

Expected values are those of Celery's "Tasks" and "Calling Tasks" guides and of its Django example
(tests/celery_demo_jobs.py is our own module written like it). docs/celery.md.
"""

from __future__ import annotations

import json
import time

import pytest
from django.dispatch import receiver

import djwork
from djwork import signals
from djwork.jobs.eager import EagerResult
from djwork.options import OptionError
from djwork.worker.retry import decide
from tests import celery_demo_jobs as demo
from tests import task_api_jobs
from tests.support.queues import only_job
from tests.task_api_jobs import events


# --- Celery's Django example, imported with only its import changed ---------------------------------
def test_the_demo_module_registers_celerys_names_and_options():
    assert demo.add.name == "tests.celery_demo_jobs.add"
    assert isinstance(demo.add, djwork.Task)
    assert (demo.error_task.payload_retry, demo.error_task.retry_kwargs) == (2, {"max_retries": 2, "countdown": 600})
    assert demo.error_task.autoretry_for == (Exception,)
    assert (demo.error_backoff_test.payload_retry, demo.error_backoff_test.retry_backoff) == (3, 5)
    assert demo.error_backoff_test.retry_jitter is False


def test_the_demo_tasks_apply_eagerly(raw_redis):
    assert demo.add.apply((2, 2)).get() == 4
    assert demo.mul.apply((3, 4)).get() == 12
    assert demo.xsum.apply(([1, 2, 3],)).get() == 6
    assert demo.add(2, 3) == 5  # calling the task runs it inline, as in Celery
    assert raw_redis.dbsize() == 0


@pytest.mark.django_db
def test_the_demo_orm_tasks_apply_eagerly():
    widget = demo.Widget.objects.create(name="before")
    assert demo.count_widgets.apply().get() == 1
    assert demo.rename_widget.apply((widget.id, "after")).successful()
    widget.refresh_from_db()
    assert widget.name == "after"


def test_error_task_fails_after_its_two_retries_eagerly(raw_redis):
    result = demo.error_task.apply()
    assert isinstance(result, EagerResult)
    assert (result.state, result.failed(), result.successful(), result.ready()) == ("FAILURE", True, False, True)
    assert repr(result.result) == "Exception('Test error')"
    assert "Traceback" in result.traceback
    with pytest.raises(Exception, match="Test error"):
        result.get()
    assert result.get(propagate=False) is result.result
    with pytest.raises(Exception, match="Test error"):
        demo.error_task.apply(throw=True)


def test_error_backoff_test_countdowns_are_celerys_5_10_20(raw_redis):
    now = 1_000.0
    payload = {"class": demo.error_backoff_test.name, "jid": "j", "queue": "default", "args": [],
               "retry": demo.error_backoff_test.payload_retry}
    seen = []
    for _attempt in range(4):
        decision = decide(payload, Exception("Test error"), demo.error_backoff_test, "default", 25, now=now)
        seen.append((decision.target, decision.score - now))
        payload = decision.payload
    assert seen == [("retry", 5), ("retry", 10), ("retry", 20), ("dead", 0)]


def test_retry_backoff_true_and_its_cap_follow_celery():
    @djwork.job(name="tests.task_api.backoff_true", autoretry_for=(KeyError,), retry_backoff=True,
                retry_backoff_max=6, retry_jitter=False, max_retries=10)
    def backoff_true():
        return None

    payload = {"class": "x", "jid": "j", "queue": "default", "retry": 10}
    delays = []
    for _attempt in range(5):
        decision = decide(payload, KeyError("k"), backoff_true, "default", 25, now=0.0)
        delays.append(decision.score)
        payload = decision.payload
    assert delays == [1, 2, 4, 6, 6]  # 2**retries, capped by retry_backoff_max
    jittered = {decide({"class": "x", "jid": "j", "retry": 10, "retry_count": 2}, KeyError("k"),
                       djwork.job(name="tests.task_api.jitter", autoretry_for=(KeyError,), retry_backoff=True)(
                           lambda: None), "default", 25, now=0.0).score for _ in range(200)}
    assert jittered <= set(range(9)) and len(jittered) > 3  # randrange(8 + 1): whole seconds in [0, 8]


def test_autoretry_without_backoff_waits_the_retry_kwargs_countdown_or_default_retry_delay():
    payload = {"class": "x", "jid": "j", "queue": "default", "retry": 2}
    decision = decide(payload, Exception("Test error"), demo.error_task, "default", 25, now=0.0)
    assert (decision.target, decision.score) == ("retry", 600)

    @djwork.job(name="tests.task_api.default_delay", autoretry_for=(KeyError,), default_retry_delay=42)
    def default_delay():
        return None

    assert decide(payload, KeyError("k"), default_delay, "default", 25, now=0.0).score == 42


def test_dont_autoretry_for_fails_at_once():
    @djwork.job(name="tests.task_api.dont", autoretry_for=(Exception,), dont_autoretry_for=(ValueError,))
    def dont():
        return None

    payload = {"class": "x", "jid": "j", "queue": "default", "retry": 5}
    assert decide(payload, ValueError("v"), dont, "default", 25).target == "dead"
    assert decide(payload, KeyError("k"), dont, "default", 25).target == "retry"


# --- options: unknown, serializer, priority, class attributes --------------------------------------
def test_an_unknown_option_is_refused_naming_it_and_the_job():
    with pytest.raises(TypeError, match=r"tests\.task_api\.typo: unknown job option\(s\) \['max_retry'\]"):
        djwork.shared_task(name="tests.task_api.typo", max_retry=3)(lambda: None)
    with pytest.raises(TypeError, match=r"tests\.celery_demo_jobs\.add: unknown enqueue option\(s\) \['routing_key'\]"):
        demo.add.apply_async((1, 2), routing_key="x")


def test_only_the_json_serializer_is_accepted(raw_redis):
    for call in (lambda: djwork.job(name="tests.task_api.pickled", serializer="pickle")(lambda: None),
                 lambda: demo.add.apply_async((1, 2), serializer="pickle"),
                 lambda: demo.add.set(serializer="yaml").delay(1, 2)):
        with pytest.raises(OptionError, match=r"serializer='(pickle|yaml)' is not supported: djwork writes JSON"):
            call()
    assert raw_redis.dbsize() == 0
    djwork.job(name="tests.task_api.json", serializer="json")(lambda: None)
    demo.add.apply_async((1, 2), serializer="json")
    assert only_job(raw_redis)["args"] == [1, 2]


def test_a_priority_outside_celery_on_redis_range_is_refused_naming_it(raw_redis):
    for call in (lambda: djwork.job(name="tests.task_api.urgent", priority=10)(lambda: None),
                 lambda: demo.add.apply_async((1, 2), priority=-1),
                 lambda: demo.add.set(priority="5").delay(1, 2),
                 lambda: demo.add.s(1, 2).set(priority=2.5).apply_async(),
                 lambda: djwork.send_task("x.y", priority=True)):
        with pytest.raises(OptionError, match=r"priority=.* is not a priority: give a whole number from 0 \(most "
                                              r"urgent, the default\) to 9"):
            call()
    assert raw_redis.dbsize() == 0
    demo.add.apply_async((1, 2), priority=None)  # None: Celery's "no priority"
    assert only_job(raw_redis)["args"] == [1, 2]


def test_bad_retry_kwargs_and_exception_lists_are_refused():
    with pytest.raises(TypeError, match=r"retry_kwargs supports \['max_retries', 'countdown'\] only, not \['eta'\]"):
        djwork.job(name="tests.task_api.rk", retry_kwargs={"eta": 5})(lambda: None)
    with pytest.raises(TypeError, match="autoretry_for must list exception classes"):
        djwork.job(name="tests.task_api.ar", autoretry_for=("ValueError",))(lambda: None)
    with pytest.raises(TypeError, match=r"base= must be a djwork\.Task subclass"):
        djwork.job(name="tests.task_api.base", base=object)(lambda: None)


def test_acks_and_tracking_options_are_accepted():
    made = djwork.job(name="tests.task_api.acks", acks_late=True, acks_on_failure_or_timeout=True,
                      reject_on_worker_lost=True, track_started=True, typing=True)(lambda: None)
    assert made.acks_late is True and made.track_started is True
    with pytest.raises(TypeError, match="acks_late must be True or False"):
        djwork.job(name="tests.task_api.acks2", acks_late="yes")(lambda: None)


def test_typing_false_skips_the_signature_check(raw_redis):
    loose = djwork.job(name="tests.task_api.loose", typing=False)(lambda x: x)
    loose.delay(1, 2, 3)
    assert only_job(raw_redis)["args"] == [1, 2, 3]
    with pytest.raises(TypeError, match=r"tests\.celery_demo_jobs\.add"):
        demo.add.delay(1, 2, 3)


def test_class_attributes_are_option_defaults_and_the_decorator_wins():
    class Defaults(djwork.Task):
        queue = "low"
        max_retries = 4
        autoretry_for = (KeyError,)
        retry_backoff = 3

    from_class = djwork.job(base=Defaults, name="tests.task_api.from_class")(lambda: None)
    assert (from_class.queue, from_class.max_retries, from_class.payload_retry) == ("low", 4, 4)
    assert (from_class.autoretry_for, from_class.retry_backoff) == ((KeyError,), 3)
    assert isinstance(from_class, Defaults) and type(from_class).__name__ == "Defaults"
    overridden = djwork.shared_task(base=Defaults, name="tests.task_api.overridden", queue="critical",
                                    max_retries=1)(lambda: None)
    assert (overridden.queue, overridden.max_retries) == ("critical", 1)
    assert type(overridden) is type(from_class)  # one class per base


# --- calling options Celery code passes -----------------------------------------------------------
def test_apply_async_task_id_headers_and_retry_policy(raw_redis):
    ref = demo.add.apply_async((2, 2), task_id="my-task-id", headers={"trace": "abc"},
                               retry_policy={"max_retries": 3, "interval_start": 0})
    assert ref.id == "my-task-id"
    job = only_job(raw_redis)
    assert (job["jid"], job["headers"]) == ("my-task-id", {"trace": "abc"})
    with pytest.raises(OptionError, match="headers"):
        demo.add.apply_async((2, 2), headers=["x"])
    with pytest.raises(djwork.ArgumentError, match="headers"):
        demo.add.apply_async((2, 2), headers={"when": time})


def test_calling_guide_countdown_eta_expires(raw_redis):
    import datetime as dt

    from django.utils import timezone

    before = time.time()
    demo.add.apply_async((2, 2), countdown=10)
    demo.add.apply_async((2, 2), eta=timezone.now() + dt.timedelta(seconds=10))
    demo.add.apply_async((10, 10), expires=60)
    scores = [score for _member, score in raw_redis.zrange("schedule", 0, -1, withscores=True)]
    assert len(scores) == 2 and all(before + 9 <= score <= time.time() + 10 for score in scores)
    assert before + 59 <= only_job(raw_redis)["expires_at"] <= time.time() + 60


# --- task.apply: hooks, retries, request ------------------------------------------------------------
def test_apply_runs_the_hooks_in_celerys_order_and_retries_at_once(raw_redis):
    result = task_api_jobs.hooked.apply(("lookup",), {"label": "k"}, task_id="eager-1")
    assert result.state == "FAILURE" and isinstance(result.result, KeyError)
    kinds = [(row["kind"], row.get("retries")) for row in events(raw_redis)]
    assert kinds == [
        ("before_start", 0), ("body", 0), ("on_retry", 0),  # no after_return for a retry (Celery's)
        ("before_start", 1), ("body", 1), ("on_failure", 1), ("after_return", 1),
    ]
    body = events(raw_redis, kind="body")[0]
    assert (body["request_id"], body["is_eager"], body["called_directly"], body["is_instance"]) == (
        "eager-1", True, False, True)
    failure = events(raw_redis, kind="on_failure")[0]
    assert (failure["task_id"], failure["args"], failure["kwargs"], failure["exc"]) == (
        "eager-1", ["lookup"], {"label": "k"}, "KeyError('k')")
    assert failure["einfo_type"] == "KeyError" and failure["einfo_has_traceback"]
    assert events(raw_redis, kind="after_return")[-1]["status"] == "FAILURE"


def test_apply_success_and_a_hook_that_raises(raw_redis):
    result = task_api_jobs.hooked.apply(("ok",), task_id="eager-2")
    assert (result.id, result.state, result.get(), result.successful()) == ("eager-2", "SUCCESS", "ok x", True)
    assert [row["kind"] for row in events(raw_redis)] == ["before_start", "body", "on_success", "after_return"]
    success = events(raw_redis, kind="on_success")[0]
    assert (success["retval"], success["task_id"], success["args"]) == ("ok x", "eager-2", ["ok"])
    assert task_api_jobs.raising_hook.apply(("fine",)).get() == "fine"  # the hook's error is logged only


def test_apply_sends_the_run_signals(raw_redis):
    seen = []

    @receiver(signals.task_prerun, weak=False)
    def prerun(sender, task_id, task, args, kwargs, **rest):
        seen.append(("prerun", sender.name, task_id, args))

    @receiver(signals.task_success, weak=False)
    def success(sender, result, **rest):
        seen.append(("success", result))

    @receiver(signals.task_postrun, weak=False)
    def postrun(sender, task_id, task, args, kwargs, retval, state, **rest):
        seen.append(("postrun", retval, state))

    try:
        demo.add.apply((1, 1), task_id="s-1")
    finally:
        for signal, function in ((signals.task_prerun, prerun), (signals.task_success, success),
                                 (signals.task_postrun, postrun)):
            signal.disconnect(function)
    assert seen == [("prerun", "tests.celery_demo_jobs.add", "s-1", [1, 1]), ("success", 2),
                    ("postrun", 2, "SUCCESS")]


# --- send_task ---------------------------------------------------------------------------------------
def test_send_task_pushes_by_name_without_the_function(raw_redis):
    ref = djwork.send_task("billing.tasks.invoice", [7], {"force": True}, queue="low", task_id="inv-7")
    job = only_job(raw_redis, "low")
    assert (ref.id, job["class"], job["args"], job["kwargs"], job["retry"]) == (
        "inv-7", "billing.tasks.invoice", [7], {"force": True}, True)
    djwork.send_task("tests.celery_demo_jobs.add", (1, 2, 3), countdown=30)  # registered: still just a push
    (member,) = raw_redis.zrange("schedule", 0, -1)
    assert json.loads(member)["args"] == [1, 2, 3]


def test_send_task_refuses_bad_input(raw_redis):
    with pytest.raises(OptionError, match="non-empty string"):
        djwork.send_task("")
    with pytest.raises(TypeError, match="args must be a list"):
        djwork.send_task("x.y", "abc")
    with pytest.raises(djwork.ArgumentError):
        djwork.send_task("x.y", [object()])
    with pytest.raises(OptionError, match="priority"):
        djwork.send_task("x.y", priority=30)
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['exchange'\]"):
        djwork.send_task("x.y", exchange="e")
    # The same run-at and expiry rules as delay(): a millisecond epoch given as seconds is refused.
    with pytest.raises(OptionError, match="more than 100 years ahead"):
        djwork.send_task("x.y", expires=time.time() * 1000)
    assert raw_redis.dbsize() == 0


# --- publish signals ----------------------------------------------------------------------------------
def test_publish_signals_see_and_may_edit_the_job(raw_redis):
    seen = []

    @receiver(signals.before_task_publish, weak=False)
    def before(sender, body, exchange, routing_key, headers, properties, declare, retry_policy, **rest):
        seen.append(("before", sender, routing_key, headers["id"], headers["task"]))
        body["traced"] = "yes"

    @receiver(signals.after_task_publish, weak=False)
    def after(sender, body, exchange, routing_key, **rest):
        seen.append(("after", sender, routing_key, body["jid"]))

    @receiver(signals.before_task_publish, weak=False)
    def broken(sender, **rest):
        raise RuntimeError("a receiver that raises")

    try:
        ref = demo.add.apply_async((1, 2), queue="low")
        refs = demo.mul.delay_many([(1, 2), (3, 4)])
    finally:
        signals.before_task_publish.disconnect(before)
        signals.before_task_publish.disconnect(broken)
        signals.after_task_publish.disconnect(after)
    assert seen[:2] == [("before", "tests.celery_demo_jobs.add", "low", ref.id, "tests.celery_demo_jobs.add"),
                        ("after", "tests.celery_demo_jobs.add", "low", ref.id)]
    assert [entry[0] for entry in seen[2:]] == ["before", "before", "after", "after"]
    assert [entry[3] for entry in seen[4:]] == [r.id for r in refs]
    assert only_job(raw_redis, "low")["traced"] == "yes"
    assert all(json.loads(raw)["traced"] == "yes" for raw in raw_redis.lrange("queue:default", 0, -1))


# --- the "Tasks" guide's retry examples, eagerly ----------------------------------------------------
@djwork.shared_task(bind=True, max_retries=3, name="tests.task_api.flaky_send")
def flaky_send(self, to):
    """The guide's ``raise self.retry(exc=exc, countdown=60)``: fails twice, then sends."""
    try:
        if self.request.retries < 2:
            raise ConnectionError(f"smtp down for {to}")
    except ConnectionError as exc:
        raise self.retry(exc=exc, countdown=60) from exc
    return {"to": to, "retries": self.request.retries, "is_eager": self.request.is_eager}


def test_the_guides_retry_with_countdown_runs_again_at_once_eagerly():
    result = flaky_send.apply(("a@example.com",))
    assert result.get() == {"to": "a@example.com", "retries": 2, "is_eager": True}


def test_error_backoff_test_uses_up_its_three_retries_eagerly():
    result = demo.error_backoff_test.apply(task_id="backoff-1")
    assert (result.id, result.state, repr(result.result)) == ("backoff-1", "FAILURE", "Exception('Test error')")


def test_retry_refuses_options_it_does_not_support():
    flaky_send.push_request(retries=0)
    try:
        with pytest.raises(TypeError, match=r"flaky_send\.retry\(\): unsupported option\(s\) \['queue'\]"):
            flaky_send.retry(queue="other")
    finally:
        flaky_send.pop_request()
    assert flaky_send.request.called_directly is True and flaky_send.request.id is None
    assert flaky_send.job is flaky_send


# --- class-based tasks: djwork.register_task (Celery's app.register_task) ---------------------------
def test_register_task_makes_the_instance_itself_the_registered_job(raw_redis):
    from djwork.jobs import registry

    refresh = task_api_jobs.refresh
    assert isinstance(refresh, task_api_jobs.Refresh) and isinstance(refresh, djwork.Job)
    assert registry["tests.task_api_jobs.refresh"] is refresh and djwork.register_task(refresh) is refresh
    assert refresh.fails_unless_retried and refresh.payload_retry == 1  # Celery's rules, retry_kwargs' limit
    payload, _at = refresh.build_payload(["a"], {"mode": "ok"})
    assert (payload["class"], payload["args"], payload["kwargs"]) == ("tests.task_api_jobs.refresh", ["a"],
                                                                      {"mode": "ok"})
    # Eagerly: autoretry_for retries it at once, and self is the instance.
    assert refresh.apply(("b", "lookup")).get() == "refreshed b after 1"
    assert [(row["retries"], row["is_instance"]) for row in events(raw_redis, kind="refresh")] == [(0, True),
                                                                                                   (1, True)]
    assert refresh("c") == "refreshed c after 0"  # called as a function: runs inline


def test_register_task_refuses_what_is_not_a_task_with_a_body():
    class NoBody(djwork.Task):
        name = "tests.no_body"

    with pytest.raises(TypeError, match=r"NoBody has no run\(\) method"):
        djwork.register_task(NoBody())
    with pytest.raises(TypeError, match=r"expected an instance of a djwork\.Task subclass"):
        djwork.register_task(object())


# --- task.app.conf: the settings djwork has, by Celery's names ---------------------------------------
def test_task_app_conf_reads_and_sets_djwork_settings_by_celerys_names(raw_redis):
    from django.conf import settings
    from django.test import override_settings

    conf = task_api_jobs.plain.app.conf
    assert task_api_jobs.refresh.app is task_api_jobs.plain.app  # one app, as one settings.DJWORK
    with override_settings(DJWORK={**settings.DJWORK, "ALWAYS_EAGER": False}):
        assert conf.task_always_eager is False
        conf.task_always_eager = True
        assert settings.DJWORK["ALWAYS_EAGER"] is True and conf.task_always_eager is True
        # Eager now: run at the push, its value at once (throw=True is what an eager push always does).
        assert task_api_jobs.plain.apply_async(["now"], throw=True).get() == "now"
        assert events(raw_redis, kind="plain_body", label="now")
        conf.task_always_eager = False
        assert raw_redis.llen("queue:default") == 0
        task_api_jobs.plain.delay("queued")
        assert raw_redis.llen("queue:default") == 1
        with pytest.raises(ValueError, match=r"app.conf.task_always_eager = 'yes': must be True or False"):
            conf.task_always_eager = "yes"
    with pytest.raises(AttributeError, match=r"app.conf.broker_heartbeat: djwork has no setting .* task_always_eager"):
        conf.broker_heartbeat  # noqa: B018 - the read is what raises
    with pytest.raises(AttributeError, match=r"app.conf.broker_heartbeat: djwork has no setting"):
        conf.broker_heartbeat = 10
    with pytest.raises(TypeError, match=r"throw=False is not supported"):
        task_api_jobs.plain.apply_async(["x"], throw=False)
