"""Settings for the browser tests' runserver and worker subprocesses: the test settings, fast clocks."""

from tests.settings import *  # noqa: F403

DEBUG = True  # runserver serves the dashboard's static files
DJWORK = {
    **DJWORK,  # noqa: F405
    "HEARTBEAT_INTERVAL": 1,
    "ORPHAN_THRESHOLD": 3,
    "REAPER_INTERVAL": 1,
    "POLL_INTERVAL_AVERAGE": 0.5,
    "FETCH_TIMEOUT": 1,
    "TIMEOUT": 2,
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr", "formatter": "plain"}},
    "loggers": {"djwork": {"handlers": ["stderr"], "level": "INFO", "propagate": False}},
}
