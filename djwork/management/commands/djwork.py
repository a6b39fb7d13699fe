"""``manage.py djwork <verb>``: status, a live monitor and every dashboard action from a terminal (docs/cli.md).

Exit status: 0 ok, 1 something needs attention (a warning, skipped jobs, a
declined confirmation), 2 error (bad input, a refused action, Redis
unreachable). Errors are one line on stderr, never a traceback: a cron job's
mail or a CI log shows what went wrong and where.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from django.core.management.base import BaseCommand
from redis.exceptions import RedisError

from djwork import api
from djwork.cli import (
    batches,
    history,
    job_actions,
    jobs,
    limits,
    locks,
    metrics,
    periodic,
    processes,
    queues,
    results,
    status,
)
from djwork.cli.output import ERROR, OK, Context, Failure
from djwork.redis.url import public_location

FAMILIES = (status, processes, queues, jobs, job_actions, history, periodic, limits, batches, locks, results, metrics)


class Command(BaseCommand):
    help = "Look at and act on the djwork cluster: `manage.py djwork status`, `manage.py djwork <verb> --help`."
    # Tests hand the confirmation's answer in; from the command line it is sys.stdin.
    stealth_options = ("stdin",)

    def add_arguments(self, parser: Any) -> None:
        verbs = parser.add_subparsers(dest="verb", metavar="<verb>", required=True)
        for family in FAMILIES:
            family.register(verbs)

    def handle(self, *args: Any, **options: Any) -> None:
        # Every write below ends its own lines; Django's wrapper would add a newline to a prompt.
        self.stdout.ending = self.stderr.ending = ""
        ctx = Context(options, self.stdout, self.stderr, options.get("stdin") or sys.stdin)
        # The replay policy logs each retry of a failed dial and its giving up: right for a worker, noise before
        # the one line a command prints about the same outage. -v 2 keeps the project's logging as it is.
        quiet = options.get("verbosity", 1) < 2
        before = logging.root.manager.disable
        if quiet:
            logging.disable(logging.ERROR)
        try:
            code = self._run(ctx)
        finally:
            if quiet:
                logging.disable(before)
        ctx.flush()
        if code != OK:
            raise SystemExit(code)

    def _run(self, ctx: Context) -> int:
        try:
            return ctx.options["run"](ctx)
        except BrokenPipeError:
            # The reader left (`| head -1`): what it wanted was printed. Later writes and the interpreter's
            # last flush go nowhere instead of ending in a BrokenPipeError traceback.
            _silence_stdout()
            return OK
        except Failure as failure:
            self.stderr.write(f"djwork: {failure}\n")
            return failure.code
        except (api.RedisUnavailable, RedisError) as error:
            # Before ApiError, RedisUnavailable's base: an outage is not a refused action. The location is
            # printed without its password (redis_url.public_location).
            reason = " ".join(str(error.__cause__ or error).split())
            self.stderr.write(f"djwork: Redis at {public_location()} is unreachable: {reason}\n")
            return ERROR
        except (api.ApiError, ValueError) as error:
            self.stderr.write(f"djwork: {' '.join(str(error).split())}\n")
            return ERROR


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # not a real file (a test's StringIO): nothing will flush into a closed pipe
        pass
