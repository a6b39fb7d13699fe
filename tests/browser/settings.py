"""Settings for the browser tests' runserver and worker subprocesses: the fast worker clocks."""

from tests.settings_worker import *  # noqa: F403

DEBUG = True  # runserver serves the dashboard's static files
