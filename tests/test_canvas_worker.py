"""The canvas against real workers: chords, chains, groups, map/starmap/chunks and links, one pool for all.

Every job writes its call to Redis (tests/canvas_jobs.py), so values passing from step to step are
seen there, not only in what ``.get()`` returns.
"""

from __future__ import annotations

import json
import signal

import pytest

import djwork
from tests import canvas_jobs as cj
from tests.helpers_worker import wait_until
from tests.support.orphans import logged_identity, recovered_line, wait_orphaned


def calls(raw_redis) -> list[str]:
    return [raw.decode() for raw in raw_redis.lrange(cj.CALLS, 0, -1)]


def errors(raw_redis) -> list[dict]:
    return [json.loads(raw) for raw in raw_redis.lrange(cj.ERRORS, 0, -1)]


def test_chord_chain_group_maps_and_links(workers, raw_redis):
    # Everything is sent before the workers start, so all of it runs side by side in one pool.
    big = djwork.chord([cj.add.s(i, i) for i in range(100)])(cj.tsum.s())
    three = djwork.chain(cj.add.s(1, 2), cj.add.s(10), cj.mul.s(3)).apply_async()
    piped = (cj.add.s(1000, 1) | cj.add.si(500, 500) | cj.record.s("piped")).delay()
    broken = djwork.chord([cj.add.s(7, 7), cj.dies.s("header")])(
        cj.tsum.s().on_error(cj.errback.s(tag="chord")))
    # Later members finish first: the results still come back in the order they were added.
    ordered = djwork.group(cj.add.s(i, 100, hold=0.05 * (5 - i)) for i in range(6)).delay()
    maps = djwork.group([cj.double.map([1, 2, 3]), cj.add.starmap([(5, 6), (7, 8)])]).delay()
    chunked = cj.add.chunks(zip(range(10), range(10), strict=True), 3).delay()
    cj.add.apply_async((2, 3), link=cj.record.s("linked"))
    cj.dies.apply_async(("single",), link=cj.record.s("never"), link_error=cj.errback.s(tag="single"))
    stopped = djwork.chain(cj.add.s(4, 4), cj.dies.s(), cj.record.s("after-death")).on_error(
        cj.errback.s(tag="chain")).delay()

    workers.start("-c", "10", overrides={"LOG_JOBS": False})

    assert big.get(timeout=30) == 9_900
    assert three.get(timeout=30) == 39
    assert piped.get(timeout=30) == 1000
    assert ordered.get(timeout=30) == [100, 101, 102, 103, 104, 105]
    assert maps.get(timeout=30) == [[2, 4, 6], [11, 15]]
    assert chunked.get(timeout=30) == [[0, 2, 4], [6, 8, 10], [12, 14, 16], [18]]
    with pytest.raises(RuntimeError, match="canvas member header always fails"):  # its own exception
        broken.get(timeout=30)
    with pytest.raises(RuntimeError, match="canvas member 8 always fails"):
        stopped.get(timeout=30)
    wait_until(lambda: len(errors(raw_redis)) >= 3 and "linked 5" in calls(raw_redis), 30,
               "the errbacks and the link")

    seen = calls(raw_redis)
    # The chain's values, step to step, each step once.
    assert [seen.count(call) for call in ("add 1 2", "add 3 10", "mul 13 3")] == [1, 1, 1]
    assert seen.index("add 1 2") < seen.index("add 3 10") < seen.index("mul 13 3")
    assert seen.count("tsum 100") == 1
    # An immutable step ignores the result before it; the one after gets its own.
    assert seen.count("add 1000 1") == 1 and seen.count("add 500 500") == 1 and seen.count("piped 1000") == 1
    # A header member died: the body never ran, its errback ran once, as Celery calls a chord body's errbacks:
    # a request naming the body, a ChordError naming the failed header task.
    assert seen.count("tsum 2") == 0
    by_tag = {error["tag"]: error for error in errors(raw_redis)}
    assert sorted(error["tag"] for error in errors(raw_redis)) == ["chain", "chord", "single"]
    assert (by_tag["chord"]["exc"], by_tag["chord"]["task_id"]) == ("ChordError", broken.id)
    assert by_tag["single"]["task_id"] != by_tag["chain"]["task_id"]
    # link= ran with the return value; a job that died ran its link_error, not its link.
    assert seen.count("linked 5") == 1 and not any(call.startswith("never") for call in seen)
    # A chain stops at the step that died.
    assert seen.count("dies 8") == 1 and not any(call.startswith("after-death") for call in seen)


def test_a_kill_between_a_steps_end_and_its_ack_still_pushes_the_next_step_once(workers, raw_redis):
    chained = djwork.chain(cj.kills_once.s(1, "chain"), cj.add.s(10)).delay()
    victim = workers.start("-c", "2", overrides={"LOG_JOBS": False}, label="victim")
    assert victim.wait_exit(30) == -signal.SIGKILL
    assert calls(raw_redis) == ["kills_once 1"]
    # Each rescuer starts once the dead one's jobs are orphans (on Redis's clock), and each step (its boot,
    # the recovery, the result) waits for its own event: under load a rescuer's boot alone used up the one
    # 30 s deadline that covered boot, orphan threshold, recovery and both steps, and the test failed.
    rescuer = _rescue(workers, raw_redis, victim, "rescuer")
    assert chained.get(timeout=30) == 12
    # A header member kills the rescuer in turn (only once the chain is done: nothing else runs then).
    chorded = djwork.chord([cj.add.s(3000, 1), cj.kills_once.s(5, "chord")])(cj.tsum.s())
    assert rescuer.wait_exit(30) == -signal.SIGKILL
    _rescue(workers, raw_redis, rescuer, "second-rescuer")
    assert chorded.get(timeout=30) == 3007
    seen = calls(raw_redis)
    assert seen.count("kills_once 1") == 2 and seen.count("kills_once 5") == 2  # each ran again
    assert seen.count("add 2 10") == 1 and seen.count("tsum 2") == 1  # and what followed ran once


def _rescue(workers, raw_redis, dead, label):
    """A worker started once ``dead``'s jobs are orphans, returned once its reaper has requeued them."""
    identity = logged_identity(dead)
    wait_orphaned(raw_redis, identity)
    rescuer = workers.start("-c", "2", overrides={"LOG_JOBS": False}, label=label)
    rescuer.wait_log(" starting: identity=", 30)  # its boot (Django, imports): the slowest step under load
    rescuer.wait_log(recovered_line(identity), 30)  # its first reaper pass, at boot: the jobs are orphans by now
    return rescuer
