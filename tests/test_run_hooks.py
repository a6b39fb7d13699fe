"""Which hooks join a job's run (djwork/worker/run_hooks.py, docs/hooks.md): decided per class, not per job.

A job that uses no feature meets only the hooks that join every run; a keyed
hook joins only a run whose payload carries its field; a hook sits in a
phase only if it overrides it. The worker-level behaviour of each hook is
covered by the feature's own worker tests.
"""

from __future__ import annotations

from typing import Any

from djwork.jobs.task_events import CeleryEvents
from djwork.settings.conf import get_config
from djwork.worker.history import HistoryRecorder, RunHistory
from djwork.worker.installed_hooks import installed_hooks
from djwork.worker.metrics import ExecutionMetrics
from djwork.worker.process import RunState
from djwork.worker.run_hooks import HookPlan, JobRun, RunHook
from djwork.worker.time_limits import TimeLimitWatchdog
from tests import worker_jobs


class Keyed(RunHook):
    def joins(self, target: Any, config: Any) -> tuple[str, ...]:
        return ("marker",)

    def after(self, run: JobRun, error: BaseException | None) -> None: ...


class Wrapping(RunHook):
    def __init__(self, wraps: bool) -> None:
        self.wrapping = wraps

    def wraps(self, target: Any) -> bool:
        return self.wrapping

    def around(self, run: JobRun, call_next: Any) -> Any:
        return call_next()


class Never(RunHook):
    def joins(self, target: Any, config: Any) -> bool:
        return False

    def before(self, run: JobRun) -> None: ...


def test_a_keyed_hook_joins_only_the_runs_whose_payload_carries_its_field():
    keyed = Keyed()
    plan = HookPlan([keyed, Never()], worker_jobs.record, get_config())
    plain = plan.phases({"class": "tests.worker_jobs.record", "args": [], "jid": "a"})
    assert plain is plan.plain and plain.after == () and plain.before == ()
    marked = plan.phases({"class": "tests.worker_jobs.record", "marker": 1})
    assert marked.after == (keyed,) and marked.admit == marked.around == marked.before == ()
    assert plan.phases({"marker": 2, "other": 3}) is marked  # worked out once per set of fields present


def test_a_hook_sits_only_in_the_phases_it_overrides():
    wrapping, not_wrapping = Wrapping(True), Wrapping(False)
    phases = HookPlan([wrapping, not_wrapping], worker_jobs.record, get_config()).plain
    assert phases.around == (wrapping,)  # wraps() False: the class's runs skip its around
    assert phases.admit == phases.before == phases.failure == phases.after == ()


def test_a_plain_jobs_run_meets_only_the_hooks_every_run_needs():
    config = get_config()
    hooks = installed_hooks(config, "host:1:abc", HistoryRecorder("host:1:abc", 100), ExecutionMetrics(),
                            TimeLimitWatchdog(), None, RunState())
    plan = HookPlan(hooks, worker_jobs.record, config)
    phases = plan.phases({"class": "tests.worker_jobs.record", "args": ["x"], "jid": "0" * 24, "queue": "default",
                          "retry": True, "created_at": 1.0, "enqueued_at": 1.0})
    assert phases is plan.plain
    assert phases.admit == phases.around == phases.failure[1:] == ()  # the limiter's refusals only
    assert [type(hook) for hook in phases.before] == [CeleryEvents]
    assert [type(hook) for hook in phases.after][:2] == [CeleryEvents, RunHistory]
    assert not phases.blocking  # a coroutine job that uses nothing settles on the loop
    # A batch job with a result meets the batch's and the result's hooks too.
    batched = plan.phases({"class": "tests.worker_jobs.record", "bid": "b1", "djwork_result": True})
    names = {type(hook).__name__ for hook in batched.admit + batched.around + batched.after}
    assert {"LockTies", "BatchRun", "ResultRecords"} <= names and batched.blocking
