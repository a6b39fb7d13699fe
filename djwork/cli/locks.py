"""``locks``: every unique job's lock (the Locks page); ``lock release <digest>``: its Release button."""

from __future__ import annotations

from typing import Any

from djwork import api
from djwork.cli.confirm import confirm
from djwork.cli.output import OK, Context, seconds_text, table
from djwork.cli.parsing import acting, looking, positive_int


def lock_json(lock: api.UniqueLock) -> dict[str, Any]:
    return {"digest": lock.digest, "owner": lock.owner, "ttl": lock.ttl, "where": lock.where,
            "class": lock.job.display_class if lock.job else None, "problems": list(lock.problems)}


def run_locks(ctx: Context) -> int:
    locks, cursor = [], "0"
    while len(locks) < ctx.options["limit"]:
        page = api.UniqueLocks().page(cursor)
        locks += page.locks
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    locks = locks[:ctx.options["limit"]]
    if ctx.json:
        ctx.emit_lines(lock_json(lock) for lock in locks)
        return OK
    if not locks:
        ctx.say("No unique lock is held.")
        return OK
    ctx.say(table(("DIGEST", "HELD BY", "CLASS", "WHERE", "EXPIRES IN"), [
        (lock.digest, lock.owner, lock.job.display_class if lock.job else "-", lock.where, seconds_text(lock.ttl))
        for lock in locks]))
    return OK


def run_release(ctx: Context) -> int:
    locks = api.UniqueLocks()
    lock = locks.get(api.unique_locks.check_digest(ctx.options["digest"]))
    if lock is None or not lock.owner:
        ctx.say(f"Lock {ctx.options['digest']} is not held: nothing to do.")
        return OK
    holder = f"{lock.job.display_class} {lock.owner}" if lock.job else f"job {lock.owner}"
    confirm(ctx, f"Release lock {lock.digest}, held by {holder} ({lock.where}): a new copy of that job can be "
                 "queued at once, next to the one holding it now.")
    # Owner-checked: a lock that expired and was taken by a new copy since it was read is that copy's, and stays.
    released = locks.release(lock.digest, owner=lock.owner)
    if ctx.json:
        ctx.emit({"action": "lock release", "digest": lock.digest, "done": int(released), "owner": lock.owner})
    elif released:
        ctx.say(f"Released lock {lock.digest} of job {lock.owner}.")
    else:
        ctx.say(f"Lock {lock.digest} was no longer held by job {lock.owner}: nothing was released.")
    return OK


def register(verbs: Any) -> None:
    parser = looking(verbs, "locks", run_locks, "every unique job's lock: who holds it and where that job is")
    parser.add_argument("--limit", type=positive_int, default=100, help="locks shown at most (default 100)")
    parser = acting(verbs, "lock", run_release, "release a unique lock: `lock release DIGEST`")
    parser.add_argument("action", choices=["release"], help="release (the one action)")
    parser.add_argument("digest", help="the lock's digest (see `locks`)")
