"""Run a djwork worker embedded in every gunicorn worker process.

One line, either on the command line::

    gunicorn -c python:djwork.gunicorn myproject.wsgi

or in your own ``gunicorn.conf.py`` (keeps your other settings)::

    from djwork.gunicorn import *  # noqa: F403  (post_worker_init, worker_exit, pre_request, post_request)

If your config already defines these hooks, call ours from yours:
``djwork.gunicorn.post_worker_init(worker)`` / ``djwork.gunicorn.worker_exit(server, worker)`` (and
``pre_request(worker, req)`` / ``post_request(worker, req, environ, resp)``).

Why these two hooks:

* ``post_worker_init`` runs in the worker *after* the fork and after the
  WSGI app (hence Django) is loaded: threads and Redis sockets made in the
  master (``preload_app``) would not survive the fork, and each worker
  needs its own identity. It returns at once; the worker boots on a
  background thread, so a Redis outage never holds up serving.
* ``worker_exit`` runs in the worker once gunicorn has stopped it (TERM,
  ``max_requests`` recycling, INT/QUIT). The drain must end inside
  gunicorn's ``graceful_timeout``, after which the master SIGKILLs the
  worker; we keep a margin so the heartbeat clear and requeue still land.
  (A SIGKILLed worker loses nothing: orphan recovery returns its jobs.)

* ``pre_request`` / ``post_request`` count the requests in flight, which
  the worker steps aside for when ``EMBEDDED_YIELD`` is set
  (djwork/worker/yielding.py); without it they cost a lookup.

With ``EMBEDDED_YIELD``, prefer this module's sync worker class too::

    gunicorn -c python:djwork.gunicorn --worker-class djwork.gunicorn.EmbeddedWorker myproject.wsgi

``pre_request`` runs only once the request was accepted and parsed, each
step waiting for the GIL behind the job threads. ``post_worker_init``
hands the listening sockets to the worker, so a connection waiting to be
accepted already pauses it, and ``EmbeddedWorker`` counts the request from
its accept to its close, so the parse is covered too.

Nothing here imports Django at module level: gunicorn reads this file in the
master before any app is loaded.
"""

from __future__ import annotations

from typing import Any

from gunicorn.workers.sync import SyncWorker

__all__ = ["post_request", "post_worker_init", "pre_request", "worker_exit"]

# Seconds of gunicorn's graceful_timeout kept back from the drain for the
# teardown after it (requeue, heartbeat clear, joins).
EXIT_MARGIN = 3.0


def post_worker_init(worker: Any) -> None:
    from djwork import embedded

    embedded.start()
    # A connection waiting on these counts as a request in flight (EMBEDDED_YIELD; worker/yielding.py).
    embedded.watch_listeners(getattr(worker, "sockets", ()))


def worker_exit(server: Any, worker: Any) -> None:
    # Also called in the *master* (for a worker that vanished): embedded.stop()
    # is a no-op in a process that never started a worker.
    from djwork import embedded

    instance = embedded.current()
    if instance is None:
        return
    timeout = instance.config.timeout
    graceful = getattr(getattr(worker, "cfg", None), "graceful_timeout", None)
    if graceful is not None:
        timeout = max(0.0, min(timeout, float(graceful) - EXIT_MARGIN))
    embedded.stop(timeout=timeout)


def pre_request(worker: Any, req: Any) -> None:
    from djwork import embedded

    embedded.request_started()


def post_request(worker: Any, req: Any, environ: Any = None, resp: Any = None) -> None:
    # gunicorn runs post_request even when the app raised, so every started request is finished.
    from djwork import embedded

    embedded.request_finished()


class EmbeddedWorker(SyncWorker):
    """gunicorn's sync worker, counting each connection as a request in flight from its accept to its close.

    ``worker_class = "djwork.gunicorn.EmbeddedWorker"``: with ``EMBEDDED_YIELD``
    the embedded worker then starts no job while the request is parsed, not
    only from ``pre_request`` on.
    """

    def accept(self, listener: Any) -> None:
        # Counted before the accept, not after it: from the moment the connection leaves the
        # listener's queue (where the listener watch saw it) there is no instant it is not counted.
        # gunicorn also calls this when nothing waits (it raises EAGAIN): a count of a few microseconds.
        from djwork import embedded

        embedded.request_started()
        try:
            super().accept(listener)  # accept, then handle: parse, the app, the response, close
        finally:
            embedded.request_finished()
