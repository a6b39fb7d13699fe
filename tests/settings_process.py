"""Settings for the process-model tests (swarm, embedded gunicorn, health probes): fast clocks, logs to stderr.

Orphan recovery has to happen within seconds, so the heartbeat, orphan
threshold and reaper run on a one-second scale. DJWORK_TEST_OVERRIDES (a
JSON object) is merged into DJWORK last.
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
    "TIMEOUT": 3,
    **json.loads(os.environ.get("DJWORK_TEST_OVERRIDES") or "{}"),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(process)d %(levelname)s %(name)s %(threadName)s %(message)s"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr", "formatter": "plain"}},
    "loggers": {"djwork": {"handlers": ["stderr"], "level": "INFO", "propagate": False}},
}
