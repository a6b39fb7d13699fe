"""What every verb shares: exit codes, the JSON and text writers, times for people, and the verb's context.

JSON output is one object per line: a looking verb about one thing prints one
object, a listing one object per item (JSON lines), so ``| jq`` and a
monitoring check read it without paging state. Times are ISO 8601 in UTC,
durations seconds as numbers: the text output is for people, the JSON for
programs, and neither depends on the terminal's width or the local zone.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

OK = 0  # done, or nothing needs attention
ATTENTION = 1  # done, but something needs a person: the health strip would warn, some jobs were skipped
ERROR = 2  # not done: bad input, refused, Redis unreachable


class Failure(Exception):
    """The verb could not do what was asked; its message goes to stderr as one line, then exit ``code``."""

    def __init__(self, message: str, code: int = ERROR) -> None:
        super().__init__(message)
        self.code = code


def to_json(value: Any) -> Any:
    """``json.dumps``'s fallback: datetimes as ISO 8601 in UTC, anything else as its text."""
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def when(moment: dt.datetime | None) -> str:
    """A moment for people: UTC to the second, or "-"."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def seconds_text(seconds: float | None) -> str:
    """A duration for people: 12s, 4m 05s, 3h 02m, 2d 04h."""
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s" if seconds >= 10 or seconds == 0 else f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m {int(seconds % 60):02d}s"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h {int(seconds % 3600 // 60):02d}m"
    return f"{int(seconds // 86400)}d {int(seconds % 86400 // 3600):02d}h"


def ago(moment: dt.datetime | None) -> str:
    if moment is None:
        return "-"
    return seconds_text(time.time() - moment.timestamp()) + " ago"


def plural(count: int, word: str = "job", many: str = "") -> str:
    return f"{count:,} {word if count == 1 else many or word + 's'}"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Columns padded to their widest cell; the last column is left ragged (it is often a long message)."""
    cells = [[str(cell) for cell in headers]] + [[str(cell) for cell in row] for row in rows]
    widths = [max(len(row[index]) for row in cells) for index in range(len(headers))]
    lines = ["  ".join(cell.ljust(widths[index]) if index < len(row) - 1 else cell
                       for index, cell in enumerate(row)).rstrip() for row in cells]
    return "\n".join(lines)


@dataclass
class Context:
    """One verb's run: its parsed options and where it reads and writes."""

    options: dict[str, Any]
    stdout: TextIO
    stderr: TextIO
    stdin: TextIO

    @property
    def json(self) -> bool:
        return bool(self.options.get("json"))

    def say(self, text: str = "") -> None:
        self.stdout.write(text + "\n")

    def emit(self, value: dict[str, Any]) -> None:
        """One JSON object on one line."""
        self.stdout.write(json.dumps(value, default=to_json, ensure_ascii=False) + "\n")

    def emit_lines(self, values: Iterable[dict[str, Any]]) -> None:
        for value in values:
            self.emit(value)

    def flush(self) -> None:
        self.stdout.flush()
