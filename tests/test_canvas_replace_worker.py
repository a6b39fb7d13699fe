"""``self.replace()`` against real workers, as Celery's integration tests use it: ``raise self.replace(sig)``
as well as ``return``, a job sent on its own whose ``.get()`` returns its replacement's value; and what
``revoke()`` of a group with nested members and an empty group after a chain step do."""

from __future__ import annotations

import pytest

import djwork
from tests import canvas_jobs as cj
from tests.helpers_worker import wait_until
from tests.support.canvas_records import calls


def test_raise_and_return_replace_hand_on_the_replacements_value_inside_and_outside_a_canvas(workers, raw_redis):
    raised_in_chain = djwork.chain(cj.raises_replacement.s(1, "task"), cj.mul.s(2)).delay()
    raised_in_group = djwork.group(cj.raises_replacement.s(2, "chain"), cj.raises_replacement.s(3, "group")).delay()
    # Sent on its own: the replacement takes over the job's id, so the job's own result is the replacement's.
    alone = {how: cj.replaced_by.apply_async((x, how), ignore_result=False)
             for x, how in ((4, "task"), (5, "chain"), (6, "group"))}
    raised_alone = cj.raises_replacement.apply_async((7, "task"), ignore_result=False)
    twice = cj.raises_replacement.apply_async((8, "again"), ignore_result=False)  # replaced by one that replaces
    on_the_loop = djwork.chain(cj.async_raises_replacement.s(9), cj.mul.s(2)).delay()

    workers.start("-c", "4", overrides={"LOG_JOBS": False})

    assert raised_in_chain.get(timeout=30) == 202
    assert raised_in_group.get(timeout=30) == [30, [4, 5]]
    assert alone["task"].get(timeout=30) == 104
    assert alone["chain"].get(timeout=30) == 60
    assert alone["group"].get(timeout=30) == [7, 8]
    assert raised_alone.get(timeout=30) == 107
    assert twice.get(timeout=30) == 108
    assert on_the_loop.get(timeout=30) == 218
    assert djwork.AsyncResult(raised_alone.id).state == "SUCCESS"
    seen = calls(raw_redis)
    assert "raises_replacement went on after replace()" not in seen
    # Each job once: a Replaced taken for a failure would have retried the job and replaced it again.
    for call in ("raises_replacement 1 task", "add 1 100", "mul 101 2", "raises_replacement 2 chain", "add 2 1",
                 "mul 3 10", "add 3 1", "add 3 2", "replaced_by 4 task", "add 4 100", "add 5 1", "mul 6 10",
                 "add 6 1", "add 6 2", "raises_replacement 7 task", "add 7 100", "replaced_by 8 task", "add 8 100",
                 "async_raises_replacement 9", "add 9 100", "mul 109 2"):
        assert seen.count(call) == 1, (call, seen)
    assert raw_redis.zcard("retry") == 0 and raw_redis.zcard("dead") == 0


def test_revoking_a_group_revokes_its_nested_members_jobs_too(workers, raw_redis):
    nested = djwork.chain(cj.add.s(1, 1), cj.mul.s(2)).freeze()
    ref = djwork.group(nested, djwork.group(cj.add.s(2, 2)), cj.add.s(3, 3)).delay()
    assert any(slot.startswith("b-") for slot in ref.jids)

    assert ref.revoke() == [True, True, True]  # each member's first job was found waiting and removed
    assert raw_redis.llen("queue:default") == 0
    assert djwork.revoked(nested.tasks[1].id)  # a step not pushed yet: its flag drops it if it ever is
    with pytest.raises(djwork.JobRevoked):
        ref.get(timeout=30)

    workers.start("-c", "1", overrides={"LOG_JOBS": False})
    cj.record.delay(0, "sentinel")  # one thread, one queue: what was waiting before it would have run first
    wait_until(lambda: "sentinel 0" in calls(raw_redis), 30, "the sentinel job")
    assert not [call for call in calls(raw_redis) if call.startswith(("add", "mul"))]


def test_an_empty_group_after_a_chain_step_hands_on_an_empty_list_as_celery_does(workers, raw_redis):
    # On a queue of their own, which is all the worker takes: the job standing for the empty group runs
    # on its step's queue (on `default`, nothing would take it).
    to_body = (cj.add.s(1, 2).set(queue="low") | djwork.group() | cj.tsum.s().set(queue="low")).delay()
    at_the_end = djwork.chain(cj.add.s(3, 4).set(queue="low"), djwork.group()).delay()

    workers.start("-c", "2", "-q", "low", overrides={"LOG_JOBS": False})

    assert to_body.get(timeout=30) == 0  # tsum([])
    assert at_the_end.get(timeout=30) == []
    seen = calls(raw_redis)
    assert seen.count("add 1 2") == 1 and seen.count("tsum 0") == 1 and seen.count("add 3 4") == 1


def test_results_carry_the_root_id_and_parent_id_the_jobs_themselves_see(workers):
    chained = (cj.ids.si(1) | cj.ids.si(2) | cj.ids.si(3)).delay()
    grouped = djwork.group(cj.ids.si(4), cj.ids.si(5)).delay().save()
    alone = cj.ids.apply_async((6,), ignore_result=False)

    workers.start("-c", "2", overrides={"LOG_JOBS": False})

    # Each ref's attributes are what its job's self.request held (Celery's lineage).
    assert chained.get(timeout=30) == [chained.root_id, chained.parent_id, 3]
    assert chained.parent.get(timeout=30) == [chained.root_id, chained.parent.parent_id, 2]
    assert (chained.parent.parent.root_id, chained.parent.parent.parent_id) == (chained.parent.parent.id, None)
    assert chained.root_id == chained.parent.parent.id and chained.parent_id == chained.parent.id
    members = djwork.GroupResult.restore(grouped.id).results
    assert [member.get(timeout=30) for member in members] == [[member.root_id, None, i]
                                                             for member, i in zip(members, (4, 5), strict=True)]
    assert members[0].root_id == members[0].id == grouped.root_id
    assert alone.get(timeout=30) == [alone.root_id, alone.parent_id, 6] == [alone.id, None, 6]


def test_replaced_task_nesting_counts_the_replacements_alone_and_in_a_chain(workers, raw_redis):
    alone = cj.nests.apply_async(("alone", 2), ignore_result=False)
    in_chain = djwork.chain(cj.add.si(1, 1), cj.nests.si("chain", 1)).delay()
    workers.start("-c", "2", overrides={"LOG_JOBS": False})

    assert alone.get(timeout=30) == 3  # the replacing chain's last job: three replacements deep
    assert in_chain.get(timeout=30) == 2
    seen = calls(raw_redis)
    for call in ("nests alone 2 at 0", "nests alone 1 at 1", "nests alone 0 at 2", "nests alone -1 at 3",
                 "nests alone -2 at 3", "nests chain 1 at 0", "nests chain 0 at 1", "nests chain -1 at 2",
                 "nests chain -2 at 2"):
        assert seen.count(call) == 1, (call, seen)
