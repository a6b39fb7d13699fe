"""The suite's DJWORK settings, and the bad values the system checks must refuse (each with its check id)."""

from __future__ import annotations

from typing import Any

from django.conf import settings


def base_djwork() -> dict[str, Any]:
    return dict(settings.DJWORK)


BAD_VALUES: list[tuple[str, Any, str]] = [
    ("CONCURRENCY", 0, "djwork.E004"),
    ("CONCURRENCY", -1, "djwork.E004"),
    ("CONCURRENCY", "10", "djwork.E004"),
    ("CONCURRENCY", True, "djwork.E004"),
    ("CONCURRENCY", 2.5, "djwork.E004"),
    ("ASYNC_CONCURRENCY", 0, "djwork.E070"),
    ("ASYNC_CONCURRENCY", "100", "djwork.E070"),
    ("ASYNC_CONCURRENCY", True, "djwork.E070"),
    ("EMBEDDED_YIELD", -1, "djwork.E071"),
    ("EMBEDDED_YIELD", "1", "djwork.E071"),
    ("EMBEDDED_MAX_JOBS_PER_SECOND", 0, "djwork.E072"),
    ("EMBEDDED_MAX_JOBS_PER_SECOND", "200", "djwork.E072"),
    ("QUEUES", [("critical", -1)], "djwork.E005"),       # negative weight
    ("QUEUES", [("critical", "3")], "djwork.E005"),      # non-int weight
    ("QUEUES", [("critical", 1.5)], "djwork.E005"),
    ("QUEUES", [("critical", True)], "djwork.E005"),
    ("QUEUES", [("critical", 3, 1)], "djwork.E005"),     # 3-tuple
    ("QUEUES", ["critical,high"], "djwork.E005"),        # 'name,weight' with a non-int weight
    ("QUEUES", ["has space"], "djwork.E005"),            # bad names
    ("QUEUES", ["émoji"], "djwork.E005"),
    ("QUEUES", [""], "djwork.E005"),
    ("QUEUES", [5], "djwork.E005"),
    ("QUEUES", [], "djwork.E005"),                       # empty
    ("QUEUES", "default", "djwork.E005"),                # a bare string, not a list
    ("QUEUES", None, "djwork.E005"),
    ("CAPSULES", ["single"], "djwork.E009"),
    ("CAPSULES", {"single": "serial"}, "djwork.E009"),
    ("CAPSULES", {"default": {"QUEUES": ["serial"]}}, "djwork.E009"),
    ("CAPSULES", {"": {"QUEUES": ["serial"]}}, "djwork.E009"),
    ("CAPSULES", {1: {"QUEUES": ["serial"]}}, "djwork.E009"),
    ("CAPSULES", {"single": {"QUEUES": ["serial"], "CONCURRENCY": 0}}, "djwork.E009"),
    ("CAPSULES", {"single": {"QUEUES": ["serial"], "CONCURRENCY": "1"}}, "djwork.E009"),
    ("CAPSULES", {"single": {"QUEUES": ["serial"], "THREADS": 1}}, "djwork.E009"),
    ("CAPSULES", {"single": {"QUEUES": []}}, "djwork.E005"),
    ("CAPSULES", {"single": {"QUEUES": [("serial", -2)]}}, "djwork.E005"),
    ("FETCH", "fast", "djwork.E007"),
    ("FETCH", None, "djwork.E007"),
    ("TIMEOUT", -1, "djwork.E006"),
    ("TIMEOUT", "25", "djwork.E006"),
    ("TIMEOUT", None, "djwork.E006"),
    ("CONNECT_TIMEOUT", 0, "djwork.E010"),
    ("SOCKET_TIMEOUT", "2.5", "djwork.E010"),
    ("POOL_TIMEOUT", -1, "djwork.E010"),
    ("REDIS_BACKOFF_BASE", None, "djwork.E010"),
    ("REDIS_BACKOFF_CAP", [2], "djwork.E010"),
    ("DASHBOARD_LATENCY_WARNING", 0, "djwork.E010"),
    ("HEARTBEAT_INTERVAL", 0, "djwork.E010"),
    ("HEARTBEAT_INTERVAL", "10", "djwork.E010"),
    ("REAPER_INTERVAL", 0, "djwork.E010"),
    ("AVERAGE_SCHEDULED_POLL_INTERVAL", "5", "djwork.E010"),
    ("DEAD_TIMEOUT", -5, "djwork.E010"),
    ("FETCH_TIMEOUT", True, "djwork.E010"),
    ("UNKNOWN_CLASS", "skip", "djwork.E021"),
    ("UNKNOWN_CLASS", None, "djwork.E021"),
    ("HEALTH_PORT", 0, "djwork.E022"),
    ("HEALTH_HOST", "", "djwork.E023"),
    ("HEALTH_HOST", 8080, "djwork.E023"),
    ("HEALTH_PORT", 70000, "djwork.E022"),
    ("HEALTH_PORT", "8081", "djwork.E022"),
    ("MAX_ORPHANINGS", 0, "djwork.E011"),
    ("DEAD_MAX_JOBS", "100", "djwork.E011"),
    ("DEAD_MAX_BYTES", 0, "djwork.E011"),
    ("HISTORY_MAX_LENGTH", -1, "djwork.E011"),
    ("RESULT_TTL", 1.5, "djwork.E011"),
    ("RESULT_MAX_BYTES", 0, "djwork.E011"),
    ("RESULTS", "on", "djwork.E017"),
    ("REDIS_MAX_ATTEMPTS", 0, "djwork.E011"),
    ("CLIENT_MIDDLEWARE", ["djwork.no_such_module.Tracing"], "djwork.E008"),
    ("CLIENT_MIDDLEWARE", ["notadottedpath"], "djwork.E008"),
    ("SERVER_MIDDLEWARE", ["djwork.middleware.NoSuchClass"], "djwork.E008"),
    ("SERVER_MIDDLEWARE", "djwork.middleware.resolve_all", "djwork.E008"),  # a string, not a list
    ("SERVER_MIDDLEWARE", [42], "djwork.E008"),
    ("CLIENT_MIDDLEWARE", ["djwork.settings.conf.DEFAULTS"], "djwork.E008"),          # importable, not callable
    ("REDIS_EVENT_HOOK", "djwork.no_such_module.hook", "djwork.E008"),
    ("REDIS_EVENT_HOOK", "djwork.redis.FAILOVER_PREFIXES", "djwork.E008"),
    ("ALIASES", ["HardWorker"], "djwork.E012"),
    ("ALIASES", {"HardWorker": 1}, "djwork.E012"),
    ("ALIASES", {1: "example.tasks.add"}, "djwork.E012"),
    ("ORPHAN_THRESHOLD", 20.0, "djwork.E013"),    # == 2 * HEARTBEAT_INTERVAL (10)
    ("ORPHAN_THRESHOLD", 15, "djwork.E013"),
    ("POOL_SIZE", 1, "djwork.E014"),
    ("POOL_SIZE", 0, "djwork.E014"),
    ("POOL_SIZE", "8", "djwork.E014"),
    ("POOL_SIZE", True, "djwork.E014"),
    ("POOL_SIZE", 8.0, "djwork.E014"),
    ("LABELS", "blue", "djwork.E015"),
    ("LABELS", ["blue", 1], "djwork.E015"),
    ("LABELS", None, "djwork.E015"),
    ("TAG", 5, "djwork.E016"),
    ("TAG", None, "djwork.E016"),
    ("STRICT_ARGS", "yes", "djwork.E017"),
    ("STRICT_ARGS", 1, "djwork.E017"),
    ("LOG_JOBS", None, "djwork.E017"),
    ("POLL_INTERVAL_AVERAGE", 0, "djwork.E018"),
    ("POLL_INTERVAL_AVERAGE", -1.0, "djwork.E018"),
    ("POLL_INTERVAL_AVERAGE", "5", "djwork.E018"),
    ("REDIS_OPTIONS", "ssl=true", "djwork.E019"),
    ("REDIS_OPTIONS", [("ssl", True)], "djwork.E019"),
    ("REDIS_OPTIONS", None, "djwork.E019"),
    ("REDIS_OPTIONS", {1: True}, "djwork.E019"),
    ("MAX_RETRIES", -1, "djwork.E020"),
    ("MAX_RETRIES", "25", "djwork.E020"),
    ("MAX_RETRIES", False, "djwork.E020"),
    ("LIMITER_MAX_RESCHEDULES", -1, "djwork.E024"),
    ("LIMITER_MAX_RESCHEDULES", 2.5, "djwork.E024"),
    ("SOFT_TIME_LIMIT", 0, "djwork.E073"),
    ("SOFT_TIME_LIMIT", "30", "djwork.E073"),
    ("TIME_LIMIT", -5, "djwork.E073"),
    ("TIME_LIMIT", True, "djwork.E073"),
    ("ALWAYS_EAGER", "yes", "djwork.E017"),
    ("TRACK_STARTED", 1, "djwork.E017"),
    # Periodic jobs (docs/periodic.md; more cases in tests/test_periodic_checks.py).
    ("LEADER", "yes", "djwork.E040"),
    ("METRICS", "yes", "djwork.E017"),
    ("METRICS_TOKEN", 5, "djwork.E060"),
    ("PERIODIC", {"cron": "* * * * *", "job": "tests.jobs.add"}, "djwork.E041"),  # a dict, not a list
    ("PERIODIC", [{"cron": "* * * * *", "job": "tests.jobs.add", "args": [1], "catchup": "all"}], "djwork.E041"),
    ("PERIODIC", [{"cron": "every minute", "job": "tests.jobs.add", "args": [1]}], "djwork.E042"),
    ("PERIODIC", [{"cron": "* * * * *", "job": "tests.jobs.no_such_job"}], "djwork.E043"),
    ("PERIODIC", [{"cron": "* * * * *", "job": "tests.jobs.add", "args": [1], "tz": "Mars/Olympus"}], "djwork.E044"),
    ("PERIODIC", [{"cron": "* * * * *", "job": "tests.jobs.add", "args": [1]},
                  {"cron": "0 * * * *", "job": "tests.jobs.add", "args": [2]}], "djwork.E045"),
    ("TEST_CLOCK", {"speed": 0}, "djwork.E046"),
    ("TEST_CLOCK", 20, "djwork.E046"),
]
