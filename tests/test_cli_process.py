"""``manage.py djwork`` as a process of its own, against real workers: exit codes, a refusal with no terminal,
quiet and stop reaching a real worker, Redis down, and ``status --watch`` under a pseudo-terminal."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import time

from djwork.testing.redis_server import free_port
from tests import batch_jobs
from tests.browser import seed
from tests.helpers_worker import wait_until
from tests.support.cli import ROOT, command_env, command_line
from tests.support.signals import assert_quiet_with_the_beat_that_took_the_signal, interruptible

TIMEOUT = 60  # a command's own run is about a second; the bound only keeps a hang from stalling the suite


def run(*args: str, **overrides) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command_line(*args), cwd=ROOT, env=command_env(**overrides), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=TIMEOUT)


def test_status_exits_0_when_healthy_and_1_when_a_queue_has_jobs_nobody_listens_to(workers, raw_redis):
    worker = workers.start("-q", "default")
    identity = worker.identity(raw_redis)
    healthy = run("status", "--json")
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    status = json.loads(healthy.stdout)
    assert status["healthy"] and status["processes"] == 1 and status["warnings"] == []

    seed.push(raw_redis, seed.job(queue="reports"), queue="reports")
    warned = run("status", "--json")
    assert warned.returncode == 1, warned.stderr
    assert [(w["kind"], w["queue"]) for w in json.loads(warned.stdout)["warnings"]] == [("no-listener", "reports")]
    text = run("status")
    assert text.returncode == 1 and "Queue reports has 1 job but no running process listens to it." in text.stdout
    assert "Processes  1 (1 running, 0 quiet)" in text.stdout and identity


def test_quiet_is_refused_without_a_terminal_then_reaches_the_worker_and_stop_ends_it(workers, raw_redis):
    worker = workers.start("-q", "default")
    identity = worker.identity(raw_redis)
    refused = run("quiet", identity)
    assert refused.returncode == 2
    assert refused.stdout == "" and refused.stderr.count("\n") == 1 and "pass --yes" in refused.stderr
    assert not raw_redis.exists(f"{identity}-signals") and raw_redis.hget(identity, "quiet") != b"true"

    assert run("quiet", identity, "--yes").returncode == 0
    assert_quiet_with_the_beat_that_took_the_signal(raw_redis, identity)
    assert run("stop", identity, "--yes").returncode == 0
    assert worker.wait_exit(30) == 0


def test_a_newcomer_retries_every_dead_job_of_one_class_and_the_worker_runs_them_again(workers, raw_redis):
    other = seed.failed(seed.job("Mail::Send"), count=25)
    seed.zadd(raw_redis, "dead", other, time.time())
    workers.start("-q", "default")
    for key in ("a", "b"):
        batch_jobs.dies.delay(key)  # retry=0: one run, then dead
    wait_until(lambda: raw_redis.zcard("dead") == 3, TIMEOUT, "both jobs dead after their first run")

    listed = run("jobs", "dead", "--class", "tests.batch_jobs.dies", "--json")
    assert sorted(json.loads(line)["args"][0] for line in listed.stdout.splitlines()) == ["a", "b"]
    refused = run("retry", "dead", "--class", "tests.batch_jobs.dies")
    assert refused.returncode == 2 and "Retry 2 jobs of class tests.batch_jobs.dies in dead" in refused.stderr
    retried = run("retry", "dead", "--class", "tests.batch_jobs.dies", "--yes")
    assert retried.returncode == 0 and retried.stdout == "Retried 2 jobs in dead.\n", retried.stderr

    wait_until(lambda: raw_redis.hgetall(batch_jobs.RUNS) == {b"a": b"2", b"b": b"2"}, TIMEOUT,
               "each retried job to run a second time")
    wait_until(lambda: raw_redis.zcard("dead") == 3, TIMEOUT, "both dead again after their second run")
    assert other["jid"] in {json.loads(raw)["jid"] for raw in raw_redis.zrange("dead", 0, -1)}


def test_redis_down_is_one_line_naming_it_without_the_password_and_exit_2():
    url = f"redis://:s3cret@127.0.0.1:{free_port()}/0"  # a port nothing listens on
    for args in (("status",), ("retry", "dead", "--all", "--yes"), ("result", "abc")):
        down = subprocess.run(command_line(*args), cwd=ROOT, env=command_env(REDIS_URL=url),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT)
        assert down.returncode == 2, down
        assert down.stdout == ""
        assert down.stderr.startswith(f"djwork: Redis at {url.replace(':s3cret@', '')} is unreachable: ")
        assert down.stderr.count("\n") == 1 and "s3cret" not in down.stderr and "Traceback" not in down.stderr


def test_status_watch_under_a_terminal_refreshes_in_place_until_ctrl_c_then_exits_0(raw_redis):
    seed.push(raw_redis, seed.job())
    controller, terminal = pty.openpty()
    process = subprocess.Popen(command_line("status", "--watch", "--interval", "0.2"), cwd=ROOT, env=command_env(),
                               stdin=terminal, stdout=terminal, stderr=terminal, preexec_fn=interruptible)
    os.close(terminal)
    seen = bytearray()

    def frames() -> int:
        ready, _, _ = select.select([controller], [], [], 0.2)
        if ready:
            try:
                seen.extend(os.read(controller, 65536))
            except OSError:  # the command ended and closed the terminal
                pass
        return seen.count(b"refreshing every 0.2s; Ctrl-C quits")

    try:
        wait_until(lambda: frames() >= 3, TIMEOUT, "3 refreshes of status --watch")
        assert seen.count(b"\x1b[H\x1b[J") >= 3  # each frame redrawn in place
        assert b"default  1" in seen
        process.send_signal(signal.SIGINT)  # what Ctrl-C at the terminal sends
        assert process.wait(TIMEOUT) == 0
        frames()
        assert b"Traceback" not in seen and b"KeyboardInterrupt" not in seen
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(controller)


def test_a_reader_that_leaves_early_ends_the_listing_quietly(raw_redis):
    pipe = raw_redis.pipeline()
    for n in range(2000):  # far more JSON than a pipe holds, so the command is still writing when it closes
        pipe.zadd("dead", {seed.dumps(seed.failed(seed.job(args=[n]))): time.time() - n})
    pipe.execute()
    process = subprocess.Popen(command_line("jobs", "dead", "--limit", "2000", "--json"), cwd=ROOT,
                               env=command_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    first = process.stdout.readline()
    process.stdout.close()  # `| head -1`
    assert json.loads(first)["where"] == "dead"
    assert process.wait(TIMEOUT) == 0
    assert process.stderr.read() == b""
    process.stderr.close()
