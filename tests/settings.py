"""Test settings: the example project, pointed at the suite's private redis-server.

The server comes from DJWORK_TEST_REDIS_URL (./dev test starts one); a bare
``pytest`` run starts its own here. The user's REDIS_URL is never used.
"""

import atexit
import os
import tempfile

if not os.environ.get("DJWORK_TEST_REDIS_URL"):
    from djwork.testing.redis_server import RedisServer

    _server = RedisServer().start()
    atexit.register(_server.stop)
    os.environ["DJWORK_TEST_REDIS_URL"] = _server.url

os.environ["REDIS_URL"] = os.environ["DJWORK_TEST_REDIS_URL"]
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
