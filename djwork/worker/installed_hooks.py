"""The hooks of a job's run, in the chain's order (docs/hooks.md): one line per feature.

The order is the contract: ``admit`` runs top to bottom (lock ties first, so
a dropped job still releases them with its ack); the first wrapping hook is
the outermost ``around`` (a batch's context, then the time limits' watch,
then the limiter's wait, then the user's middleware); ``before`` runs top
to bottom just before the body (Celery's ``task_prerun``/``before_start``,
then STARTED, then a Django task's RUNNING); ``after`` top to bottom, before
the settlement is written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from djwork import signals
from djwork.batches.run_hook import BatchRun
from djwork.canvas.replace_run import ReplacedRuns
from djwork.iterable.run_hook import IterableRun
from djwork.jobs.task_events import CeleryEvents, TaskReceived
from djwork.middleware import resolve_all
from djwork.periodic.run_hook import PeriodicLockRetake
from djwork.worker.expiry import Expiry
from djwork.worker.history import RunHistory
from djwork.worker.job_start import TrackStarted
from djwork.worker.limits import LimiterAdmission
from djwork.worker.lock_ties import LockTies
from djwork.worker.metrics import ExecutionMetricsHook
from djwork.worker.mode import mode_for
from djwork.worker.outcome import ResultRecords
from djwork.worker.run_hooks import RunHook
from djwork.worker.server_middleware import ServerMiddleware
from djwork.worker.task_results import DjangoTaskResults
from djwork.worker.time_limits import TimeLimits
from djwork.worker.trace_log import TraceLog

if TYPE_CHECKING:
    from djwork.settings.conf import Config
    from djwork.worker.history import HistoryRecorder
    from djwork.worker.metrics import ExecutionMetrics
    from djwork.worker.process import RunState
    from djwork.worker.time_limits import TimeLimitWatchdog


def installed_hooks(config: Config, identity: str, history: HistoryRecorder, metrics: ExecutionMetrics | None,
                    watchdog: TimeLimitWatchdog | None, after_time_out: Callable[[], None] | None,
                    run_state: RunState, *, embedded: bool = False) -> list[RunHook]:
    """Every hook a worker process's runs may see; a hook whose feature is off is left out here."""
    middleware = resolve_all(config.server_middleware)
    hooks: list[Any] = [
        LockTies(config),
        # Only with a receiver when the worker boots (its apps' modules are imported by then): a plain job's
        # run then meets no admission hook. Always in an embedded worker: its host connects receivers whenever
        # it likes (a test, as Celery's test worker is a thread of the test process), after the boot.
        TaskReceived(identity) if signals.task_received.receivers or embedded else None,
        # Celery's received record comes before its expiry and revoke checks too.
        TraceLog(config) if config.celery_trace_log else None,
        Expiry(config, identity),
        BatchRun(config),
        TimeLimits(config, watchdog, after_time_out) if watchdog is not None else None,
        LimiterAdmission(config, mode_for(config).reschedule),
        IterableRun(run_state),
        ServerMiddleware(middleware) if middleware else None,
        CeleryEvents(),
        TrackStarted(config, identity),
        DjangoTaskResults(identity),
        ResultRecords(config),
        ReplacedRuns(),
        PeriodicLockRetake(),
        RunHistory(history),
        ExecutionMetricsHook(metrics) if metrics is not None else None,
    ]
    return [hook for hook in hooks if hook is not None]
