"""Settings for worker processes started by the tests (tests/helpers_worker.py): fast clocks, logs to stderr.

DJWORK_TEST_OVERRIDES (JSON object) is merged into DJWORK last, so one test
can change a single knob (TIMEOUT, MAX_ORPHANINGS, LOG_JOBS, ...) for the
workers it starts. Every log line carries the pid: a swarm writes several
processes into one log.
"""

import json
import os

from tests.settings import *  # noqa: F403

DJWORK = {
    **DJWORK,  # noqa: F405
    "HEARTBEAT_INTERVAL": 1,
    "ORPHAN_THRESHOLD": 3,
    "REAPER_INTERVAL": 1,
    "POLL_INTERVAL_AVERAGE": 0.5,
    "FETCH_TIMEOUT": 1,
    "TIMEOUT": 2,
    **json.loads(os.environ.get("DJWORK_TEST_OVERRIDES") or "{}"),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(process)d %(levelname)s %(name)s %(threadName)s %(message)s"},
                   # Celery's trace records (CELERY_TRACE_LOG) with their data dict, which a test reads back.
                   "celery_record": {"format": "celery-record %(name)s %(levelname)s data=%(data)r | %(message)s"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr", "formatter": "plain"},
                 "celery_records": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr",
                                    "formatter": "celery_record"}},
    # DJWORK_TEST_LOG_LEVEL=DEBUG: a test that counts lines waits on DEBUG ones (each retry) as its clock.
    "loggers": {"djwork": {"handlers": ["stderr"], "level": os.environ.get("DJWORK_TEST_LOG_LEVEL", "INFO"),
                           "propagate": False},
                # Propagating: Celery's suite (tests/support/celery_fixtures.py) reads them with caplog.
                "celery": {"handlers": ["celery_records"], "level": "INFO"}},
}

# Static files as docs/deployment.md serves them under gunicorn: collectstatic into
# STATIC_ROOT, WhiteNoise right after SecurityMiddleware. Only for the test that sets it.
if os.environ.get("DJWORK_TEST_STATIC_ROOT"):
    STATIC_ROOT = os.environ["DJWORK_TEST_STATIC_ROOT"]
    MIDDLEWARE = [*MIDDLEWARE]  # noqa: F405
    MIDDLEWARE.insert(MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
                      "whitenoise.middleware.WhiteNoiseMiddleware")
# tests/test_embedded_yield.py serves its own view (tests/urls_hold.py) from gunicorn.
if os.environ.get("DJWORK_TEST_URLCONF"):
    ROOT_URLCONF = os.environ["DJWORK_TEST_URLCONF"]
