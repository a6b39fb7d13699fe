"""Worker settings with a django-redis cache alias, "jobs", on database 3 of the suite's private server.

For tests/test_connections.py: the test points ``DJWORK["CACHE"]`` at this
alias (and ``REDIS_URL`` at a port nobody listens on) through the per-test
overrides, so a worker that ran its jobs proves it connected through the cache.
"""

import os
from urllib.parse import urlparse

from tests.settings_worker import *  # noqa: F403

CACHE_DATABASE = 3


def cache_location(redis_url: str, database: int = CACHE_DATABASE) -> str:
    """The same server as ``redis_url``, another database: jobs found there came through the cache's LOCATION."""
    return urlparse(redis_url)._replace(path=f"/{database}").geturl()


CACHES = {
    # Django's own default, kept: a CACHES without "default" fails its system checks.
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "jobs": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": cache_location(os.environ["DJWORK_TEST_REDIS_URL"]),
    },
}
