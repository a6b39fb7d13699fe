"""A job's ``error_backtrace`` field: written by the worker, read by the API and the dashboard.

Sidekiq 7 stores the lines as strict base64 of zlib-deflated JSON
(docs/wire.md, Jobs); Sidekiq 6.4 wrote the same bytes as MIME base64
and, earlier still, a raw JSON array. Both directions live here so the
worker (djwork.worker.retry) and the reader (djwork.api.records) cannot
drift apart, and neither has to import the other.
"""

from __future__ import annotations

import base64
import binascii
import json
import traceback
import zlib
from typing import Any

import orjson


def exception_lines(error: BaseException, limit: bool | int = True) -> list[str]:
    """``error``'s traceback, one line per list item: all of it for ``True``, else its first ``limit`` lines."""
    lines = [line.rstrip("\n") for line in traceback.format_exception(error)]
    flat = [part for line in lines for part in line.split("\n") if part]
    if limit is not True and isinstance(limit, int):
        flat = flat[:limit]
    return flat


def encode_backtrace(lines: list[str]) -> str:
    """Sidekiq 7's encoding: strict base64 (no newlines) of zlib-deflated JSON of the lines."""
    return base64.b64encode(zlib.compress(orjson.dumps(lines))).decode()


def _line(value: Any) -> str:
    # A hand-written array may hold numbers or nulls (JSON has no bytes): shown as text, never raised on.
    return "" if value is None else str(value)


def decode_backtrace(value: Any) -> tuple[list[str] | None, str | None]:
    """error_backtrace -> (lines, problem); never raises, whatever another program stored.

    Strict base64 (Sidekiq 7) and MIME base64 (6.4, a newline every 60
    characters) decode alike once whitespace is dropped; a raw JSON array
    (6.4's legacy form) is shown too rather than refused.
    """
    if value is None:
        return None, None
    if isinstance(value, list):
        return [_line(line) for line in value], None
    if not isinstance(value, str):
        return None, f"error_backtrace is a {type(value).__name__}, not a base64 string"
    compact = "".join(value.split())
    try:
        packed = base64.b64decode(compact, validate=True)
        lines = json.loads(zlib.decompress(packed))
    except (binascii.Error, ValueError, zlib.error) as error:
        return None, f"error_backtrace could not be decoded ({type(error).__name__}: {error})"
    if not isinstance(lines, list):
        return None, "error_backtrace does not hold a JSON array"
    return [_line(line) for line in lines], None
