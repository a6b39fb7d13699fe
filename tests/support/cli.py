"""Running ``manage.py djwork`` in the test's own process (call_command), and docs/cli.md's JSON fields."""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.core.management import CommandError, call_command

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
FIELDS_LINE = re.compile(r"^JSON fields of `([a-z ]+)`[^:]*: (.+)$", re.MULTILINE)


class Terminal(io.StringIO):
    """Standard input a person types on: a terminal, so the command asks instead of refusing."""

    def isatty(self) -> bool:
        return True


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str

    def objects(self) -> list[dict[str, Any]]:
        """stdout as JSON lines (one object per line)."""
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]

    def object(self) -> dict[str, Any]:
        (one,) = self.objects()
        return one


def cli(*args: str, stdin: io.StringIO | None = None) -> Outcome:
    """``manage.py djwork *args``; the exit status the command line would have (0 when it returns)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("djwork", *args, stdout=out, stderr=err, stdin=stdin or io.StringIO())
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    except CommandError as error:
        # A usage error: from the command line argparse prints it and exits 2; in-process Django raises it.
        return Outcome(2, out.getvalue(), str(error))
    return Outcome(code, out.getvalue(), err.getvalue())


def documented_fields() -> dict[str, list[str]]:
    """verb -> the JSON field names docs/cli.md lists for it (a line "JSON fields of `verb`: `a`, `b`")."""
    return {verb: re.findall(r"`([a-z_]+)`", names) for verb, names in FIELDS_LINE.findall(DOC.read_text())}
