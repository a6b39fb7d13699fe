"""A failed job's log line (#18 item 12): WARNING with the error and its outcome; the traceback when it is final."""

from __future__ import annotations

import re

from tests import worker_jobs
from tests.helpers_worker import wait_until


def test_failures_log_a_warning_and_the_final_one_its_traceback(workers, raw_redis):
    worker = workers.start("-q", "default", "-c", "2")
    worker.identity(raw_redis)
    retried = worker_jobs.always_fail.delay("again").jid
    buried = worker_jobs.always_fail.set(retry=0).delay("final").jid
    wait_until(lambda: raw_redis.zcard("retry") == 1 and raw_redis.zcard("dead") == 1, 30, "one retry, one dead")
    log = worker.wait_log(f"fail jid={buried}", 10)
    retry_line = re.search(rf"^.* (\w+) djwork .*fail jid={retried} .*$", log, re.M)
    assert retry_line and retry_line.group(1) == "WARNING"
    assert retry_line.group(0).endswith("error=RuntimeError: always_fail again fails -> retry")
    dead_line = re.search(rf"^.* (\w+) djwork [^\n]*fail jid={buried} [^\n]*-> dead\n(Traceback .*?)(?=\n\d{{4}}-|\Z)",
                          log, re.M | re.S)
    assert dead_line and dead_line.group(1) == "WARNING"
    assert 'in always_fail' in dead_line.group(2) and "RuntimeError: always_fail final fails" in dead_line.group(2)
    after_retry = log.split(retry_line.group(0), 1)[1].split("\n", 2)[1]
    assert not after_retry.startswith("Traceback")  # a retry is one line
    assert re.search(rf"INFO djwork .*start jid={retried}", log)  # start/done stay at INFO
