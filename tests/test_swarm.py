"""``runworkers --processes N``: a supervising parent, respawn, orphan recovery, drain, orphan guard, memory limit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests import process_jobs
from tests.helpers_worker import identities, in_progress_items, marked_pids, pid_alive, wait_until

TIMEOUT = 3  # the drain deadline (DJWORK TIMEOUT) every swarm here runs with
PARENT_DUMP = "WARNING djwork.worker MainThread djwork swarm parent thread dump:"  # the log line, not a source line


def _children_by_identity(raw_redis, swarm, count: int) -> dict[str, int]:
    """identity -> pid of the swarm's live children, once ``count`` of them registered."""

    def ready():
        if not swarm.alive():
            raise AssertionError(f"swarm exited ({swarm.process.returncode}):\n{swarm.log()}")
        children = set(swarm.children())
        found = {identity: info["pid"] for identity, info in identities(raw_redis).items()
                 if info["pid"] in children}
        return found if len(found) == count else None

    return wait_until(ready, 20, f"{count} swarm children to register")


def test_respawn_recovers_in_flight_jobs_then_drains_on_term(workers, raw_redis):
    swarm = workers.start("--processes", "2", "-c", "2", overrides={"TIMEOUT": TIMEOUT}, label="swarm")
    first = _children_by_identity(raw_redis, swarm, 2)
    assert len(set(first.values())) == 2
    for identity, pid in first.items():
        info = identities(raw_redis)[identity]
        assert info["pid"] == pid and info["embedded"] is False
        # Each child is a worker in its own right: its own identity, its parent the swarm.
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            title = cmdline.read().decode(errors="replace")
        assert identity in title and "busy]" in title, title

    # Four slow jobs fill both children's two slots; quick ones queue behind them.
    slow_keys = [f"slow-{n}" for n in range(4)]
    for key in slow_keys:
        process_jobs.slow.delay(key, 2.5)
    quick_keys = [f"quick-{n}" for n in range(10)]
    process_jobs.record.delay_many([(key,) for key in quick_keys])
    wait_until(lambda: len(raw_redis.hgetall(process_jobs.STARTS)) == 4, 10, "all four slow jobs running")

    victim_identity, victim = sorted(first.items())[0]
    # Two jobs in flight in the child we kill (the work hash shows them from its next beat on).
    wait_until(lambda: raw_redis.hlen(f"{victim_identity}:work") == 2, 20, "the victim's work hash")
    os.kill(victim, signal.SIGKILL)

    # The parent forks a replacement at once: a new identity, a new pid.
    def replaced():
        now = _children_by_identity(raw_redis, swarm, 2)
        return now if victim not in now.values() else None

    second = wait_until(replaced, 15, "a respawned child")
    new_identities = set(second) - set(first)
    assert len(new_identities) == 1
    assert "died (signal 9)" in swarm.log()

    # Its two in-flight jobs come back through orphan recovery and run again; nothing lost, nothing doubled.
    everything = slow_keys + quick_keys
    wait_until(lambda: all(raw_redis.hget(process_jobs.COUNTS, key) == b"1" for key in everything), 30,
               "every job to complete")
    starts = {key.decode(): int(value) for key, value in raw_redis.hgetall(process_jobs.STARTS).items()}
    assert sorted(starts.values()) == [1, 1, 2, 2], starts  # the two killed mid-run ran a second time
    # Nothing runs a third time: a third run would come from an in-progress list recovered twice, so every
    # list is empty (the victim's recovered, every ack applied) and jobs queued after have run, first.
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 20, "every in-progress list empty")
    sentinels = [f"sentinel-{n}" for n in range(4)]
    process_jobs.record.delay_many([(key,) for key in sentinels])
    wait_until(lambda: all(raw_redis.hget(process_jobs.COUNTS, key) == b"1" for key in sentinels), 20,
               "jobs queued after the recovery")
    counts = {key.decode(): int(value) for key, value in raw_redis.hgetall(process_jobs.COUNTS).items()}
    assert counts == dict.fromkeys(everything + sentinels, 1)

    # TERM to the parent drains every child; each exits 0, and the parent too, within the timeout.
    live_children = sorted(second.values())
    swarm.send(signal.SIGTERM)
    assert swarm.wait_exit(TIMEOUT + 20) == 0
    log = swarm.log()
    for pid in live_children:
        assert f"child {pid} exited (code 0)" in log
        assert not pid_alive(pid)
    assert not set(second) & {member.decode() for member in raw_redis.smembers("processes")}


def test_children_exit_when_the_parent_is_killed(workers, raw_redis):
    swarm = workers.start("--processes", "2", "-c", "1", overrides={"TIMEOUT": TIMEOUT}, label="swarm")
    children = sorted(_children_by_identity(raw_redis, swarm, 2).values())
    # The harness must find children that set their process title (which overwrites what
    # /proc/<pid>/environ shows): missed, one outlived its test and took the next test's jobs.
    def titled(pid: int) -> bool:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().startswith(b"djwork ")

    wait_until(lambda: all(titled(pid) for pid in [swarm.pid, *children]), 20, "the processes' titles")
    assert {swarm.pid, *children} <= set(marked_pids(workers.marker))
    swarm.process.kill()  # SIGKILL: no drain, no forwarding; only the orphan guard is left
    swarm.wait_exit(20)
    # Nothing else would ever stop them: exiting at all is the orphan guard at work.
    wait_until(lambda: not any(pid_alive(pid) for pid in children), 30, "orphaned children to exit")
    log = swarm.log()
    for pid in children:
        # A graceful stop (heartbeat cleared), not a crash.
        assert f"{pid} INFO djwork.worker MainThread djwork: received TERM" in log
    assert not raw_redis.smembers("processes") - {b""}


def test_memory_limit_restarts_a_child_gracefully(workers, raw_redis):
    # 1 MB: every child is over the limit at the first check (every 5 s).
    swarm = workers.start("--processes", "1", "--max-memory", "1", "-c", "1", overrides={"TIMEOUT": TIMEOUT},
                          label="swarm")
    (first_identity, first_pid), = _children_by_identity(raw_redis, swarm, 1).items()
    swarm.wait_log("restarting it gracefully", 20)
    swarm.wait_log(f"child {first_pid} exited (code 0) after its memory restart", 20)
    assert not pid_alive(first_pid)
    assert f"{first_pid} INFO djwork.worker MainThread djwork: received TERM" in swarm.log()

    def replaced():
        found = _children_by_identity(raw_redis, swarm, 1)
        return found if first_identity not in found else None

    wait_until(replaced, 20, "a replacement child")
    assert not raw_redis.sismember("processes", first_identity)
    swarm.send(signal.SIGTERM)
    assert swarm.wait_exit(TIMEOUT + 20) == 0


def test_tstp_is_forwarded_and_a_quiet_swarm_does_not_respawn(workers, raw_redis):
    swarm = workers.start("--processes", "2", "-c", "1", overrides={"TIMEOUT": TIMEOUT}, label="swarm")
    children = _children_by_identity(raw_redis, swarm, 2)
    swarm.send(signal.SIGTSTP)
    wait_until(lambda: all(raw_redis.hget(identity, "quiet") == b"true" for identity in children), 20,
               "every child quiet")
    victim = sorted(children.values())[0]
    os.kill(victim, signal.SIGKILL)
    swarm.wait_log("not replacing the child of slot", 20)
    # The supervisor handles a TTIN (a thread dump) between two passes over its children: after the
    # second dump it has had at least one more pass in which a respawn would have happened.
    for dumps in (1, 2):
        swarm.send(signal.SIGTTIN)
        wait_until(lambda dumps=dumps: swarm.log().count(PARENT_DUMP) == dumps, 20, f"parent thread dump {dumps}")
    assert len(swarm.children()) == 1
    swarm.send(signal.SIGTERM)
    assert swarm.wait_exit(TIMEOUT + 20) == 0


# --- supervisor policy, without processes ------------------------------------------------------
def test_respawn_backoff_grows_while_a_slot_crashes_young_and_resets_after_a_stable_run():
    from djwork.settings.conf import build_config
    from djwork.worker import swarm as swarm_module

    supervisor = swarm_module.Swarm(build_config({"TIMEOUT": 1}), 2)
    delays = []
    for _ in range(8):
        now = time.monotonic()
        supervisor._on_exit(swarm_module.Child(0, 1, started=now - 1), 1)
        delays.append(round(supervisor.respawn_at[0] - now))
    # The first crash is replaced at once; a loop backs off, up to the cap.
    assert delays == [0, 1, 2, 4, 8, 16, 30, 30]
    assert supervisor.respawn_at.get(1) is None  # other slots are unaffected

    # A child that ran for a while before dying starts the count afresh.
    now = time.monotonic()
    supervisor._on_exit(swarm_module.Child(0, 1, started=now - swarm_module.STABLE_UPTIME - 1), 1)
    assert round(supervisor.respawn_at[0] - now) == 0

    # A memory restart is planned, never a crash; a quiet swarm replaces nothing.
    supervisor.crashes[1] = 5
    supervisor._on_exit(swarm_module.Child(1, 2, started=time.monotonic(), reason="memory"), 0)
    assert round(supervisor.respawn_at[1] - time.monotonic()) == 0
    supervisor.respawn_at.clear()
    supervisor.quieted = True
    supervisor._on_exit(swarm_module.Child(1, 3, started=time.monotonic()), 1)
    assert supervisor.respawn_at == {}


def test_the_board_is_shared_with_forked_children():
    from djwork.worker.swarm import Board

    board = Board(2)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        board.write(1, os.getpid(), 12.5, 3)
        os._exit(0)
    os.waitpid(pid, 0)
    assert board.read(1) == (pid, 12.5, 3)
    assert board.read(0) == (0, 0.0, 0)


def test_the_harness_finds_a_pool_process_whose_title_overwrote_its_environment(tmp_path):
    # A title longer than the command line makes setproctitle write over the memory
    # /proc/<pid>/environ shows, marker included: such a process is found by its log file.
    from tests.helpers_worker import POOL_DIRECTORIES, POOL_MARKER

    marker = f"harness-probe-{os.getpid()}"
    POOL_DIRECTORIES[marker] = str(tmp_path.resolve())
    title = "djwork " + "x" * 400
    code = ("import setproctitle, sys, time; setproctitle.setproctitle(sys.argv[1]); print('titled', flush=True); "
            "time.sleep(60)")
    log_path = tmp_path / "worker-probe.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "-c", code, title], stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, POOL_MARKER: marker})
    try:
        wait_until(lambda: b"titled" in log_path.read_bytes(), 20, "the probe's title")
        with open(f"/proc/{process.pid}/environ", "rb") as environ:
            assert marker.encode() not in environ.read()  # the premise: the marker is gone from there
        assert marked_pids(marker) == [process.pid]
    finally:
        process.kill()
        process.wait(10)
        POOL_DIRECTORIES.pop(marker)
