"""Where djwork connects, said without secrets (djwork/redis/url.py): the dashboard's footer and error messages."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from django.urls import reverse

from djwork.redis.url import public_url


@pytest.mark.parametrize(("url", "shown"), [
    ("redis://:s3cret@cache.example:6380/2", "redis://cache.example:6380/2"),
    ("rediss://user:s3cret@cache.example/5", "rediss://cache.example:6379/5"),
    ("redis://localhost?db=3&password=s3cret", "redis://localhost:6379/3"),
    ("redis://[::1]:7000", "redis://[::1]:7000/0"),
    ("unix://:s3cret@/run/redis.sock?db=4&password=s3cret", "unix:///run/redis.sock?db=4"),
    ("redis+sentinel://:s3cret@s1:26379,s2:26379/mymaster/1?sentinel_password=s3cret",
     "redis+sentinel://s1:26379,s2:26379/mymaster/1"),
])
def test_public_url_drops_every_password(url, shown):
    assert public_url(url) == shown


def test_footer_names_the_redis_and_the_outage_page_too(admin_client, raw_redis, redis_url, settings):
    port = urlsplit(redis_url).port
    page = admin_client.get(reverse("djwork_dashboard:overview")).content.decode()
    assert f'Redis <code data-redis>redis://127.0.0.1:{port}/0</code>' in page
    settings.DJWORK = {**settings.DJWORK, "REDIS_URL": "redis://:s3cret@127.0.0.1:1/7", "REDIS_MAX_ATTEMPTS": 1}
    down = admin_client.get(reverse("djwork_dashboard:busy"))
    html = down.content.decode()
    assert down.status_code == 503 and "redis://127.0.0.1:1/7" in html and "s3cret" not in html
    assert "read-only" not in html  # a superuser is not told they can't act
