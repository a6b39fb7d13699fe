"""Job payloads in Sidekiq 7's JSON format (docs/wire.md, Jobs).

Timestamps are float epoch seconds (``time.time()``), which every reader from
Sidekiq 6.4 to 8.x understands; keyword arguments travel in ``kwargs``, a
field Sidekiq ignores. Arguments must be JSON-native so a job means the same
thing to the Ruby side and after a round trip through Redis: anything else is
refused at enqueue, naming the argument and its type.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence
from typing import Any

import orjson


class ArgumentError(TypeError):
    """A job argument that can't travel as Sidekiq JSON."""


class PayloadError(ValueError):
    """A payload read from Redis that is not a usable job (bad JSON, missing fields)."""


def new_jid() -> str:
    """24 lowercase hex characters, as Sidekiq's ``SecureRandom.hex(12)``."""
    return os.urandom(12).hex()


def check_json_native(value: Any, path: str) -> None:
    """Raise ArgumentError naming ``path`` if ``value`` is not plain JSON data."""
    if isinstance(value, str) or value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if not -(2**63) <= value < 2**64:
            raise ArgumentError(f"{path} is an int too large for JSON readers (got {value})")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ArgumentError(f"{path} is a float {value!r}, which JSON can't represent")
        return
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        for index, item in enumerate(value):
            check_json_native(item, f"{path}[{index}]")
        return
    if type(value) is dict:
        for key, item in value.items():
            if not isinstance(key, str):
                raise ArgumentError(
                    f"{path} has a key {key!r} of type {type(key).__name__}; JSON object keys must be str"
                )
            check_json_native(item, f"{path}[{key!r}]")
        return
    raise ArgumentError(
        f"{path} is a {type(value).__module__}.{type(value).__qualname__}, which is not JSON-native; "
        "pass str, int, float, bool, None, list or dict (e.g. an id or an ISO date string)"
    )


def is_json_native(value: Any) -> bool:
    """``check_json_native`` as a predicate, without building error paths: the enqueue fast path."""
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return True
    if kind is int:
        return -(2**63) <= value < 2**64
    if kind is float:
        return math.isfinite(value)
    if kind is list or kind is tuple:
        return all(map(is_json_native, value))
    if kind is dict:
        return all(type(key) is str for key in value) and all(map(is_json_native, value.values()))
    return False  # subclasses and everything else: check_json_native decides and explains


def check_arguments(where: str, args: Sequence[Any], kwargs: dict[str, Any], names: Sequence[str] = ()) -> None:
    """Refuse arguments JSON can't carry, naming the first bad one (``where: argument 'x' is a ...``).

    ``names`` are the function's positional parameter names: ``args[i]`` is
    named by its parameter where there is one (not for ``*args``), a keyword
    argument by its keyword. The error path is only built for a refused value.
    """
    for index, value in enumerate(args):
        if not is_json_native(value):
            label = f"argument {names[index]!r}" if index < len(names) else f"args[{index}]"
            check_json_native(value, f"{where}: {label}")
    for key, value in kwargs.items():
        if not is_json_native(value):
            check_json_native(value, f"{where}: argument {key!r}")


def dumps(payload: dict[str, Any]) -> str:
    try:
        return orjson.dumps(payload).decode()
    except (orjson.JSONEncodeError, TypeError):
        pass
    # Only reachable with STRICT_ARGS off: values orjson can't encode become
    # their str(), non-str keys strings; NaN/Infinity stay null as above (the
    # stdlib encoder would write bare NaN tokens, which no JSON reader takes).
    try:
        return orjson.dumps(payload, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError):
        # Ints beyond 64 bits: only the stdlib encoder writes them.
        return json.dumps(payload, separators=(",", ":"), default=str)


# A stored payload as djwork holds it: text, or the exact bytes when they are not UTF-8.
StoredPayload = str | bytes


def stored_payload(raw: bytes | str) -> StoredPayload:
    """Decode a payload read from Redis, keeping the exact bytes when they are not UTF-8.

    Decoding strictly killed the worker's fetch, reconcile and taker paths on
    one bad byte, for good (the same byte came back after every requeue); a
    lenient decode would change the member, so the ack's LREM would never find
    it. Bytes stay bytes until proven text: ``loads`` then refuses them and the
    job goes to dead with the bytes escaped.
    """
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return raw


def readable(raw: StoredPayload) -> str:
    """Text to show or store for a payload: undecodable bytes escaped (``\\xff``), never lost or raised."""
    return raw if isinstance(raw, str) else raw.decode("utf-8", "backslashreplace")


def loads(raw: str | bytes) -> dict[str, Any]:
    """Parse a stored job; PayloadError for anything that is not a job object."""
    if isinstance(raw, bytes):
        try:
            raw.decode()
        except UnicodeDecodeError as error:
            raise PayloadError(f"payload is not valid UTF-8 (byte 0x{raw[error.start]:02x} at offset "
                               f"{error.start})") from error
    try:
        job = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        if str(error).startswith("depth limit exceeded"):
            # Refused on every Python alike: 3.11's stdlib reader raises RecursionError on it, 3.13's reads it,
            # and a job that deep fails later anyway, in the orjson writes of its history and result.
            raise PayloadError(f"payload is nested too deep for a JSON reader ({error})") from error
        try:
            job = json.loads(raw)
        except (ValueError, TypeError) as error:
            raise PayloadError(f"payload is not valid JSON: {error}") from error
        except RecursionError as error:
            # Past orjson's 1,024 levels the stdlib reader recurses until Python stops it: uncaught, the
            # job stayed in progress and came back to the next worker, forever.
            raise PayloadError(f"payload is nested too deep for a JSON reader ({error})") from error
    if not isinstance(job, dict):
        raise PayloadError(f"payload is a JSON {type(job).__name__}, not an object")
    if not isinstance(job.get("class"), str) or not job["class"]:
        raise PayloadError("payload has no 'class' string")
    if not isinstance(job.get("args", []), list):
        raise PayloadError("payload 'args' is not an array")
    return job


def build(class_path: str, args: list | tuple, kwargs: dict[str, Any] | None, *,
          queue: str = "default", retry: bool | int = True, jid: str | None = None,
          extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Sidekiq 7 job hash (no ``enqueued_at``: the client stamps it when it writes to a queue)."""
    payload: dict[str, Any] = {
        "class": class_path,
        "args": list(args),
        "queue": queue,
        "jid": jid or new_jid(),
        "retry": retry,
        "created_at": time.time(),
    }
    if kwargs:
        payload["kwargs"] = dict(kwargs)
    if extra:
        payload.update(extra)
    return payload
