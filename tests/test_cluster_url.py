"""The ``redis+cluster://`` URL (djwork/redis/cluster_url.py): parsed, checked with a hint, shown without secrets."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings
from redis.exceptions import ClusterDownError, ResponseError, TryAgainError

from djwork import api
from djwork import redis as redis_layer
from djwork.redis.cluster import scan_page
from djwork.redis.cluster_url import ClusterUrl, cluster_url, is_cluster_url
from djwork.redis.connections import is_failover_reply
from djwork.redis.url import public_url
from djwork.settings.checks import check_settings
from djwork.settings.kinds import Invalid


@pytest.mark.parametrize(("url", "parsed"), [
    ("redis+cluster://h1:7000,h2:7000,h3:7000/0",
     ClusterUrl((("h1", 7000), ("h2", 7000), ("h3", 7000)))),
    ("redis+cluster://h1:7000", ClusterUrl((("h1", 7000),))),
    ("redis+cluster://h1", ClusterUrl((("h1", 6379),))),
    ("rediss+cluster://user:s%3Acret@h1:7000,[::1]:7001/", ClusterUrl((("h1", 7000), ("::1", 7001)), True, "user",
                                                                      "s:cret")),
    ("REDIS+CLUSTER://:pw@h1:7000/0?socket_timeout=2.5",
     ClusterUrl((("h1", 7000),), False, None, "pw", {"socket_timeout": 2.5})),
])
def test_cluster_url_parses(url, parsed):
    assert is_cluster_url(url)
    assert cluster_url(url) == parsed
    with override_settings(DJWORK={**settings.DJWORK, "REDIS_URL": url}):
        assert check_settings() == []


@pytest.mark.parametrize(("url", "problem"), [
    ("redis+cluster:///0", "at least one node"),
    ("redis+cluster://h1:7000,,h2:7000/0", "without an empty host"),
    ("redis+cluster://h1:port/0", "with a TCP port"),
    ("redis+cluster://h1:70000/0", "with a TCP port"),
    ("redis+cluster://h1:7000/3", "database 0 or none"),
    ("redis+cluster://h1:7000/0?password=x", "query options are among socket_timeout"),
    ("redis+cluster://h1:7000/0?socket_timeout=soon", "socket_timeout is a number"),
    ("redis+cluster://h1:7000/0?socket_timeout=0", "a number > 0"),
])
def test_a_malformed_cluster_url_is_a_check_error_with_the_form_as_hint(url, problem):
    with pytest.raises(Invalid, match=problem):
        cluster_url(url)
    with override_settings(DJWORK={**settings.DJWORK, "REDIS_URL": url}):
        errors = check_settings()
    assert [error.id for error in errors] == ["djwork.E002"], [(error.id, error.msg) for error in errors]
    assert problem in errors[0].msg and "redis+cluster://" in errors[0].hint


def test_only_the_cluster_schemes_are_cluster_urls():
    assert not is_cluster_url("redis://h1:7000/0")
    assert not is_cluster_url("redis+sentinel://s1:26379/mymaster/0")
    assert not is_cluster_url(None)


@pytest.mark.parametrize(("url", "shown"), [
    ("redis+cluster://:s3cret@h1:7000,h2:7000/0", "redis+cluster://h1:7000,h2:7000/0"),
    ("rediss+cluster://user:s3cret@h1:7000", "rediss+cluster://h1:7000/0"),
])
def test_public_url_of_a_cluster_drops_the_password(url, shown):
    assert public_url(url) == shown


def test_clusterdown_and_tryagain_are_refusals_the_policy_may_retry():
    # Both are sent by a cluster node that ran nothing (a slot failing over or moving): like READONLY.
    assert is_failover_reply(ClusterDownError("The cluster is down"))
    assert is_failover_reply(TryAgainError("Multiple keys request during rehashing of slot"))
    assert is_failover_reply(ResponseError("CLUSTERDOWN Hash slot not served"))
    assert not is_failover_reply(ResponseError("CROSSSLOT Keys in request don't hash to the same slot"))


def test_scan_page_on_one_server_is_scan_with_its_own_cursor(raw_redis):
    raw_redis.mset({f"unique:{index}": "x" for index in range(30)} | {"other": "y"})
    seen, cursor = [], "0"
    while True:
        found, cursor = scan_page(raw_redis, cursor, "unique:*", 5)
        seen.extend(found)
        assert cursor.isdigit()
        if cursor == "0":
            break
    assert sorted(set(seen)) == sorted(f"unique:{index}".encode() for index in range(30))


def test_a_cluster_no_node_of_which_answers_is_redis_unavailable_to_the_api():
    # redis-py raises a bare RedisClusterException (no RedisError) when it can't read the slot map:
    # it must reach the dashboard as the "Redis is unavailable" it handles, not as a crash.
    with override_settings(DJWORK={**settings.DJWORK, "REDIS_URL": "redis+cluster://127.0.0.1:1/0",
                                   "REDIS_MAX_ATTEMPTS": 1}):
        redis_layer.reset()
        with pytest.raises(api.RedisUnavailable, match="no node of the cluster answered"):
            api.Stats.fetch()
    redis_layer.reset()
