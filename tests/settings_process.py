"""Settings for the process-model tests (swarm, embedded gunicorn, health probes).

The fast clocks of tests/settings_worker.py, a longer drain, and the pid in
every log line (a swarm writes several processes into one log).
"""

import json
import os

from tests.settings_worker import *  # noqa: F403

DJWORK = {
    **DJWORK,  # noqa: F405
    "TIMEOUT": 3,
    **json.loads(os.environ.get("DJWORK_TEST_OVERRIDES") or "{}"),
}
LOGGING["formatters"]["plain"]["format"] = (  # noqa: F405
    "%(asctime)s %(process)d %(levelname)s %(name)s %(threadName)s %(message)s")
