"""The chaos suite: each scenario of tests/chaos/scenarios.py at a small size, and what it must come to.

Run alone with ``pytest -m chaos`` (or ``./dev chaos``); ``bench/chaos.py``
runs the same scenarios larger and prints the table docs/reliability.md
publishes. Counts come from the jobs' own ledger (tests/chaos/jobs.py): a
job is lost if it never finished and is not where it belongs, and every job
that ran twice must be one the guarantee allows to (docs/reliability.md).
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.chaos import scenarios
from tests.chaos.ledger import Outcome

pytestmark = pytest.mark.chaos

CONCURRENCY = 5


@pytest.fixture
def chaos(workers, redis_url, tmp_path):
    """Workers on the suite's private Redis (emptied by ``workers``), which also holds the ledger."""
    return scenarios.Chaos(workers, redis_url, tmp_path)


def _nothing_lost(result: Outcome) -> None:
    print(result.report())
    assert result.drained_in_time, result.report()
    assert not result.lost, result.report()
    assert not result.unexpected_dead, result.report()


def _ran_in(result: Outcome, pids: set[int], *, finished: bool = False) -> set[str]:
    return {run.jid for run in result.ledger.runs
            if run.pid in pids and (run.finished is not None or not finished)}


def _assert_only_killed_processes_ran_jobs_twice(result: Outcome) -> None:
    """A kill runs again exactly the jobs it caught mid-run, plus jobs that had finished in the killed
    process but whose ack was still buffered there (at most one per slot and kill); nothing else."""
    killed = set().union(*(fault.pids or set() for fault in result.faults))
    assert result.caught, result.report()  # the kills landed mid-run
    for jid in result.caught:
        assert result.ledger.started[jid] >= 2 and result.ledger.finished[jid] >= 1, result.report()
    assert set(result.started_twice) <= _ran_in(result, killed), result.report()
    assert set(result.finished_twice) <= _ran_in(result, killed, finished=True), result.report()
    assert len(result.finished_twice) <= CONCURRENCY * len(result.faults), result.report()


def test_kill_minus_nine_of_a_worker_under_load(chaos):
    result = scenarios.kill_worker(chaos, concurrency=CONCURRENCY)
    _nothing_lost(result)
    _assert_only_killed_processes_ran_jobs_twice(result)
    # One kill, one survivor: every caught job ran exactly once more, to the end.
    for jid in result.caught:
        assert (result.ledger.started[jid], result.ledger.finished[jid]) == (2, 1), result.report()
    assert set(result.started_twice) == result.caught | set(result.finished_twice), result.report()
    assert result.facts["survivor recovered"], result.report()


def test_five_kills_in_a_row_of_a_swarm_child(chaos):
    result = scenarios.kill_swarm_children(chaos, kills=5, concurrency=CONCURRENCY)
    _nothing_lost(result)
    assert len(result.faults) == 5
    _assert_only_killed_processes_ran_jobs_twice(result)
    assert result.facts["child deaths by signal 9 in the swarm log"] == 5, result.report()


def test_redis_restart_mid_drain(chaos):
    result = scenarios.redis_restart(chaos, concurrency=CONCURRENCY)
    _nothing_lost(result)
    # No process died and none stalled past ORPHAN_THRESHOLD: nothing may run twice.
    assert result.finished_twice == [] and result.started_twice == [], result.report()
    assert result.resumed is not None, result.report()
    assert result.facts["workers that logged 'reachable again'"] == result.facts["workers"], result.report()


def test_every_connection_killed_every_200_ms(chaos):
    result = scenarios.connection_kills(chaos, concurrency=CONCURRENCY, period=0.2, duration=3.0)
    _nothing_lost(result)
    assert result.facts["connections cut"] >= result.facts["rounds"], result.report()
    # A lost reply is reconciled from the worker's own memory: no job runs twice.
    assert result.finished_twice == [] and result.started_twice == [], result.report()


@pytest.mark.parametrize("processes", [2, 1], ids=["swarm", "one-worker-at-a-time"])
def test_poison_pill_among_bystanders(chaos, processes):
    # Needs orphan recovery to isolate jobs recovered more than once (one per process at a time);
    # without that, bystanders recovered together with the pill run beside it again and die with it.
    # On the swarm that happens only when the recovered jobs land in one child again (often, not always);
    # with one worker at a time they always do.
    result = scenarios.poison_pill(chaos, bystanders=30 if processes > 1 else 10, concurrency=CONCURRENCY,
                                   processes=processes)
    _nothing_lost(result)  # every bystander ran to the end, and none is in dead
    ((pill, place),) = result.dead.items()
    assert place.startswith("dead (djwork.PoisonPill"), result.report()
    assert result.ledger.finished.get(pill) is None
    # The pill crashed its process MAX_ORPHANINGS + 1 times (default 3), catching bystanders.
    crashed = set().union(*(fault.pids or set() for fault in result.faults))
    assert len(crashed) == 4 and result.caught, result.report()
    assert result.facts["processes that exited with code 1"] == 4, result.report()
    # Once recovered twice a job is isolated: it never again shares a process with the (isolated) pill,
    # so no bystander is caught by more than two of its crashes.
    caught = Counter(run.jid for run in result.ledger.runs
                     if run.pid in crashed and run.finished is None and run.jid != pill)
    assert max(caught.values()) <= 2, (caught, result.report())


def test_term_with_jobs_longer_than_the_shutdown_timeout(chaos):
    result = scenarios.term_with_long_jobs(chaos, stuck=2, late=2)
    _nothing_lost(result)
    assert result.facts["stopping worker exit code"] == 0, result.report()
    # The jobs still running at the deadline were pushed back and run again by the next worker...
    assert result.facts["long jobs"] <= result.caught, result.report()
    for jid in result.facts["long jobs"]:
        assert (result.ledger.started[jid], result.ledger.finished[jid]) == (2, 1), result.report()
    # ...and a job that finished after the deadline had pushed it back does not run again.
    assert result.finished_twice == [], result.report()
