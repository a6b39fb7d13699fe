"""Which private redis-server a test process uses: its own, started at import by tests/settings.py.

Under pytest-xdist every worker process is a pytest process of its own, and
each must have a server of its own, or two tests running at once would flush
each other's keys. The environment says whose server DJWORK_TEST_REDIS_URL
is (OWNER_ENV): a process started by a test (runworkers, runserver, Ruby)
inherits both from its pytest process and uses that server; an xdist worker
that inherited another process's server (its controller's) starts its own
instead, and so does any process given a URL set by hand, with no owner.
"""

from __future__ import annotations

import atexit
import os
import tempfile

URL_ENV = "DJWORK_TEST_REDIS_URL"
OWNER_ENV = "DJWORK_TEST_REDIS_OWNER"  # the pytest process (xdist worker id, or "main") the server belongs to
DATABASE_ENV = "DJWORK_EXAMPLE_DB"
# Set to 1: each pytest process gets a 3+3 Redis Cluster instead (tests/support/redis_cluster.py), and the
# suite's URL is its redis+cluster:// URL: how docs/cluster.md measures which tests pass against a cluster.
CLUSTER_ENV = "DJWORK_TEST_CLUSTER"


def this_pytest_process() -> str:
    """"gw0", "gw1", ... in an xdist worker (and in every process it starts), else "main"."""
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def needs_own_server() -> bool:
    # A URL comes with its owner only when a test process (or bench/chaos.py) started that server: one
    # exported by hand, with no owner, is never used, since every test flushes the server it is given.
    if not os.environ.get(URL_ENV) or not os.environ.get(OWNER_ENV):
        return True
    # Only an xdist worker can hold a server that is not its own (its controller's, or one set by
    # hand); any other process uses the one it was given, so a subprocess started with a trimmed
    # environment never starts a server of its own by mistake.
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return worker is not None and os.environ.get(OWNER_ENV) != worker


def ensure_private_server() -> str:
    """The URL of this pytest process's own server, started (and stopped at exit) here if it has none yet.

    Set in the environment before any test starts a subprocess, so every
    worker, live server and Ruby process a test starts reaches the same one.
    """
    if needs_own_server():
        if os.environ.get(CLUSTER_ENV) == "1":
            from tests.support.redis_cluster import LoopbackCluster

            server = LoopbackCluster().start()
            url = server.url()
        else:
            from djwork.testing.redis_server import RedisServer

            server = RedisServer().start()
            url = server.url
        atexit.register(server.stop)
        os.environ[URL_ENV] = url
        os.environ[OWNER_ENV] = this_pytest_process()
        # The on-disk database the worker subprocesses open: one per pytest process as well.
        os.environ[DATABASE_ENV] = os.path.join(tempfile.gettempdir(), f"djwork-test-{os.getpid()}.db")
    return os.environ[URL_ENV]
