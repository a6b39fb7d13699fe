"""System checks: every kind of bad settings.DJWORK value is an Error with a stable id and a hint."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse, urlunparse

import pytest
import redis as redis_py
from django.conf import settings
from django.core.checks import Error, Warning
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

import djwork
from djwork.redis import RedisLayer
from djwork.settings.checks import check_settings
from djwork.settings.conf import DEFAULTS, build_config
from tests.support.settings_values import BAD_VALUES, base_djwork

REDIS_CACHE = "django_redis.cache.RedisCache"


def run_checks(**overrides: Any) -> list[Error | Warning]:
    """check_settings() with tests/settings.py's DJWORK plus ``overrides``."""
    with override_settings(DJWORK={**base_djwork(), **overrides}):
        return check_settings()


def assert_only(errors: list[Error | Warning], check_id: str) -> None:
    """Exactly the expected id fires (no silent pass, no collateral noise), each with a real hint."""
    assert errors, f"expected {check_id}, got no errors"
    assert {error.id for error in errors} == {check_id}, [(e.id, e.msg) for e in errors]
    for error in errors:
        assert isinstance(error, Error)
        assert error.hint and error.hint.strip(), f"{error.id} has no hint: {error.msg}"


def test_default_test_settings_produce_no_errors():
    assert check_settings() == []


def test_missing_djwork_setting_means_defaults():
    with override_settings():
        del settings.DJWORK
        # DEFAULTS' localhost URL is only parsed here, never dialled.
        assert check_settings() == []


@pytest.mark.parametrize("value", [["REDIS_URL"], "redis://h/0", None, 5])
def test_djwork_not_a_dict(value):
    with override_settings(DJWORK=value):
        errors = check_settings()
    assert_only(errors, "djwork.E000")
    assert len(errors) == 1


@pytest.mark.parametrize("key", ["CONCURENCY", "concurrency", "Concurrency", "CONCURRENCY_"])
def test_unknown_key_near_miss_suggests_the_real_one(key):
    errors = run_checks(**{key: 5})
    assert_only(errors, "djwork.E001")
    assert repr(key) in errors[0].msg
    assert errors[0].hint == "Did you mean 'CONCURRENCY'?"


def test_unknown_key_far_from_any_lists_known_keys():
    errors = run_checks(ZEBRA_STRIPES=1)
    assert_only(errors, "djwork.E001")
    assert "Did you mean" not in errors[0].hint
    for key in DEFAULTS:
        assert key in errors[0].hint


@pytest.mark.parametrize("url", [
    "http://localhost:6379/0",        # bad scheme
    "localhost:6379",                 # no scheme at all (urlparse reads 'localhost' as one)
    "",
    "redis://:6379/0",                # no host
    "redis:///0",
    "redis://h:notaport/0",           # bad port
    "redis://h:70000/0",
    "redis://h:6379/abc",             # non-numeric db
    "redis://h:6379/0/1",
    "redis://h:6379/0?db=x",
    "unix://",                        # no socket path
    "unix:///tmp/redis.sock?db=one",
    5,
    None,
])
def test_bad_redis_url(url):
    errors = run_checks(REDIS_URL=url)
    assert_only(errors, "djwork.E002")
    assert "REDIS_URL" in errors[0].msg


@pytest.mark.parametrize("url", [
    "redis://localhost:6379/0",
    "redis://localhost",
    "rediss://:secret@redis.example.com:6380/2",
    "redis://[::1]:6379/3",
    "unix:///var/run/redis.sock?db=1",
])
def test_good_redis_url(url):
    assert run_checks(REDIS_URL=url) == []


def cache_djwork(alias: str, **extra: Any) -> dict[str, Any]:
    # No REDIS_URL: setting both is its own warning (W001), tested separately.
    djwork = {key: value for key, value in base_djwork().items() if key != "REDIS_URL"}
    return {**djwork, "CACHE": alias, **extra}


def caches_with(**aliases: dict[str, Any]) -> dict[str, Any]:
    return {**settings.CACHES, **aliases}


def test_cache_alias_unknown():
    with override_settings(DJWORK=cache_djwork("jobs")):
        errors = check_settings()
    assert_only(errors, "djwork.E003")
    assert "'jobs'" in errors[0].msg


def test_cache_alias_not_a_string():
    with override_settings(DJWORK=cache_djwork(["default"])):  # type: ignore[arg-type]
        assert_only(check_settings(), "djwork.E003")


def test_cache_alias_that_is_not_redis():
    caches = caches_with(local={"BACKEND": "django.core.cache.backends.locmem.LocMemCache"})
    with override_settings(CACHES=caches, DJWORK=cache_djwork("local")):
        errors = check_settings()
    assert_only(errors, "djwork.E003")
    assert "LocMemCache" in errors[0].msg


def test_cache_alias_without_location():
    with override_settings(CACHES=caches_with(jobs={"BACKEND": REDIS_CACHE}), DJWORK=cache_djwork("jobs")):
        assert_only(check_settings(), "djwork.E003")


def test_cache_alias_with_bad_location():
    caches = caches_with(jobs={"BACKEND": REDIS_CACHE, "LOCATION": "localhost:6379"})
    with override_settings(CACHES=caches, DJWORK=cache_djwork("jobs")):
        errors = check_settings()
    assert_only(errors, "djwork.E002")
    assert "CACHES['jobs']" in errors[0].msg


def test_cache_alias_and_redis_url_warns():
    caches = caches_with(jobs={"BACKEND": REDIS_CACHE, "LOCATION": "redis://h:6379/0"})
    with override_settings(CACHES=caches, DJWORK={**base_djwork(), "CACHE": "jobs"}):
        errors = check_settings()
    assert [(type(e), e.id) for e in errors] == [(Warning, "djwork.W001")]


def test_track_started_without_results_warns():
    # Results became opt-in: a project that turned TRACK_STARTED on would otherwise see STARTED nowhere, silently.
    with override_settings(DJWORK={**base_djwork(), "TRACK_STARTED": True}):
        errors = check_settings()
    assert [(type(e), e.id) for e in errors] == [(Warning, "djwork.W002")]
    assert "RESULTS" in errors[0].msg and "ignore_result=False" in errors[0].hint
    with override_settings(DJWORK={**base_djwork(), "TRACK_STARTED": True, "RESULTS": True}):
        assert check_settings() == []


def with_db(url: str, db: int) -> str:
    return urlunparse(urlparse(url)._replace(path=f"/{db}"))


@pytest.mark.parametrize("backend", [REDIS_CACHE, "django.core.cache.backends.redis.RedisCache"])
def test_working_cache_alias_is_where_djwork_connects(backend, raw_redis, redis_url):
    # Another db number than REDIS_URL's, so the write below proves which one djwork dialled.
    location = with_db(redis_url, 5)
    caches = caches_with(jobs={"BACKEND": backend, "LOCATION": location})
    with override_settings(CACHES=caches, DJWORK=cache_djwork("jobs")):
        assert check_settings() == []
        layer = RedisLayer(build_config())
        try:
            url, _options = layer.url_and_options()
            assert url == location
            layer.client().set("djwork-check-probe", "via-cache")
        finally:
            layer.close()
    db5 = redis_py.Redis.from_url(location)
    try:
        assert db5.get("djwork-check-probe") == b"via-cache"
        assert raw_redis.get("djwork-check-probe") is None
    finally:
        db5.delete("djwork-check-probe")
        db5.close()


@pytest.mark.parametrize(("key", "value", "check_id"), BAD_VALUES,
                         ids=[f"{key}={value!r}" for key, value, _ in BAD_VALUES])
def test_bad_value(key, value, check_id):
    errors = run_checks(**{key: value})
    assert_only(errors, check_id)
    assert any(key in error.msg for error in errors), [e.msg for e in errors]


def test_capsule_key_near_miss_suggests_the_real_one():
    errors = run_checks(CAPSULES={"single": {"QUEUES": ["serial"], "CONCURENCY": 1}})
    assert_only(errors, "djwork.E009")
    assert errors[0].hint == "Did you mean 'CONCURRENCY'?"


def test_orphan_threshold_follows_heartbeat_interval():
    assert_only(run_checks(HEARTBEAT_INTERVAL=30, ORPHAN_THRESHOLD=60), "djwork.E013")
    assert run_checks(HEARTBEAT_INTERVAL=30, ORPHAN_THRESHOLD=61) == []


GOOD_VALUES: list[tuple[str, Any]] = [
    ("CONCURRENCY", 1),
    ("QUEUES", [("critical", 3), ["default", 1], "low,0"]),
    ("QUEUES", ("default",)),
    ("CAPSULES", {"single": {"QUEUES": ["serial"], "CONCURRENCY": 1}}),
    ("CAPSULES", {"weighted": {"QUEUES": [("a", 2), ("b", 1)]}}),
    ("FETCH", "basic"),
    ("TIMEOUT", 0),
    ("CONNECT_TIMEOUT", 0.5),
    ("CLIENT_MIDDLEWARE", ["djwork.middleware.resolve_all", print]),
    ("REDIS_EVENT_HOOK", "logging.debug"),
    ("REDIS_EVENT_HOOK", print),
    ("ALIASES", {"HardWorker": "example.tasks.add"}),
    ("ORPHAN_THRESHOLD", 20.5),
    ("POOL_SIZE", 2),
    ("POOL_SIZE", None),
    ("LABELS", ("blue", "eu-west")),
    ("TAG", "myapp"),
    ("STRICT_ARGS", False),
    ("LOG_JOBS", False),
    ("CELERY_TRACE_LOG", True),
    ("POLL_INTERVAL_AVERAGE", None),
    ("POLL_INTERVAL_AVERAGE", 2.5),
    ("REDIS_OPTIONS", {"ssl_cert_reqs": "required"}),
    ("MAX_RETRIES", 0),
    ("MAX_RETRIES", 0),
    ("LEADER", False),
    ("PERIODIC", [{"cron": "@hourly", "job": "tests.jobs.add", "args": [1], "tz": "Europe/Berlin",
                   "catch_up": "all", "max_lookback": 3600, "overlap": False}]),
    ("TEST_CLOCK", {"speed": 20, "origin": 1.7e9, "skew": -20}),
]


@pytest.mark.parametrize(("key", "value"), GOOD_VALUES, ids=[f"{key}={value!r}" for key, value in GOOD_VALUES])
def test_good_value(key, value):
    assert run_checks(**{key: value}) == []


def test_every_default_is_valid_and_every_key_is_checked():
    """DEFAULTS pass, and each key has at least one bad value above (a new key needs a check and a test)."""
    with override_settings(DJWORK=dict(DEFAULTS)):
        assert check_settings() == []
    tested = {key for key, _value, _id in BAD_VALUES} | {"REDIS_URL", "CACHE"}
    assert set(DEFAULTS) - tested == set()


def test_check_ids_are_documented():
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "settings.md").read_text(encoding="utf-8")
    for key in DEFAULTS:
        assert f"`{key}`" in doc, key
    ids = ({check_id for _key, _value, check_id in BAD_VALUES} | {f"djwork.E00{n}" for n in range(4)}
           | {"djwork.W001", "djwork.W002", "djwork.W010", "djwork.W011"})
    for check_id in ids:
        assert check_id in doc, check_id


def test_manage_py_check_fails_on_a_bad_value():
    with override_settings(DJWORK={**base_djwork(), "CONCURRENCY": 0}), \
            pytest.raises(SystemCheckError) as raised:
        call_command("check")
    assert "djwork.E004" in str(raised.value)
    assert "processor threads per process" in str(raised.value)  # the hint is shown to the user


def test_build_config_survives_every_bad_value():
    crashed = []
    for key, value, _check_id in BAD_VALUES:
        with override_settings(DJWORK={**base_djwork(), key: value}):
            try:
                build_config()
            except Exception as error:
                crashed.append((key, value, type(error).__name__))
    assert crashed == []


@pytest.mark.parametrize(("soft", "hard"), [(60, 60), (90, 60)])
def test_a_soft_time_limit_not_below_the_hard_one_is_refused(soft, hard):
    errors = run_checks(SOFT_TIME_LIMIT=soft, TIME_LIMIT=hard)
    assert_only(errors, "djwork.E074")
    assert "SOFT_TIME_LIMIT" in errors[0].msg and "TIME_LIMIT" in errors[0].msg


def test_time_limits_below_one_another_or_alone_pass():
    assert run_checks(SOFT_TIME_LIMIT=50, TIME_LIMIT=60) == []
    assert run_checks(SOFT_TIME_LIMIT=50) == []
    assert run_checks(TIME_LIMIT=0.5) == []


def test_a_job_declared_with_its_soft_time_limit_past_its_time_limit_is_an_error_naming_it():
    from djwork import jobs as djwork_jobs
    from djwork.settings.checks import check_job_options

    assert check_job_options() == []
    djwork.job(soft_time_limit=2, time_limit=1, name="tests.checks_misordered")(lambda: None)
    try:
        errors = check_job_options()
    finally:
        djwork_jobs.registry.pop("tests.checks_misordered")
    assert_only(errors, "djwork.E075")
    assert errors[0].msg.startswith("tests.checks_misordered: soft_time_limit (2) is past time_limit (1)")
