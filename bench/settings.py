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
    "QUEUES": ["bench"],
    "LOG_JOBS": False,
}
LOGGING = {
    "version": 1,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"djwork": {"handlers": ["console"], "level": "WARNING"}},
}

if os.environ.get("BENCH_SWITCH_INTERVAL"):
    import sys

    sys.setswitchinterval(float(os.environ["BENCH_SWITCH_INTERVAL"]))
