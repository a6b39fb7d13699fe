"""Test settings: the example project, pointed at the suite's private redis-server.

Each pytest process (each xdist worker) starts a server of its own here, at
import, before any test runs (tests/support/private_redis.py); the processes
the tests start inherit its DJWORK_TEST_REDIS_URL. The user's REDIS_URL is
never used.
"""

import os
import tempfile

from tests.support.private_redis import ensure_private_server

os.environ["REDIS_URL"] = ensure_private_server()
os.environ.setdefault("DJWORK_EXAMPLE_DB", os.path.join(tempfile.gettempdir(), f"djwork-test-{os.getpid()}.db"))

from example.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests"]  # noqa: F405
DJWORK = {
    "REDIS_URL": os.environ["DJWORK_TEST_REDIS_URL"],
    "CONCURRENCY": 5,
    "QUEUES": ["critical", "default", "low"],
    "TIMEOUT": 5,
}
DATABASES = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["DJWORK_EXAMPLE_DB"]},
}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
