"""``manage.py runworkers``: run djwork workers in this process (thin: the logic is in djwork.worker)."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand

from djwork.options import QUEUE_RULE
from djwork.settings.checks import QUEUE_NAME
from djwork.settings.conf import build_config

SIGNALS = """signals:
  TERM, INT  stop fetching, let running jobs finish for --timeout seconds, push the
             unfinished ones back onto their queues, exit
  TSTP       quiet: stop fetching new jobs, finish the running ones, stay up (then TERM)
  TTIN       write every thread's stack to the log (a stuck job's line)
The dashboard's Quiet and Stop buttons send TSTP and TERM; a process takes them at its
next heartbeat (HEARTBEAT_INTERVAL)."""


def queue_option(value: str) -> tuple[str, int]:
    name, comma, weight_text = value.partition(",")
    name = name.strip()
    weight = 0
    if comma:
        try:
            weight = int(weight_text)
        except ValueError:
            # int()'s own "invalid literal for int() with base 10" names neither the option nor the fix.
            raise argparse.ArgumentTypeError(
                f"{value!r}: the weight after the comma must be a whole number, as in {name or 'default'},3"
            ) from None
    if not QUEUE_NAME.match(name):
        raise argparse.ArgumentTypeError(f"{value!r}: {name!r} is not a queue name ({QUEUE_RULE})")
    if weight < 0:
        raise argparse.ArgumentTypeError(f"{value!r}: the weight must be 0 or more")
    return name, weight


def _current() -> Any:
    """This project's settings, for the defaults --help shows; None if they can't be read."""
    try:
        return build_config()
    except Exception:  # --help must print even when the settings are broken (manage.py check names them)
        return None


def _queues_text(queues: Any) -> str:
    return " ".join(f"{name},{weight}" if weight else name for name, weight in queues)


def positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} must be >= 1")
    return number


def non_negative_float(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"{value!r} must be >= 0")
    return number


def port(value: str) -> int:
    number = positive_int(value)
    if number > 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not a TCP port")
    return number


class Command(BaseCommand):
    help = "Run djwork workers: fetch jobs from Redis and run them until TERM/INT."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> argparse.ArgumentParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.epilog = SIGNALS
        # Django's formatter reflows text; the signal table must keep its lines.
        parser.formatter_class = type("Formatter", (parser.formatter_class, argparse.RawDescriptionHelpFormatter), {})
        return parser

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        config = _current()
        concurrency = config.concurrency if config else "CONCURRENCY"
        queues = _queues_text(config.queues) if config else "QUEUES"
        timeout = f"{config.timeout:g}" if config else "TIMEOUT"
        parser.add_argument("-c", "--concurrency", type=positive_int,
                            help=f"processor threads (default: the CONCURRENCY setting, {concurrency} here)")
        parser.add_argument("-q", "--queues", "--queue", dest="queues", action="append", type=queue_option,
                            metavar="NAME[,WEIGHT]",
                            help="queue to work, repeatable; weights share the fetches by weight "
                                 "(weighted round-robin), no weights a strict order; queue names: "
                                 f"{QUEUE_RULE} (default: the QUEUES setting, {queues} here)")
        parser.add_argument("--timeout", type=non_negative_float,
                            help=f"seconds to drain on shutdown (default: the TIMEOUT setting, {timeout} here)")
        parser.add_argument("--tag", help="a label shown next to this process in the dashboard")
        parser.add_argument("--processes", type=positive_int, default=1,
                            help="fork N worker processes from one supervising parent (swarm; default 1)")
        parser.add_argument("--max-memory", type=positive_int, metavar="MB",
                            help="restart a worker process gracefully once its RSS exceeds MB (implies a swarm)")
        parser.add_argument("--health-port", type=port, help="serve /live and /ready on this port (HEALTH_PORT)")
        parser.add_argument("--health-host", help="address the health probes bind (default 0.0.0.0)")

    def handle(self, *args: Any, **options: Any) -> None:
        overrides: dict[str, Any] = {}
        if options.get("concurrency"):
            overrides["CONCURRENCY"] = options["concurrency"]
        if options.get("queues"):
            overrides["QUEUES"] = options["queues"]
        if options.get("timeout") is not None:
            overrides["TIMEOUT"] = options["timeout"]
        if options.get("tag"):
            overrides["TAG"] = options["tag"]
        # Always set, even to None: the HEALTH_PORT setting is the embedded
        # workers' (docs/settings.md); a runworkers on the same host reading it
        # too would find the port taken by the web process and fail its boot.
        overrides["HEALTH_PORT"] = options.get("health_port")
        if options.get("health_host"):
            overrides["HEALTH_HOST"] = options["health_host"]
        config = build_config(overrides)
        _autodiscover()
        from djwork.worker import runner

        if options["processes"] > 1 or options.get("max_memory"):
            from djwork.worker import swarm

            code = swarm.run(config, options["processes"], max_memory_mb=options.get("max_memory"))
        else:
            code = runner.run(config)
        runner.exit_process(code)


def _autodiscover() -> None:
    """Import every installed app's ``tasks`` and ``jobs`` modules so jobs with custom names register."""
    from django.utils.module_loading import autodiscover_modules

    autodiscover_modules("tasks", "jobs")
