"""``AsyncResult``: a job's outcome as Celery shows it, read from its result record (docs/celery.md).

    ref = add.delay(2, 2)
    ref.get(timeout=10)                   # 4
    djwork.AsyncResult(ref.id).state      # "SUCCESS"

A job stores its outcome only when results are on for it (``RESULTS``, default off, or
``ignore_result=False`` on the job or the call); the record lives ``RESULT_TTL`` seconds after
it is written. No record reads as PENDING, as in Celery (an unknown id is PENDING). A ``JobRef``
knows whether its job stores anything: asking one that stores nothing for its state or result
raises ``ResultsOff``, saying how to turn results on, instead of a PENDING that never ends.

``get()`` waits without hammering Redis: unless the record is ready at once, it registers the jid in
``djwork:result-waiters`` and reads the record in one MULTI, then blocks in
BLPOP on the job's notify list, which the Lua step that stores the result
pushes to when it finds the jid registered (it checks only while the HASH
exists: nothing per job when nobody waits). The BLPOP lasts at most
``interval`` seconds (and at most FETCH_TIMEOUT: it runs on the pool whose
reply timeout allows a blocking call that long, as the worker's takers do), so
a waiter whose wake-up another waiter took still re-reads the state that often
(two or three round trips per ``interval`` at most, none in between). On a Redis Cluster the waiter
and the notify list are one job's own, in its record's slot (``djwork:result-waiter:{djwork:result:<jid>}``,
docs/cluster.md), so the MULTI and the write that wakes it each stay in one slot.
"""

from __future__ import annotations

import builtins
import datetime as dt
import importlib
import time
from typing import Any

import orjson

from djwork import redis as redis_layer
from djwork.redis import key_layout, keys
from djwork.redis.cluster import is_cluster
from djwork.results import eager_records as eager_results
from djwork.results import record as record_fields
from djwork.settings.conf import get_config

WAITERS_TTL = 60  # seconds: renewed by every waiter on every look
PENDING = record_fields.PENDING
STARTED = record_fields.STARTED
RETRY = record_fields.RETRY
FAILURE = record_fields.FAILURE
SUCCESS = record_fields.SUCCESS
REVOKED = record_fields.REVOKED


class JobError(Exception):
    """A failed job's exception when its class can't be imported or built here: the original
    class name (``exc_type``), message and traceback text are kept."""

    def __init__(self, exc_type: str, message: str, traceback: str | None = None) -> None:
        super().__init__(f"{exc_type}: {message}")
        self.exc_type = exc_type
        self.message = message
        self.traceback = traceback


class JobRevoked(Exception):
    """``get()`` of a revoked job (Celery raises ``TaskRevokedError``)."""


class ResultNotStored(Exception):
    """The job succeeded but its return value could not be stored (not JSON, or over RESULT_MAX_BYTES)."""


class NoResult(LookupError):
    """The enqueue call wrote no job (client middleware stopped it): there is no result to wait for."""


class ResultTimeout(TimeoutError):
    """``get(timeout=...)`` ran out before the job was ready (Celery's ``TimeoutError``)."""


class ResultsOff(LookupError):
    """The job was enqueued with results off (``RESULTS`` False, or ``ignore_result=True``): it stores
    no outcome, so there is no state or result to read (Celery raises for a task with no result backend)."""


HOW_TO_TURN_RESULTS_ON = ("set DJWORK['RESULTS'] = True (Celery's CELERY_RESULT_BACKEND), or ask per job with "
                          "@djwork.job(ignore_result=False), or per call with job.set(ignore_result=False) or "
                          "apply_async(..., ignore_result=False); docs/celery.md, Results")


for _error in (JobError, JobRevoked, ResultNotStored, NoResult, ResultTimeout, ResultsOff):
    _error.__module__ = "djwork"  # the name a record stores and the dashboard shows: djwork.ResultNotStored

_DJWORK_ERRORS = {"djwork.JobRevoked": JobRevoked, "djwork.ResultNotStored": ResultNotStored}


def _read(jid: str) -> dict[str, str]:
    kept = eager_results.record(jid)  # run at its push (ALWAYS_EAGER, inline()): no Redis to read
    if kept is not None:
        return kept
    fields = redis_layer.run(lambda conn: conn.hgetall(keys.result(jid)), idempotent=True)
    return record_fields.decode(fields)


def _exception_class(name: str) -> type[BaseException] | None:
    if name in _DJWORK_ERRORS:
        return _DJWORK_ERRORS[name]
    module_name, _, qualname = name.rpartition(".")
    try:
        target: Any = importlib.import_module(module_name) if module_name else builtins
        for part in qualname.split("."):
            target = getattr(target, part)
    except Exception:  # not importable here: the caller falls back to JobError
        return None
    return target if isinstance(target, type) and issubclass(target, BaseException) else None


def exception_from(record: dict[str, str]) -> BaseException:
    """The job's exception, rebuilt as its own class where importable and constructible, else a JobError."""
    try:
        error = orjson.loads(record.get("result") or "{}")
    except orjson.JSONDecodeError:
        error = {}
    if not isinstance(error, dict):
        error = {}
    name = str(error.get("exc_type") or "Exception")
    message = str(error.get("exc_message") or "")
    trace = record.get("traceback") or None
    kind = _exception_class(name)
    if kind is not None:
        args = error.get("exc_args")
        for attempt in ((args if isinstance(args, list) else None), [message]):
            if attempt is None:
                continue
            try:
                rebuilt = kind(*attempt)
            except Exception:
                continue
            rebuilt.__notes__ = [f"raised by the job; its traceback:\n{trace}"] if trace else []
            return rebuilt
    return JobError(name, message, trace)


class ResultMethods:
    """Celery's AsyncResult verbs over ``self.id``; shared by ``AsyncResult`` and ``JobRef``."""

    id: str | None

    @property
    def task_id(self) -> str | None:
        """Celery's other name for ``id`` (``result.task_id``)."""
        return self.id

    def _jid(self) -> str:
        if not self.id:
            raise NoResult("this call enqueued no job (client middleware stopped the push): it has no result")
        return self.id

    def _stored_jid(self) -> str:
        """The jid, once it is sure the job stores a result: a job enqueued with results off never
        gets a record, and reading it would show PENDING for ever."""
        jid = self._jid()
        if getattr(self, "ignored", False) and eager_results.record(jid) is None:
            raise ResultsOff(f"job {jid} was enqueued with results off, so it stores no state or result: "
                             f"{HOW_TO_TURN_RESULTS_ON}")
        return jid

    def _record(self) -> dict[str, str]:
        if getattr(self, "ignore_result", False) and eager_results.record(self._jid()) is None:
            return {}  # asked for no result: PENDING, None, as Celery's ignored AsyncResult reads
        return _read(self._stored_jid())

    @property
    def state(self) -> str:
        return record_fields.state_of(self._record())

    @property
    def status(self) -> str:
        return self.state

    def ready(self) -> bool:
        return self.state in record_fields.READY_STATES

    def successful(self) -> bool:
        return self.state == SUCCESS

    def failed(self) -> bool:
        return self.state == FAILURE

    @property
    def result(self) -> Any:
        """The return value (SUCCESS), the exception (FAILURE, RETRY, REVOKED), the worker's pid and
        hostname (STARTED, with track_started), else None."""
        return _value(self._record(), propagate=False)

    @property
    def info(self) -> Any:
        return self.result

    @property
    def traceback(self) -> str | None:
        record = self._record()
        if record_fields.state_of(record) in (FAILURE, RETRY):
            return record.get("traceback") or None
        return None

    @property
    def date_done(self) -> dt.datetime | None:
        done = self._record().get("date_done")
        if not done:
            return None
        return dt.datetime.fromtimestamp(float(done), tz=dt.UTC)

    def get(self, timeout: float | None = None, propagate: bool = True, interval: float = 0.5) -> Any:
        """Wait until the job is ready, then its return value; a failure re-raises the job's exception
        (``propagate=False`` returns it instead). ResultTimeout after ``timeout`` seconds.
        ResultsOff at once for a call sent with results off by ``RESULTS``; None at once for one that asked
        for no result (``ignore_result=True``), as Celery's ``get()`` of an ignored result."""
        if getattr(self, "ignore_result", False) and eager_results.record(self._jid()) is None:
            return None
        jid = self._stored_jid()
        deadline = None if timeout is None else time.monotonic() + timeout
        layout = key_layout.layout(is_cluster(get_config()))
        result_key, notify_key, waiters_key = keys.result(jid), layout.result_notify(jid), layout.result_waiters(jid)
        interval = max(0.01, float(interval))
        while True:
            # A plain read first: a ready result (the common case after a wake-up) leaves no registration.
            record = _read(jid)
            if record_fields.state_of(record) not in record_fields.READY_STATES:
                record = _register_and_read(jid, result_key, notify_key, waiters_key)
            if record_fields.state_of(record) in record_fields.READY_STATES:
                return _value(record, propagate)
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise ResultTimeout(f"job {jid} was not ready within {timeout} s")
            wait = min(interval, get_config().fetch_timeout, remaining if remaining is not None else interval)
            redis_layer.run(lambda conn, wait=wait: conn.blpop([notify_key], timeout=wait), idempotent=True,
                            purpose="fetch")

    wait = get

    def forget(self) -> None:
        """Delete the result record (the job itself is not touched)."""
        jid = self._jid()
        eager_results.forget(jid)
        notify_key = key_layout.layout(is_cluster(get_config())).result_notify(jid)
        redis_layer.run(lambda conn: conn.delete(keys.result(jid), notify_key), idempotent=True)

    def revoke(self, terminate: bool = False, signal: Any = None) -> bool:
        """``djwork.revoke(self.id)``: True when the job was found and removed before it ran."""
        from djwork.results.revoke import revoke

        return revoke(self._jid(), terminate=terminate, signal=signal)

    def as_tuple(self) -> tuple[Any, Any]:
        """Celery's serialised form of a result, ``((id, parent's form), None)``: how a job that returns a
        result (a ref, a chain's) has it stored (djwork/results/record.py)."""
        parent = getattr(self, "parent", None)
        return (self.id, parent.as_tuple() if parent is not None else None), None


def _register_and_read(jid: str, result_key: str, notify_key: str, waiters_key: str) -> dict[str, str]:
    """Register as a waiter and read the record, in one MULTI: a result stored after this finds us and wakes us."""
    def run(conn: Any) -> Any:
        pipe = conn.pipeline(transaction=True)
        pipe.hset(waiters_key, jid, notify_key)  # the writer pushes the list named here
        pipe.expire(waiters_key, WAITERS_TTL)  # a waiter gone away leaves nothing for long
        pipe.hgetall(result_key)
        return pipe.execute()[-1]

    return record_fields.decode(redis_layer.run(run, idempotent=True))


def _value(record: dict[str, str], propagate: bool) -> Any:
    state = record_fields.state_of(record)
    if state == SUCCESS:
        if "result" not in record and "return_value" in record:  # a Django Tasks record
            return orjson.loads(record["return_value"])
        return orjson.loads(record.get("result") or "null")
    if state in (FAILURE, RETRY, REVOKED):
        error = exception_from(record) if "result" in record else JobError(state, "the job failed")
        if propagate and state != RETRY:
            raise error
        return error
    if state == STARTED and "result" in record:  # track_started: Celery's meta, {"pid": ..., "hostname": ...}
        try:
            return orjson.loads(record["result"])
        except orjson.JSONDecodeError:
            return None
    return None


class AsyncResult(ResultMethods):
    """``djwork.AsyncResult(id)``: look up a job's outcome by its id."""

    def __init__(self, id: str, root_id: str | None = None, parent_id: str | None = None) -> None:
        self.id = id
        # Celery's lineage of a canvas's task, where whoever builds the result knows it (a group's members);
        # None from a bare id: the record does not keep them (the running job's self.request has both).
        self.root_id = root_id
        self.parent_id = parent_id

    def __repr__(self) -> str:
        return f"<AsyncResult: {self.id}>"

    def __eq__(self, other: object) -> bool:
        # Celery's: a result equals its id too (``parent_id in group_result.results``).
        return (isinstance(other, ResultMethods) and other.id == self.id) or (isinstance(other, str)
                                                                                and other == self.id)

    def __hash__(self) -> int:
        return hash(self.id)
