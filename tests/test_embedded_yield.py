"""EMBEDDED_YIELD: an embedded worker starts no job while its gunicorn worker serves a request (yielding.py)."""

from __future__ import annotations

import select
import socket
import threading

from tests import worker_jobs
from tests.helpers_worker import blocked_takers, counts, free_port, http_get, in_progress_items, wait_until


def takers_waiting(raw_redis) -> None:
    """The worker waits for jobs in BLMOVE, so a job lands in its in-progress list even while its threads
    hold back; a fetch by its dispatcher would itself wait for the request (none would be taken)."""
    wait_until(lambda: blocked_takers(raw_redis), 30, "the embedded worker's takers waiting for jobs")


def test_jobs_taken_during_a_request_start_only_after_it_returns(workers, raw_redis, monkeypatch):
    monkeypatch.setenv("DJWORK_TEST_URLCONF", "tests.urls_hold")
    port = free_port()
    server = workers.gunicorn(port, overrides={"EMBEDDED_YIELD": 120, "LOG_JOBS": False})
    wait_until(lambda: raw_redis.scard("processes") == 1, 30, "the embedded worker to register")
    takers_waiting(raw_redis)
    answers: list[tuple[int | None, str]] = []
    request = threading.Thread(target=lambda: answers.append(http_get(port, "/hold", timeout=100)), daemon=True)
    request.start()
    wait_until(lambda: raw_redis.get("t:held") == b"1", 30, "the request in flight")

    worker_jobs.record.delay_many([(index,) for index in range(5)])
    # The worker's takers move jobs to its in-progress list at once; their threads then wait for the request.
    wait_until(lambda: any(in_progress_items(raw_redis).values()), 30, "a job taken by the embedded worker")
    raw_redis.lpush("t:release", 1)
    request.join(100)
    assert answers == [(200, "released 0")], server.log()[-2000:]

    wait_until(lambda: len(counts(raw_redis)) == 5, 30, "every job run once the request returned")
    assert set(counts(raw_redis).values()) == {1}


def test_max_jobs_per_second_spreads_the_starts_over_the_cap(workers, raw_redis):
    cap, jobs = 50, 101
    port = free_port()
    workers.gunicorn(port, overrides={"EMBEDDED_MAX_JOBS_PER_SECOND": cap, "LOG_JOBS": False})
    wait_until(lambda: raw_redis.scard("processes") == 1, 30, "the embedded worker to register")
    seconds, microseconds = raw_redis.time()
    enqueued = seconds + microseconds / 1e6
    worker_jobs.server_time.delay_many([(index,) for index in range(jobs)])
    wait_until(lambda: raw_redis.llen(worker_jobs.TIMES) == jobs, 60, "every job run")
    # A bound that delays can only help, so no timing makes it flaky: the worker admits its n-th job
    # (n - 1) / cap seconds after its first at the earliest, the first no earlier than the enqueue, and
    # each job reads the clock after its admission. Uncapped, 101 such jobs take milliseconds here.
    last = max(float(value) for value in raw_redis.lrange(worker_jobs.TIMES, 0, -1))
    assert last - enqueued >= (jobs - 1) / cap - 0.001


def test_embedded_worker_class_holds_jobs_from_the_connection_not_from_pre_request(workers, raw_redis,
                                                                                  monkeypatch):
    monkeypatch.setenv("DJWORK_TEST_URLCONF", "tests.urls_hold")
    monkeypatch.setenv("DJWORK_TEST_WORKER_CLASS", "djwork.gunicorn.EmbeddedWorker")
    port = free_port()
    server = workers.gunicorn(port, overrides={"EMBEDDED_YIELD": 120, "LOG_JOBS": False})
    wait_until(lambda: raw_redis.scard("processes") == 1, 30, "the embedded worker to register")
    takers_waiting(raw_redis)
    # Connected, not a byte sent: waiting to be accepted (the listener watch), then accepted and
    # parsing (EmbeddedWorker): gunicorn's pre_request has not run, so only those two hold the jobs.
    with socket.create_connection(("127.0.0.1", port), timeout=60) as connection:
        worker_jobs.record.delay_many([(index,) for index in range(5)])
        wait_until(lambda: any(in_progress_items(raw_redis).values()), 30, "a job taken by the embedded worker")
        connection.sendall(b"GET /hold HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        wait_until(lambda: raw_redis.get("t:held") == b"1", 30, "the request in its view")
        raw_redis.lpush("t:release", 1)
        answer = b""
        while chunk := connection.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), server.log()[-2000:]
    assert answer.endswith(b"released 0"), answer  # no job completed between the connect and the view's read
    wait_until(lambda: len(counts(raw_redis)) == 5, 30, "every job run once the request returned")


def test_the_gate_counts_a_connection_waiting_on_a_watched_listener_until_it_is_accepted():
    from djwork.worker.yielding import RequestGate

    gate = RequestGate(max_pause=1)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        gate.watch([listener])
        assert not gate.busy
        with socket.create_connection(listener.getsockname()):
            # Readable once the kernel has queued the connection: wait for that, then the gate must see it.
            select.select([listener], [], [], 10)
            assert gate.busy
            accepted, _ = listener.accept()
            accepted.close()
            assert not gate.busy  # accepted: from here the host's own count (EmbeddedWorker) takes over
        listener.close()
        assert not gate.busy  # a closed listener stops the watch instead of raising before every job
    assert gate.listeners == []
