"""gunicorn config of bench/embedded_gunicorn.py: one sync worker with djwork embedded, as a user sets it up."""

import os

from djwork.gunicorn import *  # noqa: F403 - post_worker_init, worker_exit, pre_request, post_request

bind = os.environ["BENCH_BIND"]
workers = 1
graceful_timeout = 15
loglevel = "warning"
control_socket_disable = True  # gunicorn >= 25: no control socket under $HOME
