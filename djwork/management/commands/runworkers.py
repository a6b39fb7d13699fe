"""``manage.py runworkers``: run djwork workers in this process (thin: the logic is in djwork.worker)."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand

from djwork.checks import QUEUE_NAME
from djwork.conf import build_config, parse_queue


def queue_option(value: str) -> tuple[str, int]:
    try:
        name, weight = parse_queue(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{value!r}: weight must be an integer ({error})") from None
    if not QUEUE_NAME.match(name):
        raise argparse.ArgumentTypeError(f"{value!r}: queue names use only a-z, 0-9, _ : . -")
    if weight < 0:
        raise argparse.ArgumentTypeError(f"{value!r}: weight must be >= 0")
    return name, weight


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

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-c", "--concurrency", type=positive_int, help="processor threads (default CONCURRENCY)")
        parser.add_argument("-q", "--queues", "--queue", dest="queues", action="append", type=queue_option,
                            metavar="NAME[,WEIGHT]",
                            help="queue to work, repeatable; weights share the fetches by weight "
                                 "(weighted round-robin), no weights a strict order")
        parser.add_argument("--timeout", type=non_negative_float, help="seconds to drain on shutdown (TIMEOUT)")
        parser.add_argument("--tag", help="a label shown next to this process in the dashboard")
        parser.add_argument("--processes", type=positive_int, default=1,
                            help="fork N worker processes from one supervising parent (swarm)")
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
