"""Jobs and rate limiters: run a job within its limits, and send a job a limiter refused back to wait.

A refusal (``limiter.OverLimit``, from a job-level limit or escaping the
body) is admission control, not a failure: the job goes to `schedule` at the
time the limiter computed (``retry_after``), its ``retry_count`` untouched
and ``overrated`` counted on the payload. Linear backoff instead first
stampedes (every refused job back at once) then idles (a fixed delay far past
the moment the limit frees). After ``LIMITER_MAX_RESCHEDULES`` (or the
limiter's ``reschedule=``) the job takes the normal retry path, so a job that
can never get its limit still ends somewhere visible; ``retry=False`` jobs
are rescheduled only while under that cap.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from djwork import redis as redis_layer
from djwork.dead import ScriptCall
from djwork.limiter import OverLimit, record_rescheduled
from djwork.payload import dumps
from djwork.redis import keys
from djwork.redis.key_repair import quarantine_culprits
from djwork.redis.key_types import WrongTypeKey
from djwork.settings.conf import Config
from djwork.worker.run_hooks import RESCHEDULED, JobRun, RunHook

logger = logging.getLogger("djwork.worker")

# Refused jobs computed the same retry_after at nearly the same moment: a little
# spread keeps them from all arriving in the same poll and refusing each other again.
JITTER_SHARE = 0.1
JITTER_MAX = 1.0


_current = threading.local()


def current_holdings() -> tuple[Any, ...]:
    """The admissions the running job holds from its ``limits=`` (in order), on its processor thread.

    For a body that must report what it spent (``points_used``) or know when
    it was admitted (``acquired_at``, Redis time); empty outside a limited job.
    """
    return getattr(_current, "holdings", ())


def run_within(limits: Sequence[Any], jid: str, execute: Callable[[], Any]) -> Any:
    """Acquire ``limits`` in order (each waits up to its ``wait_timeout``), run, release in reverse."""
    holdings: list[Any] = []
    try:
        for limit in limits:
            holdings.append(_acquire(limit, jid))
        _current.holdings = tuple(holdings)
        return execute()
    finally:
        _current.holdings = ()
        for holding in reversed(holdings):
            try:
                holding.release()
            except Exception:
                # The job's own outcome must not be replaced by this; a slot left held is
                # freed by its lock_timeout, or by the reaper once this process is gone.
                logger.exception("djwork: releasing limiter %s after job %s failed", holding.limiter.name, jid)


def _acquire(limit: Any, jid: str) -> Any:
    """``limit.acquire``; a limiter key of the wrong type is moved aside (logged at ERROR) and asked once more.

    Without it a ``SET djwork:limiter:<name> x`` failed every job using the
    limiter until someone deleted the key.
    """
    try:
        return limit.acquire(jid=jid)
    except WrongTypeKey as error:
        state_type = getattr(limit, "state_type", None)
        own = {keys.limiter_state(limit.name): state_type} if state_type else {}
        if not quarantine_culprits(error, own):
            raise
        return limit.acquire(jid=jid)


def reschedule_cap(error: OverLimit, limits: Sequence[Any], config: Config) -> int:
    for limit in limits:
        if limit.name == error.name and limit.reschedule is not None:
            return int(limit.reschedule)
    return config.limiter_max_reschedules


def rescheduled_payload(payload: dict[str, Any], error: OverLimit, cap: int,
                        now: float | None = None) -> tuple[dict[str, Any], float] | None:
    """The payload to put back in `schedule` and its score, or None once ``cap`` reschedules are spent."""
    overrated = payload.get("overrated")
    count = overrated if isinstance(overrated, int) and not isinstance(overrated, bool) and overrated > 0 else 0
    if count >= cap:
        return None
    now = time.time() if now is None else now
    delay = error.retry_after + random.uniform(0.0, min(JITTER_MAX, error.retry_after * JITTER_SHARE))
    return {**payload, "overrated": count + 1}, now + delay


def reschedule_call(source_key: str, raw: str | bytes, payload: dict[str, Any], score: float, jid: str,
                    from_in_progress: bool) -> ScriptCall:
    """fail.lua filing into `schedule` instead of `retry`: added there before it leaves its list."""
    return ScriptCall("fail", [source_key, keys.SCHEDULE, keys.DEAD, keys.ORPHAN_COUNTS],
                      [raw, dumps(payload), repr(float(score)), "0", "0", "0", "1" if from_in_progress else "0", jid])


def count_rescheduled(name: str) -> None:
    try:
        record_rescheduled(name)
    except Exception as error:  # a statistic: never worth failing the reschedule over
        logger.warning("djwork: could not count a reschedule of limiter %s: %s", name, error)


class LimiterAdmission(RunHook):
    """A job's ``limits=`` around its body (outside the server middleware: a wait for a slot must not sit
    inside a transaction or a span a middleware opened), and a refusal sent back to wait, for every job
    (a limiter used inside the body refuses too)."""

    def __init__(self, config: Config, reschedule: Callable[..., Any] = reschedule_call) -> None:
        self.config = config
        # reschedule_call's one step, or a cluster's two (djwork/worker/mode.py, chosen once)
        self.reschedule = reschedule

    def wraps(self, target: Any) -> bool:
        return bool(getattr(target, "limits", ()))

    def around(self, run: JobRun, call_next: Callable[[], Any]) -> Any:
        return run_within(run.target.limits, run.jid, call_next)

    def take_failure(self, run: JobRun, error: BaseException) -> bool:
        """Back to `schedule` at the limiter's retry_after; False once the cap is spent (the retry path)."""
        if not isinstance(error, OverLimit):
            return False
        payload, jid, unit = run.payload, run.jid, run.unit
        cap = reschedule_cap(error, getattr(run.target, "limits", ()), self.config)
        decided = rescheduled_payload(payload, error, cap)
        if decided is None:
            logger.warning("djwork: job %s was refused by limiter %s %d times; taking the retry path", jid,
                           error.name, cap)
            return False
        new_payload, score = decided
        run.status, run.error_class, run.error_message = RESCHEDULED, "djwork.limiter.OverLimit", str(error)
        if self.config.log_jobs:
            logger.info("rescheduled jid=%s class=%s limiter=%s in=%.3fs overrated=%d", jid, run.class_name,
                        error.name, score - time.time(), new_payload["overrated"],
                        extra={"jid": jid, "job_class": run.class_name, "queue": unit.queue,
                               "event": "rescheduled"})
        if run.acks.abandoned:
            return True  # pushed back at the shutdown deadline already
        call = self.reschedule(unit.in_progress_key or keys.queue(unit.queue), unit.raw, new_payload, score, jid,
                               bool(unit.in_progress_key))
        redis_layer.run(call.evaluate, idempotent=True)
        count_rescheduled(error.name)
        return True
