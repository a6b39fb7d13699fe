"""How verbs are declared: a looking verb takes ``--json``, an acting verb ``--yes`` (and ``--json`` for its
summary); each points at the function that runs it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from djwork.cli.output import Context

# Re-exported for the verbs' --limit: runworkers -c's rule, a whole number of 1 or more.
from djwork.management.commands.runworkers import positive_int

Run = Callable[[Context], int]


def django_options() -> argparse.ArgumentParser:
    """Django's options of every command, accepted after the verb too (``djwork status --settings x``).

    Without them the verb's parser refused ``--settings`` and ``-v 2`` written after the verb, where
    people put them. Their default is left out of the namespace, so the values given before the verb
    (or Django's defaults) stand when none is given after it.
    """
    common = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    common.add_argument("-v", "--verbosity", type=int, choices=[0, 1, 2, 3],
                        help="2 or more: keep the project's logging (djwork's retry lines) during the command")
    common.add_argument("--settings", help="the Django settings module, as for any command")
    common.add_argument("--pythonpath", help="a directory to add to the Python path, as for any command")
    for flag in ("--traceback", "--no-color", "--force-color", "--skip-checks"):
        common.add_argument(flag, action="store_true", help=argparse.SUPPRESS)
    return common


COMMON = django_options()


def looking(verbs: Any, name: str, run: Run, help: str, description: str = "") -> argparse.ArgumentParser:
    parser = verbs.add_parser(name, help=help, description=description or help, parents=[COMMON])
    parser.add_argument("--json", action="store_true", help="print JSON (docs/cli.md lists the fields)")
    parser.set_defaults(run=run)
    return parser


def acting(verbs: Any, name: str, run: Run, help: str, description: str = "") -> argparse.ArgumentParser:
    parser = verbs.add_parser(name, help=help, description=description or help, parents=[COMMON])
    parser.add_argument("--yes", "-y", action="store_true",
                        help="do it without asking (needed when standard input is not a terminal)")
    parser.add_argument("--json", action="store_true", help="print what was done as one JSON object")
    parser.set_defaults(run=run)
    return parser


def interval(value: str) -> float:
    """An argparse type: seconds between refreshes, at least 0.1 (a tighter loop would only load Redis)."""
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not seconds >= 0.1 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"{value!r}: refresh every 0.1 s or more")
    return seconds


__all__ = ["COMMON", "Run", "acting", "django_options", "interval", "looking", "positive_int"]
