"""Nested canvases against real workers: every direction Celery nests (chains of groups, groups of chains,
chords of chains, chords in chains, a chain ending in a chord), Celery's errbacks on group and chord
members, the failing task's own exception from ``.get()``, ``root_id``/``parent_id``, ``freeze()``,
``chain.link``, ``GroupResult.save/restore`` and ``ResultSet``; and a worker ``kill -9``ed mid-canvas.

What these check is modeled on Celery's t/integration/test_canvas.py: the value each shape returns,
that each task ran once (every job writes its call to Redis, tests/canvas_jobs.py), and which errback
ran with what.
"""

from __future__ import annotations

import signal

import pytest

import djwork
from tests import canvas_jobs as cj
from tests.helpers_worker import wait_until
from tests.support.canvas_records import calls, errors
from tests.support.orphans import logged_identity, recovered_line, wait_orphaned


def test_every_nesting_direction_returns_celerys_values_and_runs_each_task_once(workers, raw_redis):
    # Everything is sent before the workers start, so all of it runs side by side in one pool.
    chain_of_groups = djwork.chain(djwork.group(cj.add.s(1, 1), cj.add.s(2, 2)), cj.tsum.s(),
                                   djwork.group(cj.add.s(10), cj.mul.s(3))).delay()
    group_of_chains = djwork.group(cj.add.s(1, 2) | cj.mul.s(10), cj.add.s(2, 3) | cj.mul.s(10),
                                   cj.add.s(5, 5)).delay()
    chord_of_chains = djwork.chord([cj.add.s(100, 1) | cj.mul.s(2), cj.add.s(3, 3) | cj.mul.s(2)])(cj.tsum.s())
    chord_in_chain = djwork.chain(cj.add.s(20, 1), djwork.chord([cj.add.s(1), cj.add.s(2)], cj.tsum.s()),
                                  cj.mul.s(10)).delay()
    chain_to_chord = (cj.add.s(30, 2) | djwork.chord([cj.add.s(1), cj.mul.s(2)], cj.tsum.s())).delay()
    group_in_chain = djwork.chain(cj.add.s(40, 2), djwork.group(cj.add.s(10), cj.add.s(20)), cj.tsum.s()).delay()
    groups_in_group = djwork.group(djwork.group(cj.add.s(50, 1), cj.add.s(50, 2)), cj.add.s(50, 3)).delay()
    generated = djwork.chord(cj.add.s(i, 1000) for i in range(5))(cj.tsum.s())
    chords_in_group = djwork.group(djwork.chord([cj.add.s(60, 1), cj.add.s(60, 2)], cj.tsum.s()),
                                   djwork.chord([cj.add.s(70, 1)], cj.record.s("inner-chord"))).delay()
    first = cj.add.s(80, 1).freeze()
    lineage = djwork.chain(first, cj.lineage.s()).delay()
    linked = djwork.chain(cj.add.s(90, 1), cj.mul.s(2))
    linked.link(cj.record.s("chain-link"))
    linked_ref = linked.delay()
    saved = djwork.group(cj.add.s(95, 1), cj.add.s(95, 2)).delay().save()
    several = djwork.ResultSet([djwork.chain(cj.add.s(96, 1), cj.mul.s(2)).delay(),
                                djwork.group(cj.add.s(97, 1)).delay()])

    inner = djwork.chain(cj.add.s(200, 1), cj.add.s(1))
    inner.link(cj.record.s("inner-link"))
    flattened = djwork.chain(inner, cj.mul.s(2)).delay()  # the inner chain's link is kept (Celery's)
    step_link = djwork.chain(cj.add.s(300, 1).set(link=cj.record.s("step-link")), cj.mul.s(2)).delay()
    deep = djwork.chain(cj.add.si(7, 0), djwork.group(cj.add.si(7, 100), djwork.chain(
        cj.add.si(7, 200), djwork.group(cj.add.si(7, 1000), cj.add.si(7, 2000)))), cj.add.si(7, 10)).delay()

    ids_to_group = (cj.ids.si(1) | cj.ids.si(2) | djwork.group(cj.ids.si(i) for i in (3, 4))).delay()
    returned_canvas = (cj.makes_canvas.s() | cj.rebuilds.s()).delay()
    returned_ref = cj.returns_ref.apply_async(ignore_result=False)

    workers.start("-c", "8", overrides={"LOG_JOBS": False})

    assert chain_of_groups.get(timeout=30) == [16, 18]  # [2, 4] -> 6 -> [6 + 10, 6 * 3]
    assert group_of_chains.get(timeout=30) == [30, 50, 10]
    assert chord_of_chains.get(timeout=30) == 202 + 12
    assert chord_in_chain.get(timeout=30) == (22 + 23) * 10
    assert chain_to_chord.get(timeout=30) == 33 + 64
    assert (chain_to_chord.state, chain_to_chord.successful(), chain_to_chord.failed()) == ("SUCCESS", True, False)
    assert group_in_chain.get(timeout=30) == 52 + 62
    assert groups_in_group.get(timeout=30) == [51, 52, 53]  # a group in a group is unrolled into it (Celery's)
    assert generated.get(timeout=30) == 5010
    assert chords_in_group.get(timeout=30) == [123, [71]]
    assert lineage.get(timeout=30) == {"previous": 81, "root_id": first.id, "parent_id": first.id}
    assert lineage.jids[0] == first.id  # freeze() reserved the id the job ran as
    # Celery's test_parent_ids: a group after two steps; every member's root is the first, its parent the second.
    root, parent = ids_to_group.parent.parent, ids_to_group.parent
    assert ids_to_group.get(timeout=30) == [[root.id, parent.id, 3], [root.id, parent.id, 4]]
    assert parent.get(timeout=30) == [root.id, root.id, 2] and root.get(timeout=30)[2] == 1
    assert linked_ref.get(timeout=30) == 182
    made = cj.makes_canvas.s().apply().get()
    assert returned_canvas.get(timeout=30) == ["chain", repr(made)]  # the step got the canvas whole, as a dict
    # Celery's form of a result: ((id, its parent's form), children); the chain's last step, then the one before.
    (last_id, ((first_id, no_parent), _)), children = returned_ref.get(timeout=30)
    assert (djwork.AsyncResult(last_id).get(timeout=30), djwork.AsyncResult(first_id).get(timeout=30)) == (802, 401)
    assert (no_parent, children) == (None, None)
    restored = djwork.GroupResult.restore(saved.id)
    assert restored.get(timeout=30) == [96, 97]
    assert [result.get(timeout=30) for result in restored] == [96, 97]  # each member's own AsyncResult
    assert several.get(timeout=30) == [194, [98]]
    assert flattened.get(timeout=30) == 404
    assert step_link.get(timeout=30) == 602
    assert deep.get(timeout=30) == 17
    wait_until(lambda: {"chain-link 182", "inner-link 202", "step-link 301"} <= set(calls(raw_redis)), 30,
               "the links")

    seen = calls(raw_redis)
    # Each task once: values passed step to step, and the steps after a group got the group's list.
    assert seen.count("tsum 2") == 6 and seen.count("tsum 5") == 1  # every chord body and sum step, once
    for call in ("add 1 1", "add 2 2", "add 6 10", "mul 6 3", "mul 3 10", "mul 5 10", "add 100 1",
                 "mul 101 2", "add 21 1", "add 21 2", "mul 45 10", "add 32 1", "mul 32 2", "add 42 10",
                 "add 42 20", "inner-chord [71]", "chain-link 182", "inner-link 202", "step-link 301", "mul 202 2",
                 "mul 301 2", "add 7 0", "add 7 100", "add 7 200", "add 7 1000", "add 7 2000", "add 7 10"):
        assert seen.count(call) == 1, (call, seen)


def test_replace_and_add_to_chord_hand_on_the_new_value(workers, raw_redis):
    by_task = djwork.chain(cj.replaced_by.s(1, "task"), cj.mul.s(2)).delay()
    by_canvases = djwork.group(cj.replaced_by.s(2, "chain"), cj.replaced_by.s(3, "group")).delay()
    grown = djwork.chord([cj.adds_to_chord.s(7), cj.add.s(1, 1)])(cj.tsum.s())

    workers.start("-c", "4", overrides={"LOG_JOBS": False})

    assert by_task.get(timeout=30) == 202  # add(1, 100), then mul(101, 2)
    assert by_canvases.get(timeout=30) == [30, [4, 5]]
    assert grown.get(timeout=30) == 7 + 2 + 1007  # the added member's result comes last
    seen = calls(raw_redis)
    for call in ("replaced_by 1 task", "add 1 100", "mul 101 2", "add 2 1", "mul 3 10", "add 3 1", "add 3 2",
                 "add 7 1000", "tsum 3"):
        assert seen.count(call) == 1, (call, seen)


def test_a_failure_reraises_the_tasks_own_exception_and_calls_celerys_errbacks_once(workers, raw_redis):
    member = djwork.group(cj.add.s(1, 1), cj.fails.s("member").on_error(cj.errback_old.s())).delay()
    nested = djwork.group(djwork.chain(cj.add.s(2, 2), cj.fails.s()), cj.add.s(3, 3)).delay()
    chord = djwork.chord([cj.add.s(4, 4), cj.fails.s("header")])(
        cj.tsum.s().on_error(cj.errback_new.s(tag="chord-new")))
    chained = djwork.chain(cj.add.s(5, 5), djwork.group(cj.fails.s(), cj.add.s(1)), cj.record.s("never")).on_error(
        cj.errback_new.s(tag="chain")).delay()
    single = cj.fails.apply_async(("single",), link_error=cj.errback_new.s(tag="single"))

    workers.start("-c", "6", overrides={"LOG_JOBS": False})

    for ref in (member, nested, chord, chained):
        with pytest.raises(cj.ExpectedError):
            ref.get(timeout=30)
    assert chained.failed() and chord.failed() and not chord.successful()
    wait_until(lambda: len(errors(raw_redis)) >= 5, 30, "the five errbacks")
    by_tag = {error["tag"]: error for error in errors(raw_redis)
              if (error["tag"], error.get("exc")) != ("chain", "ChordError")}
    assert sorted(by_tag) == ["chain", "chord-new", "old", "single"]
    died = {call for call in calls(raw_redis) if call.startswith("fails")}
    assert died == {"fails member", "fails 4", "fails header", "fails 10", "fails single"}
    # Old style: the failed task's id; new style: its request, its own exception and traceback.
    assert by_tag["old"]["task_id"] == member.jids[1]
    # The chord's body never ran: its errback gets the body's id and a ChordError naming the header's failure.
    assert (by_tag["chord-new"]["exc"], by_tag["chord-new"]["task_id"]) == ("ChordError", chord.id)
    assert "header" in by_tag["chord-new"]["message"] and by_tag["chord-new"]["traceback"] is False
    assert by_tag["single"]["task_id"] == single.id
    # A member of the group step failed: the job itself, not its batch, with its own exception (Celery's
    # chain.link_error puts the errback on every member)...
    assert by_tag["chain"]["exc"] == "ExpectedError" and "10" in by_tag["chain"]["message"]
    # ... and the step after the group, its chord body as Celery upgrades group | task, never ran: its errback
    # (the chain's) runs once more, as a chord body's, with its id and a ChordError.
    (body,) = [error for error in errors(raw_redis) if (error["tag"], error.get("exc")) == ("chain", "ChordError")]
    assert body["task_id"] == chained.id
    seen = calls(raw_redis)
    assert seen.count("tsum 2") == 0 and not any(call.startswith("never") for call in seen)
    assert len(errors(raw_redis)) == 5  # each errback once per task it stands for


def test_a_worker_killed_between_a_nested_steps_end_and_its_ack_loses_nothing_and_repeats_nothing(workers,
                                                                                                   raw_redis):
    # A chord whose header is a group of chains (and a chain after it): the first step of one chain kills
    # its worker after it ran and before its ack.
    nested = djwork.chain(djwork.chord([cj.kills_once.s(1, "nested") | cj.add.s(10), cj.add.s(2, 2) | cj.mul.s(3)],
                                       cj.tsum.s()), cj.record.s("after")).delay()
    # One job at a time on the victim: the killed job is the only one that was running, so it is the only
    # one that may run twice (a job in progress on a killed worker runs again: at least once).
    victim = workers.start("-c", "1", overrides={"LOG_JOBS": False}, label="victim")
    assert victim.wait_exit(30) == -signal.SIGKILL
    identity = logged_identity(victim)
    wait_orphaned(raw_redis, identity)
    rescuer = workers.start("-c", "2", overrides={"LOG_JOBS": False}, label="rescuer")
    rescuer.wait_log(" starting: identity=", 30)
    rescuer.wait_log(recovered_line(identity), 30)
    assert nested.get(timeout=30) == 12 + 12
    wait_until(lambda: "after 24" in calls(raw_redis), 30, "the last step")
    seen = calls(raw_redis)
    assert seen.count("kills_once 1") == 2  # it ran again after recovery
    # and everything else once: no step pushed twice, none lost
    assert [seen.count(call) for call in ("add 2 2", "add 2 10", "mul 4 3", "tsum 2", "after 24")] == [1] * 5
