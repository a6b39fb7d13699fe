"""Benchmark job bodies for djwork: the comparison table's own (bench/others/counter.py), as djwork jobs."""

import djwork
from bench.others import counter


@djwork.job(queue="bench")
def incr():
    counter.incr()


@djwork.job(queue="bench")
def probe(sent_at):
    """Records pickup latency: start of the job minus the moment it was pushed."""
    counter.probe(sent_at)


_nearly_noop_runs = [0]


@djwork.job(queue="bench")
def nearly_noop():
    """djwork's own cost per job: no Redis call but one INCRBY per 100 runs (how the drain sees progress)."""
    _nearly_noop_runs[0] += 1
    if _nearly_noop_runs[0] % 100 == 0:
        counter.client().incrby(counter.COUNTER, 100)
