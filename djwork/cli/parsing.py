"""How verbs are declared: a looking verb takes ``--json``, an acting verb ``--yes`` (and ``--json`` for its
summary); each points at the function that runs it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from djwork.cli.output import Context

Run = Callable[[Context], int]


def looking(verbs: Any, name: str, run: Run, help: str, description: str = "") -> argparse.ArgumentParser:
    parser = verbs.add_parser(name, help=help, description=description or help)
    parser.add_argument("--json", action="store_true", help="print JSON (docs/cli.md lists the fields)")
    parser.set_defaults(run=run)
    return parser


def acting(verbs: Any, name: str, run: Run, help: str, description: str = "") -> argparse.ArgumentParser:
    parser = verbs.add_parser(name, help=help, description=description or help)
    parser.add_argument("--yes", "-y", action="store_true",
                        help="do it without asking (needed when standard input is not a terminal)")
    parser.add_argument("--json", action="store_true", help="print what was done as one JSON object")
    parser.set_defaults(run=run)
    return parser


def positive(value: str) -> int:
    """An argparse type: a whole number of 1 or more."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r}: it must be 1 or more")
    return number
