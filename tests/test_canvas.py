"""The canvas without workers: what applying it writes, and what the Lua step that ends each job pushes next.

Each job's end is played through the script a worker runs for it (fetch.lua's ack, fail.lua's
filing), after writing the result the worker would have kept, so these tests pin the shapes of
the arguments each next step receives and that a replayed end pushes nothing twice.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

import djwork
from djwork.redis import keys
from tests import canvas_jobs as cj
from tests.support.batches import ack, fail


def queued(raw_redis, queue: str = "default") -> list[dict]:
    return [json.loads(raw) for raw in reversed(raw_redis.lrange(keys.queue(queue), 0, -1))]


def finish(raw_redis, job: dict, result) -> None:
    """A successful run as the worker ends it: the kept result, then the ack (replayed: a second ack)."""
    raw_redis.hset(keys.batch_results(job["bid"]), job["jid"], json.dumps(result))
    ack(raw_redis, job)


def test_signatures_are_json_and_come_back_whole():
    sig = cj.add.s(1, y=2).set(queue="low", countdown=dt.timedelta(seconds=5), link=cj.record.s("done"))
    again = djwork.signature(json.loads(json.dumps(sig)))
    assert again == sig and isinstance(again.options["link"], djwork.Signature)
    assert (again.task, again.args, again.kwargs, again.options["countdown"]) == ("tests.canvas_jobs.add", [1],
                                                                                  {"y": 2}, 5.0)
    assert cj.add.set(queue="low").s(1).options == {"queue": "low"}
    assert cj.add.s(2).clone((1,)).args == [1, 2]  # a partial: new arguments first, as Celery
    edited = cj.record.s()
    edited.args = ("by hand",)  # Celery's integration tasks edit a signature so
    edited.set(immutable=True)
    assert (edited.args, edited.immutable, edited.options) == (["by hand"], True, {})
    assert cj.add.si(2, 3).clone((1,)).args == [2, 3]  # immutable: ignored
    assert isinstance(cj.add.s(1, 1) | cj.mul.s(2) | cj.mul.s(3), djwork.chain)
    assert len((cj.add.s(1, 1) | cj.mul.s(2) | cj.mul.s(3)).tasks) == 3
    assert isinstance(djwork.group(cj.add.s(1, 1)) | cj.tsum.s(), djwork.chord)


def _kinds(node) -> list:
    """Each node's class, down every nested member: what a rebuild must give back."""
    members = [*node.tasks, *([node.body] if isinstance(node, djwork.chord) else [])] if isinstance(
        node, (djwork.chain, djwork.group, djwork.chord)) else []
    return [type(node).__name__, [_kinds(member) for member in members]]


def test_canvases_are_signatures_that_come_back_whole_from_json():
    # Celery's test_signature_serialization: each canvas nested in each, through JSON and Signature.from_dict.
    made = [djwork.chain(djwork.chain(cj.add.s(1), cj.mul.s(2)), djwork.group(cj.add.s(1), cj.mul.s(3))),
            djwork.group(djwork.chain(cj.add.s(1, 1), cj.mul.s(2)), djwork.chord([cj.add.s(1, 1)], cj.tsum.s())),
            djwork.chord([djwork.chain(cj.add.s(1, 1), cj.mul.s(2)), cj.add.si(2, 2)],
                         djwork.chord([cj.add.s(1)], cj.tsum.s()), link_error=cj.errback_old.s()),
            djwork.chain(cj.add.s(1, 1), cj.mul.s(2)).set(link=cj.record.s("done"))]
    for canvas in made:
        assert isinstance(canvas, djwork.Signature) and canvas["subtask_type"] == type(canvas).__name__
        data = json.loads(json.dumps(canvas))
        for rebuilt in (djwork.Signature.from_dict(data), djwork.signature(data)):
            assert (rebuilt, _kinds(rebuilt), repr(rebuilt)) == (canvas, _kinds(canvas), repr(canvas))
    assert isinstance(djwork.Signature.from_dict(json.loads(json.dumps(made[3]))).options["link"], djwork.Signature)
    # A task itself as a member is its signature with no arguments of its own (Celery's signature(task)).
    assert djwork.group(cj.tsum, cj.tsum).tasks == [cj.tsum.s(), cj.tsum.s()]


def test_a_chains_id_is_its_own_until_freeze_gives_it_the_last_tasks():
    last = cj.add.s(2).set(task_id="42")
    pair = cj.add.s(4) | last
    assert pair.id is None  # Celery's: the chain's own id, not its last task's
    assert pair.freeze("43").id == "43" and pair.tasks[-1].id == "43" and pair.tasks[0].id
    assert (cj.add.s(4) | cj.add.s(2)).freeze().id is not None


def test_a_group_inside_a_group_is_unrolled_into_it(raw_redis):
    ref = djwork.group(cj.add.s(1, 1), djwork.group(cj.add.s(2, 2), djwork.group(cj.add.s(3, 3))),
                       djwork.group()).delay()
    assert [job["args"] for job in queued(raw_redis)] == [[1, 1], [2, 2], [3, 3]]
    # One batch, no child batch of the inner groups: the results come back in one flat list.
    assert ({job["bid"] for job in queued(raw_redis)}, raw_redis.zrange(keys.BATCHES, 0, -1)) == (
        {ref.bid}, [ref.bid.encode()])
    assert len(djwork.group(djwork.group(cj.add.s(1, 1), cj.add.s(2, 2))).tasks) == 2  # group(group) is that group


def test_a_chain_ref_is_its_last_tasks_result_whose_parents_walk_back(raw_redis):
    ref = (cj.ids.si(1) | djwork.group(cj.ids.si(2), cj.ids.si(3)) | cj.ids.si(4) | cj.ids.si(5)).delay()
    assert isinstance(ref, djwork.AsyncResult) and isinstance(ref.parent, djwork.AsyncResult)
    group_step = ref.parent.parent
    assert isinstance(group_step, djwork.GroupResult) and group_step.id == ref.bids[1]
    assert [result.id for result in group_step.results] == [job["jid"] for job in _pushed_after(raw_redis, ref)]
    assert (group_step.parent.id, group_step.parent.parent) == (ref.jids[0], None)
    # Returned by a job, it is stored in Celery's form: ((id, parent's form), children).
    (last, (before, _)), children = json.loads(djwork.results.record.to_json(ref))
    assert (last, before[0], children) == (ref.id, ref.jids[2], None)


def _pushed_after(raw_redis, ref) -> list[dict]:
    """The group step's jobs, pushed by the first step's end."""
    (first,) = queued(raw_redis)
    raw_redis.delete(keys.queue("default"))
    finish(raw_redis, first, [None, None, 1])
    return queued(raw_redis)


def test_each_chain_step_is_pushed_once_by_the_ack_of_the_one_before_with_its_result_first(raw_redis):
    ref = djwork.chain(cj.add.s(1, 2), cj.add.s(10), cj.mul.s(3)).apply_async()
    (first,) = queued(raw_redis)
    assert (first["args"], first["bid"], first["jid"]) == ([1, 2], ref.bids[0], ref.jids[0])
    # The steps after it wait as members of their own batches, not as jobs.
    assert raw_redis.smembers(keys.batch_jids(ref.bids[1])) == {ref.jids[1].encode()}
    raw_redis.delete(keys.queue("default"))
    finish(raw_redis, first, 3)
    ack(raw_redis, first)  # the same job's end again (a run after orphan recovery): nothing more
    (second,) = queued(raw_redis)
    assert (second["class"], second["args"], second["bid"], second["jid"]) == ("tests.canvas_jobs.add", [3, 10],
                                                                               ref.bids[1], ref.jids[1])
    raw_redis.delete(keys.queue("default"))
    finish(raw_redis, second, 13)
    (third,) = queued(raw_redis)
    assert third["args"] == [13, 3]
    raw_redis.delete(keys.queue("default"))
    finish(raw_redis, third, 39)
    assert queued(raw_redis) == [] and ref.get(timeout=1) == 39


def test_a_chord_body_gets_every_result_in_order_and_a_death_runs_the_errback_instead(raw_redis):
    ref = djwork.chord([cj.add.s(i, i) for i in range(3)])(cj.tsum.s().set(queue="low"))
    members = queued(raw_redis)
    for job in reversed(members):  # finished last to first: the body still sees them in order
        finish(raw_redis, job, job["args"][0] * 2)
    (body,) = queued(raw_redis, "low")
    assert (body["args"], body["bid"], body["jid"]) == ([[0, 2, 4]], ref.body_bid, ref.id)
    # Celery's parent_id of a chord body: the header task whose end fired it (here the first, which ended last).
    assert (body["parent_id"], body["root_id"]) == (members[0]["jid"], members[0]["jid"])
    assert raw_redis.lindex(keys.queue("low"), 0).count(b'"parent_id"') == 1  # one key: the head has none

    raw_redis.flushdb()
    broken = djwork.chord([cj.add.s(1, 1), cj.dies.s(1)], cj.tsum.s(), link_error=cj.errback_old.s()).apply_async()
    ok, dying = queued(raw_redis)
    raw_redis.delete(keys.queue("default"))
    fail(raw_redis, dying, "dead")
    finish(raw_redis, ok, 2)
    # The body's errback, never the body, once, with the body's id: Celery's chord_error_from_stack calls
    # the body's errbacks with a request that names the body.
    (pushed,) = queued(raw_redis)
    assert (pushed["class"], pushed["args"]) == ("tests.canvas_jobs.errback_old", [broken.id])
    with pytest.raises(djwork.ChordError):  # no result record of the death here: the failure itself
        broken.get(timeout=1)


def test_a_new_style_errback_is_called_by_the_builtin_job_and_a_nested_death_names_the_job(raw_redis):
    # group(chain(add, dies), add): the chain's step dies, its container fails the group at once.
    ref = djwork.group(djwork.chain(cj.add.s(1, 1), cj.dies.s()).on_error(cj.errback.s(tag="t")),
                       cj.add.s(2, 2)).delay()
    first, other = queued(raw_redis)
    raw_redis.delete(keys.queue("default"))
    finish(raw_redis, first, 2)
    (dying,) = queued(raw_redis)
    raw_redis.delete(keys.queue("default"))
    fail(raw_redis, dying, "dead")
    (pushed,) = queued(raw_redis)
    assert pushed["class"] == "djwork.canvas.builtins.call_errback"
    assert pushed["args"] == [dying["jid"], dict(cj.errback.s(tag="t"))]
    assert djwork.Batch.status(ref.bid).death_at is not None  # the group heard of it before `other` ended
    with pytest.raises(djwork.CanvasError, match="died"):
        ref.get(timeout=1)
    finish(raw_redis, other, 4)
    assert queued(raw_redis) == [pushed]  # nothing more pushed


def test_an_immutable_errback_gets_its_own_arguments_and_an_errback_is_checked_when_it_is_called(raw_redis):
    # record(value, tag) takes two, which makes a mutable errback Celery's new style: immutable, it is called
    # with its own arguments only (Celery's), not through the built-in job that passes (request, exc, traceback).
    djwork.chain(cj.dies.s(1), cj.add.s(1)).on_error(cj.record.si("chain", "died")).delay()
    (dying,) = queued(raw_redis)
    raw_redis.delete(keys.queue("default"))
    fail(raw_redis, dying, "dead")
    (pushed,) = queued(raw_redis)
    assert (pushed["class"], pushed["args"]) == ("tests.canvas_jobs.record", ["chain", "died"])
    # double(x) can't take the failed task's id before "x": Celery checks an errback only when it calls it, so
    # the canvas is sent (its errback would fail in its own job, and never runs when nothing dies).
    ref = djwork.chain(cj.add.s(1, 1), cj.mul.s(2)).on_error(cj.double.s("x")).delay()
    assert [job["jid"] for job in queued(raw_redis)][-1] == ref.jids[0]


def test_a_generator_header_is_sent_as_it_is_yielded_and_held_open_until_it_is_done(raw_redis):
    def members():
        yield cj.add.s(1, 1)
        (first,) = queued(raw_redis)  # sent before the generator made the next member (Celery's lazy header)
        raw_redis.delete(keys.queue("default"))
        finish(raw_redis, first, 2)  # every member sent so far has ended: the hold keeps the header open
        assert queued(raw_redis) == []
        yield cj.add.s(2, 2)
        yield djwork.group(cj.add.s(3, 3))  # a group member is unrolled into the header

    ref = djwork.chord(members())(cj.tsum.s())
    second, third = queued(raw_redis)
    raw_redis.delete(keys.queue("default"))
    finish(raw_redis, third, 6)
    finish(raw_redis, second, 4)
    (body,) = queued(raw_redis)
    assert (body["args"], body["jid"]) == ([[2, 4, 6]], ref.id)  # once, with every result in header order

    def broken():
        yield cj.add.s(1, 1)
        raise ValueError("no more members")

    raw_redis.flushdb()
    with pytest.raises(ValueError, match="no more members"):
        djwork.chord(broken(), cj.tsum.s(), link_error=cj.errback_old.s()).apply_async()
    sent, errback = queued(raw_redis)  # the hold left as dead: the chord failed, its errback runs once
    assert (sent["args"], errback["class"]) == ([1, 1], "tests.canvas_jobs.errback_old")
    finish(raw_redis, sent, 2)
    assert len(queued(raw_redis)) == 2  # and the body never runs


def test_empty_headers_immutable_bodies_and_countdowns(raw_redis):
    assert djwork.group([]).delay().get(timeout=1) == []
    djwork.chord([])(cj.tsum.s())
    assert [job["args"] for job in queued(raw_redis)] == [[[]]]  # Celery too runs the body with []
    raw_redis.delete(keys.queue("default"))
    djwork.chord([])(cj.add.si(1, 2))
    assert [job["args"] for job in queued(raw_redis)] == [[1, 2]]
    raw_redis.delete(keys.queue("default"))
    djwork.chord([])(cj.tsum.s().set(countdown=60))
    ((raw, score),) = raw_redis.zrange(keys.SCHEDULE, 0, -1, withscores=True)
    assert json.loads(raw)["args"] == [[]] and score > json.loads(raw)["created_at"] + 59


def test_link_and_link_error_on_apply_async(raw_redis):
    ref = cj.add.apply_async((2, 3), link=cj.record.s("linked"), link_error=cj.errback_old.s())
    (job,) = queued(raw_redis)
    assert job["jid"] == ref.jid and "bid" in job
    raw_redis.delete(keys.queue("default"))
    finish(raw_redis, job, 5)
    assert [(pushed["class"], pushed["args"]) for pushed in queued(raw_redis)] == [
        ("tests.canvas_jobs.record", [5, "linked"])]


def test_shapes_djwork_refuses_are_refused_before_anything_is_written(raw_redis):
    with pytest.raises(djwork.CanvasError, match="expected a signature"):
        cj.add.apply_async((1, 2), link="tests.canvas_jobs.record")
    with pytest.raises(djwork.CanvasError, match="countdown"):
        djwork.chain(cj.add.s(1, 2), cj.add.s(1).set(eta=dt.datetime.now(dt.UTC))).delay()
    with pytest.raises(djwork.CanvasError, match="group options"):
        djwork.group(cj.add.s(1, 2)).apply_async(queue="low")
    with pytest.raises(TypeError):
        djwork.chord([cj.add.s(1)])(cj.tsum.s())  # add needs two arguments: refused at the send
    assert raw_redis.keys("*") == []


def test_a_linked_jobs_ref_follows_its_own_results_flag(raw_redis, settings):
    # The link gets the value through the one-job batch; the job's own record only when results are on for it,
    # so its ref must not wait for a record nothing writes (it read PENDING for ever before).
    settings.DJWORK = {key: value for key, value in settings.DJWORK.items() if key != "RESULTS"}
    off = cj.add.s(1, 1).apply_async(link=cj.add.s(2))
    with pytest.raises(djwork.ResultsOff, match="ignore_result=False"):
        off.get(timeout=1)
    on = cj.add.apply_async((1, 2), link=cj.add.s(2), ignore_result=False)  # Celery's way: a signature under it
    assert not on.ignored
    with pytest.raises(djwork.ResultTimeout):  # waits for the record the worker will write
        on.get(timeout=0.1, interval=0.05)
    assert [json.loads(raw).get("djwork_result") for raw in raw_redis.lrange(keys.queue("default"), 0, -1)] == [
        True, None]


def test_a_step_before_a_group_pushes_each_member_once_and_nested_values_come_back_in_order(raw_redis):
    ref = djwork.chain(cj.add.s(1, 2), djwork.group(cj.add.s(10), cj.add.s(1) | cj.mul.s(2))).delay()
    (first,) = queued(raw_redis)
    raw_redis.delete(keys.queue("default"))
    finish(raw_redis, first, 3)
    ack(raw_redis, first)  # the same job's end again (a run after orphan recovery): nothing more
    plus_ten, plus_one = queued(raw_redis)  # both of the group's first jobs, from one Lua step, once
    assert (plus_ten["args"], plus_one["args"]) == ([3, 10], [3, 1])
    assert plus_ten["root_id"] == first["jid"] and plus_ten["parent_id"] == first["jid"]
    raw_redis.delete(keys.queue("default"))
    finish(raw_redis, plus_one, 4)
    (doubled,) = queued(raw_redis)  # the nested chain's next step
    assert doubled["args"] == [4, 2]
    raw_redis.delete(keys.queue("default"))
    finish(raw_redis, doubled, 8)
    finish(raw_redis, plus_ten, 13)
    assert queued(raw_redis) == []
    assert ref.get(timeout=1) == [13, 8]  # the nested chain's value is its last step's, in the group's order


def test_group_link_error_is_on_every_member_and_group_link_on_the_first_made_immutable(raw_redis):
    # Celery's group.link_error: each member that dies runs the errback once (with its own id); an
    # immutable errback gets its own arguments only, whatever its arity (record takes two: Celery's new style).
    grouped = djwork.group(cj.fails.s("a"), cj.add.s(1, 1), cj.fails.s("b"))
    grouped.link_error(cj.errback_old.s())
    grouped.link(cj.record.s("first", "linked"))
    assert grouped.tasks[0].options["link"] == cj.record.si("first", "linked")
    assert "link" not in grouped.tasks[1].options
    assert all(task.options["link_error"] == cj.errback_old.s() for task in grouped.tasks)
    ref = grouped.delay()
    first, ok, second = queued(raw_redis)
    raw_redis.delete(keys.queue("default"))
    fail(raw_redis, first, "dead")
    fail(raw_redis, second, "dead")
    finish(raw_redis, ok, 2)
    pushed = [(job["class"], job["args"]) for job in queued(raw_redis)]
    assert sorted(pushed) == sorted([("tests.canvas_jobs.errback_old", [first["jid"]]),
                                     ("tests.canvas_jobs.errback_old", [second["jid"]])])
    with pytest.raises(djwork.CanvasError):
        ref.get(timeout=1)

    raw_redis.flushdb()
    immutable = djwork.group(cj.fails.s("c"))
    immutable.link_error(cj.record.si("errback", "tag"))
    immutable.delay()
    (dying,) = queued(raw_redis)
    raw_redis.delete(keys.queue("default"))
    fail(raw_redis, dying, "dead")
    assert [(job["class"], job["args"]) for job in queued(raw_redis)] == [("tests.canvas_jobs.record",
                                                                            ["errback", "tag"])]


def test_chord_link_error_goes_on_the_body_and_header_errbacks_follow_the_setting(settings):
    body = cj.tsum.s()
    inner = djwork.chord([cj.add.s(1, 1)], cj.tsum.s())
    outer = djwork.chord([cj.add.s(2, 2), inner], body)
    assert outer.tasks is outer.header
    outer.link_error(cj.errback_old.s())
    # The nested chord in the header is outer's copy of ``inner`` (a list's members are copied, as Celery's are).
    assert body.options["link_error"] == cj.errback_old.s() == outer.header[1].body.options["link_error"]
    assert "link_error" not in inner.body.options
    assert "link_error" not in outer.header[0].options  # Celery's default: not the header's members
    settings.DJWORK = {**settings.DJWORK, "CHORD_HEADER_ERRBACKS": True}
    flagged = djwork.chord([cj.add.s(3, 3)], cj.tsum.s())
    flagged.link_error(cj.errback_old.s())
    assert flagged.header[0].options["link_error"] == cj.errback_old.s() == flagged.body.options["link_error"]
    linked = djwork.chord([cj.add.s(4, 4)], cj.tsum.s())
    linked.link(cj.record.s("after"))
    assert linked.body.options["link"] == cj.record.s("after")


def test_a_chords_errback_rides_on_its_body_through_json_and_waits_for_a_body_given_later(raw_redis):
    # A chord is a Signature dict: its link_error is kept on its body, so a chord rebuilt from JSON (as a
    # job returns one) still calls the body's errback once, with the body's id, when its header fails.
    sent = djwork.chord([cj.add.s(1, 1), cj.dies.s(1)], cj.tsum.s()).on_error(cj.errback_old.s())
    assert "link_error" not in sent.options
    rebuilt = djwork.signature(json.loads(json.dumps(sent)))
    ref = rebuilt.apply_async()
    ok, dying = queued(raw_redis)
    raw_redis.delete(keys.queue("default"))
    fail(raw_redis, dying, "dead")
    finish(raw_redis, ok, 2)
    (pushed,) = queued(raw_redis)
    assert (pushed["class"], pushed["args"]) == ("tests.canvas_jobs.errback_old", [ref.id])
    # Given before the body (chord(header, link_error=...)(body)), it waits in the chord's options for it.
    waiting = djwork.chord([cj.add.s(2, 2)], link_error=cj.errback_old.s())
    assert waiting.options["link_error"] == cj.errback_old.s()
    body = cj.tsum.s()
    assert djwork.chord(waiting.header, body, **waiting.options).body.options["link_error"] == cj.errback_old.s()

    def members():
        raise AssertionError("a generator header is consumed by the send, not by link_error()")
        yield

    lazy = djwork.chord(members(), cj.tsum.s())
    lazy.link_error(cj.errback_old.s())
    assert lazy.lazy and lazy.body.options["link_error"] == cj.errback_old.s()


def test_a_chains_eta_or_countdown_delays_the_jobs_it_starts_with(raw_redis):
    eta = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=60)
    first = cj.add.s(1, 2)
    djwork.chain(djwork.group(first, cj.add.s(3, 4)), cj.tsum.s()).apply_async(eta=eta)
    djwork.chain(cj.add.s(5, 6), cj.tsum.s()).apply_async(countdown=60)
    assert queued(raw_redis) == [] and "eta" not in first.options  # the caller's signature is unchanged
    scheduled = [(json.loads(raw), score) for raw, score in raw_redis.zrange(keys.SCHEDULE, 0, -1, withscores=True)]
    assert sorted(job["args"] for job, _ in scheduled) == [[1, 2], [3, 4], [5, 6]]
    assert all(score >= eta.timestamp() - 1 for _, score in scheduled)


def test_a_signatures_time_limits_ride_in_its_payload(raw_redis):
    djwork.chord([cj.add.s(1, 2).set(soft_time_limit=1, time_limit=5)], cj.tsum.s()).apply_async()
    (job,) = queued(raw_redis)
    assert (job["soft_time_limit"], job["time_limit"]) == (1, 5)


def test_a_chords_header_given_as_a_list_is_copies_of_the_callers_signatures():
    header = (cj.add.si(1, 1), cj.add.si(2, 2))
    made = djwork.chord(header, cj.tsum.s())
    for member in made.tasks:
        member.link_error(cj.add.si(0, 0))
    # Celery's chord copies a list's members: the caller's signatures are as they were (Celery's own tests
    # compare them to fresh ones after linking errbacks to chord.tasks).
    assert header[0] == cj.add.si(1, 1) and header[1] == cj.add.si(2, 2)
    assert all(member.options["link_error"] == cj.add.si(0, 0) for member in made.tasks)
    # group | body is a chord of that group's own members, as Celery's upgrade keeps them.
    members = djwork.group(cj.add.si(3, 3), cj.add.si(4, 4))
    upgraded = members | cj.tsum.s()
    assert upgraded.tasks[0] is members.tasks[0]
