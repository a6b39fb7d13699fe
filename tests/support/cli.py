"""Running ``manage.py djwork`` in the test's own process (call_command), and docs/cli.md's JSON fields."""

from __future__ import annotations

import io
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.core.management import CommandError, call_command

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "cli.md"
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


def command_line(*args: str) -> list[str]:
    """``python manage.py djwork *args``, for a test that runs it as a process of its own."""
    return [sys.executable, "manage.py", "djwork", *args]


def command_env(**overrides: Any) -> dict[str, str]:
    """The environment a worker test's processes get (tests.settings_worker), with ``overrides`` in DJWORK."""
    env = dict(os.environ)
    env.update(DJANGO_SETTINGS_MODULE="tests.settings_worker", DJWORK_TEST_OVERRIDES=json.dumps(overrides),
               PYTHONUNBUFFERED="1")
    env.pop("REDIS_URL", None)
    return env
