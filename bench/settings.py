"""Settings for benchmark workers: the private server from $BENCH_REDIS_URL, quiet logging."""

import os

SECRET_KEY = "bench"
DEBUG = False
USE_TZ = True
INSTALLED_APPS = ["djwork", "bench"]
try:
    import django.tasks  # noqa: F401
except ImportError:
    INSTALLED_APPS.append("django_tasks")
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
DJWORK = {
    "REDIS_URL": os.environ["BENCH_REDIS_URL"],
    "CONCURRENCY": 10,
    "ASYNC_CONCURRENCY": int(os.environ.get("BENCH_ASYNC_CONCURRENCY", "100")),
    "QUEUES": ["bench"],
    "LOG_JOBS": False,
    # ./dev bench cpu_per_job --metrics both: the same drain with execution metrics on and off.
    "METRICS": os.environ.get("BENCH_METRICS", "1") != "0",
    # A short beat puts the metrics' flushes inside a short drain's measured window.
    "HEARTBEAT_INTERVAL": float(os.environ.get("BENCH_HEARTBEAT_INTERVAL", "10")),
    # bench/embedded_gunicorn.py: the embedded worker's share of its web process.
    "EMBEDDED_YIELD": float(os.environ.get("BENCH_EMBEDDED_YIELD", "0")),
    "EMBEDDED_MAX_JOBS_PER_SECOND": float(os.environ["BENCH_EMBEDDED_MAX_JOBS"])
    if os.environ.get("BENCH_EMBEDDED_MAX_JOBS") else None,
}
# bench/footprint.py's periodic entry: run only by Periodic().run_now (its cron slot is once a year).
if os.environ.get("BENCH_PERIODIC"):
    DJWORK["PERIODIC"] = [{"cron": "0 0 1 1 *", "job": "bench.jobs.drain_plain", "name": "footprint"}]
# RESULTS is djwork's default (off) unless a run asks: bench/compare.py --results on measures djwork a second
# time with BENCH_RESULTS=1. Decided at enqueue, so the client process reads it too.
if os.environ.get("BENCH_RESULTS"):
    DJWORK["RESULTS"] = os.environ["BENCH_RESULTS"] == "1"
if os.environ.get("BENCH_CONCURRENCY"):
    DJWORK["CONCURRENCY"] = int(os.environ["BENCH_CONCURRENCY"])
ROOT_URLCONF = "bench.urls"
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
LOGGING = {
    "version": 1,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"djwork": {"handlers": ["console"], "level": "WARNING"}},
}

if os.environ.get("BENCH_SWITCH_INTERVAL"):
    import sys

    sys.setswitchinterval(float(os.environ["BENCH_SWITCH_INTERVAL"]))
