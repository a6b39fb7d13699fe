"""gunicorn config for tests/test_embedded.py: the djwork integration, as a user adds it, plus test knobs."""

import os

from djwork.gunicorn import *  # noqa: F403 - post_worker_init, worker_exit: the one line users add

bind = os.environ.get("DJWORK_TEST_BIND", "127.0.0.1:0")
workers = 1
graceful_timeout = 15
timeout = 30
loglevel = "info"
# gunicorn >= 25 opens a control socket under $HOME by default; parallel runs would share it.
control_socket_disable = True
# tests/test_embedded_yield.py: djwork.gunicorn.EmbeddedWorker.
worker_class = os.environ.get("DJWORK_TEST_WORKER_CLASS") or "sync"
