"""A job's result record: the Celery-style fields of ``djwork:result:<id>``, written and read.

One HASH per job holds both the Django Tasks record (djwork/tasks_backend.py:
``status``, ``return_value``, ``errors``...) and, for djwork jobs, Celery's:

    state      PENDING (no record) | STARTED | RETRY | FAILURE | SUCCESS | REVOKED
    result     JSON: the return value (SUCCESS), or {"exc_type", "exc_message", "exc_args"}
    traceback  text (RETRY, FAILURE)
    date_done  epoch seconds (Redis's clock) of the write

The worker never writes the HASH itself: it hands a *spec* (one string) to the
Lua step that ends the job (fetch.lua's ack, fail.lua), which writes it
(lua/result_lib.lua), so a stored result costs no round trip of its own.
Whether a job stores anything is decided at enqueue: the payload carries
``"djwork_result": true`` (RESULTS, ``ignore_result=``; docs/celery.md).
"""

from __future__ import annotations

from typing import Any

import orjson

from djwork.settings.conf import Config

PAYLOAD_FIELD = "djwork_result"  # true: the job stores its outcome; Sidekiq ignores the field

PENDING = "PENDING"
STARTED = "STARTED"
RETRY = "RETRY"
FAILURE = "FAILURE"
SUCCESS = "SUCCESS"
REVOKED = "REVOKED"
READY_STATES = frozenset({SUCCESS, FAILURE, REVOKED})

# The Django Tasks backend's statuses, read as Celery's states (one store for both).
TASK_STATUS_STATES = {"READY": PENDING, "RUNNING": STARTED, "SUCCESSFUL": SUCCESS, "FAILED": FAILURE}

NOT_STORED_CLASS = "djwork.ResultNotStored"
REVOKED_CLASS = "djwork.JobRevoked"
TRACEBACK_LIMIT = 10_000  # characters kept, from the end (where the raising line is)


def wants_result(payload: dict[str, Any]) -> bool:
    return payload.get(PAYLOAD_FIELD) is True


def spec(state: str, value_json: str, ttl: int, trace: str = "") -> str:
    """The string lua/result_lib.lua writes: ttl, state, date_done, JSON result, traceback (last: may hold newlines).

    date_done is left empty: the script writes Redis's clock (one TIME per call, not per job).
    """
    return f"{int(ttl)}\n{state}\n\n{value_json}\n{trace}"


def error_json(class_name: str, message: str, args: Any = None) -> str:
    record: dict[str, Any] = {"exc_type": class_name, "exc_message": message}
    if args is not None:
        record["exc_args"] = args
    return orjson.dumps(record).decode()


def encode_other(value: Any) -> Any:
    """``orjson``'s ``default``: a return value it can't encode that is a result (a job's ref, a chain's, a
    group's) is stored in Celery's form, ``as_tuple()``, as Celery's JSON encoder does; anything else is refused."""
    as_tuple = getattr(value, "as_tuple", None)
    if callable(as_tuple):
        return as_tuple()
    raise TypeError(f"Type is not JSON serializable: {type(value).__qualname__}")


def to_json(value: Any) -> str:
    """The JSON of a return value (TypeError when it has none): what a record and a batch keep of it."""
    return orjson.dumps(value, default=encode_other).decode()


def success_spec(value: Any, config: Config) -> str:
    """SUCCESS with the JSON return value; a value JSON can't carry, or too large, as a clear failure record."""
    if value is None:  # most jobs return nothing: no JSON encoding per job, and the same string each time
        return _NONE_SPECS.get(config.result_ttl) or _none_spec(config.result_ttl)
    try:
        text = to_json(value)
    except TypeError as error:  # orjson.JSONEncodeError is a TypeError
        return spec(FAILURE, error_json(NOT_STORED_CLASS, f"the return value ({type(value).__qualname__}) is not "
                                        f"JSON-serialisable: {error}"), config.result_ttl)
    if len(text) > config.result_max_bytes:
        return spec(FAILURE, error_json(NOT_STORED_CLASS, f"the return value is {len(text)} bytes of JSON, over "
                                        f"RESULT_MAX_BYTES ({config.result_max_bytes})"), config.result_ttl)
    return f"{config.result_ttl}\nSUCCESS\n\n{text}\n"  # spec(), inlined: this runs once per job


_NONE_SPECS: dict[int, str] = {}  # RESULT_TTL -> its spec of a None result (a setting: a handful at most)


def _none_spec(ttl: int) -> str:
    spec_text = _NONE_SPECS.get(ttl)
    if spec_text is None:
        spec_text = _NONE_SPECS[ttl] = f"{int(ttl)}\nSUCCESS\n\nnull\n"
    return spec_text


def revoked_spec(reason: str, config: Config) -> str:
    return spec(REVOKED, error_json(REVOKED_CLASS, reason), config.result_ttl)


def decode(fields: dict[bytes, bytes] | dict[str, str]) -> dict[str, str]:
    return {(k.decode() if isinstance(k, bytes) else k): (v.decode("utf-8", "replace") if isinstance(v, bytes) else v)
            for k, v in fields.items()}


def state_of(record: dict[str, str]) -> str:
    """The Celery state of a record: its own ``state``, or the Django Tasks status read as one."""
    if not record:
        return PENDING
    state = record.get("state")
    if state:
        return state
    return TASK_STATUS_STATES.get(record.get("status", ""), PENDING)
