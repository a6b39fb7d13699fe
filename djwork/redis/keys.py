"""Every Redis key djwork reads or writes, with its type, in one place.

Sidekiq 7's layout (docs/wire.md, Keys) for everything Sidekiq defines; Sidekiq Pro's and Enterprise's
own names for the features they define (so their tools and ours read the same keys); a ``djwork:`` prefix
for the rest; a Redis Cluster's hash-tagged companions at the end. No module builds a key. docs/keys.md mirrors it.
"""

from __future__ import annotations

import datetime as dt

# --- Sidekiq OSS keys (docs/wire.md, Keys) ------------------------------------
QUEUES = "queues"  # SET of queue names without the "queue:" prefix
SCHEDULE = "schedule"  # ZSET score = run-at epoch seconds (float)
RETRY = "retry"  # ZSET score = next retry epoch seconds
DEAD = "dead"  # ZSET score = time of death epoch seconds
PROCESSES = "processes"  # SET of process identities
STAT_PROCESSED = "stat:processed"  # STRING integer, INCRBY
STAT_FAILED = "stat:failed"  # STRING integer, INCRBY
PROCESS_CLEANUP = "process_cleanup"  # STRING "1", SET NX EX 60
PAUSED = "paused"  # SET of paused queue names (Sidekiq Pro's contract)
LEADER = "dear-leader"  # STRING leader identity (Enterprise name)

# --- djwork's own keys -----------------------------------------------------------
IN_PROGRESS_REGISTRY = "djwork:inprogress"  # SET of in-progress LIST keys, for orphan recovery
STAT_EXPIRED = "djwork:stat:expired"  # STRING integer, INCRBY: jobs dropped unrun past their expires_at
BEATS = "djwork:beats"  # ZSET identity -> Redis TIME of its last beat
ORPHAN_COUNTS = "djwork:orphan-counts"  # HASH jid -> times recovered from a dead process
DEAD_BYTES = "djwork:dead-bytes"  # STRING integer: bytes of the `dead` members djwork filed (lua/dead_lib.lua)
# HASH jid -> epoch seconds: jobs that finished after the shutdown deadline pushed them back; a fetch drops the copy.
FINISHED_LATE = "djwork:finished-late"
ISOLATED_PREFIX = "djwork:isolated:"  # LIST per queue: jobs recovered more than once, one per process at a time
LANE_PREFIX = "djwork:lane:"  # + <name>|<n>: LIST of a queue's jobs in priority lane n (docs/priority.md)
HISTORY = "djwork:history"  # STREAM of executions, one entry per flush of <= 200 runs, capped in runs
ITERATION_PREFIX = "djwork:iteration:"  # STRING JSON: an iterable job's cursor and progress, TTL ITERABLE_STATE_TTL
RESULT_PREFIX = "djwork:result:"  # HASH result record (Django Tasks and Celery-style fields), TTL RESULT_TTL
RESULT_NOTIFY_PREFIX = "djwork:result-notify:"  # LIST per jid: wakes a waiting AsyncResult.get(), EXPIRE 60 s
# HASH jid -> the notify LIST a get() waits on (the writer pushes it); EXPIRE 60 s renewed by each waiter.
RESULT_WAITERS = "djwork:result-waiters"
RESULT_WAITER_PREFIX = "djwork:result-waiter:"  # + {djwork:result:<jid>}: a cluster's RESULT_WAITERS, one per job
REVOKED = "djwork:revoked"  # ZSET jid -> epoch seconds the revoke holds until; EXPIRE RESULT_TTL from the last one
STATS_TTL = 5 * 365 * 24 * 3600  # per-day stat keys live five years (Sidekiq's STATS_TTL)
PROCESS_TTL = 60  # identity hash, work hash, signal list


def isolated(queue_name: str) -> str:
    """LIST of a queue's jobs recovered from dead processes more than once (reaper.py, fetch.lua)."""
    return f"{ISOLATED_PREFIX}{queue_name}"


def lane(queue_name: str, lane_number: str) -> str:  # lane_number: -9..9 but 0, as text
    return f"{LANE_PREFIX}{queue_name}|{lane_number}"


def lanes(queue_name: str) -> str:  # SET of the queue's lanes that may hold jobs, registered at push
    return f"djwork:lanes:{queue_name}"


QUEUE_PREFIX = "queue:"


def queue(name: str) -> str:
    """LIST ``queue:<name>``: LPUSH by clients, popped from the right."""
    return f"{QUEUE_PREFIX}{name}"


def queue_name(key: str) -> str:
    return key[len(QUEUE_PREFIX):] if key.startswith(QUEUE_PREFIX) else key


def stat_processed_day(day: str) -> str:
    """STRING ``stat:processed:YYYY-MM-DD`` (UTC date)."""
    return f"stat:processed:{day}"


def stat_failed_day(day: str) -> str:
    return f"stat:failed:{day}"


def process(identity: str) -> str:
    """HASH ``<identity>``: info busy beat quiet rss rtt_us, EXPIRE 60."""
    return identity


def work(identity: str) -> str:
    """HASH ``<identity>:work`` (Sidekiq 6.4.2+): tid -> {queue, payload, run_at}."""
    return f"{identity}:work"


def workers_legacy(identity: str) -> str:
    """HASH ``<identity>:workers``: the same content under Sidekiq <= 6.4.1's name."""
    return f"{identity}:workers"


def signals(identity: str) -> str:
    """LIST ``<identity>-signals``: LPUSH by the API, RPOP by the process's heartbeat."""
    return f"{identity}-signals"


IN_PROGRESS_PREFIX = "djwork:inprogress:"


def in_progress(identity: str, queue_name: str) -> str:
    """LIST ``djwork:inprogress:<identity>|<queue>``: jobs fetched, not acked; one per process and queue."""
    return f"{IN_PROGRESS_PREFIX}{identity}|{queue_name}"


def parse_in_progress(key: str) -> tuple[str, str] | None:
    """``djwork:inprogress:<identity>|<queue>`` (a cluster's ``...|{queue:<queue>}``) -> (identity, queue) or None."""
    identity, sep, queue_name = key[len(IN_PROGRESS_PREFIX):].rpartition("|")
    tagged = f"{{{QUEUE_PREFIX}"
    if queue_name.startswith(tagged) and queue_name.endswith("}"):
        queue_name = queue_name[len(tagged):-1]
    if not key.startswith(IN_PROGRESS_PREFIX) or not sep or not identity or not queue_name:
        return None
    return identity, queue_name


def iteration(jid: str) -> str:
    """STRING ``djwork:iteration:<jid>``: an iterable job's saved state (JSON, docs/iterable.md)."""
    return f"{ITERATION_PREFIX}{jid}"


def result(result_id: str) -> str:
    """HASH ``djwork:result:<id>``: a job's result record (Django Tasks' and Celery's fields; docs/celery.md)."""
    return f"{RESULT_PREFIX}{result_id}"


def result_notify(result_id: str) -> str:
    """LIST ``djwork:result-notify:<id>``: pushed when a result is stored while a ``get()`` waits on it."""
    return f"{RESULT_NOTIFY_PREFIX}{result_id}"


# --- key guard: wrong-type keys moved aside (djwork/redis/key_repair.py) ---------------
QUARANTINE_PREFIX = "djwork:quarantine:"  # + <key>:<ms>:<random>: a key that held the wrong type, EXPIRE 30 days
QUARANTINE_INDEX = "djwork:quarantine"  # ZSET copy name -> ms it was moved (5 copies per key kept at most)
QUARANTINE_TTL = 30 * 24 * 3600
# ZSET key -> ms last reported: a key a WRONGTYPE was met on, for a worker's key guard to move aside; cap 1,000.
KEY_GUARD_REPORTED = "djwork:key-guard:reported"
CLEARING_PREFIX = "djwork:clearing:"  # + <random>: a queue or set a clear moved aside to release locks; EXPIRE 1 day


# --- rate limiters (docs/limiters.md) --------------------------------------------
# Per-limiter keys put the name last, after a prefix no name ([A-Za-z0-9_.:-]) contains: "a:stats" is not "a"'s stats.
LIMITERS = "djwork:limiters"  # ZSET limiter name -> expiry (Redis time); swept on use
LIMITER_HOLDINGS = "djwork:limiter-holdings"  # ZSET, scores 0: "<identity>\t<name>\t<token>" per held slot
LIMITER_PREFIX = "djwork:limiter:"  # HASH metadata: kind size interval ttl wait_timeout lock_timeout config


def limiter(name: str) -> str:
    """HASH ``djwork:limiter:<name>``: the limiter's metadata, expiring ttl after its last refresh."""
    return f"{LIMITER_PREFIX}{name}"


def limiter_stats(name: str) -> str:
    """HASH ``djwork:limiter-stats:<name>``: held held_us immediate waited wait_us over overages ..."""
    return f"djwork:limiter-stats:{name}"


def limiter_state(name: str) -> str:
    """``djwork:limiter-state:<name>``: HASH period/used (bucket), level/at (leaky, points); ZSET log (window)."""
    return f"djwork:limiter-state:{name}"


def limiter_holders(name: str) -> str:
    """ZSET ``djwork:limiter-holders:<name>``: token -> lease end (concurrent)."""
    return f"djwork:limiter-holders:{name}"


def limiter_owners(name: str) -> str:
    """HASH ``djwork:limiter-owners:<name>``: token -> "identity\\tjid\\tacquired_at" (concurrent)."""
    return f"djwork:limiter-owners:{name}"


def limiter_waiters(name: str) -> str:
    """ZSET ``djwork:limiter-waiters:<name>``: token -> arrival, the waiting list in order."""
    return f"djwork:limiter-waiters:{name}"


def limiter_waiting(name: str) -> str:
    """HASH ``djwork:limiter-waiting:<name>``: token -> "deadline\\tidentity\\tjid"."""
    return f"djwork:limiter-waiting:{name}"


def limiter_lost(name: str) -> str:
    """ZSET ``djwork:limiter-lost:<name>``: token -> when its slot was freed under its holder (concurrent)."""
    return f"djwork:limiter-lost:{name}"


LIMITER_WAKE_PREFIX = "djwork:limiter-wake:"


def limiter_wake(name: str, token: str) -> str:
    """LIST ``djwork:limiter-wake:<name>|<token>``: one waiter's wake-up, pushed when it is granted a slot."""
    return f"{LIMITER_WAKE_PREFIX}{name}|{token}"


# --- periodic jobs (docs/periodic.md); the leader is dear-leader above ---------------
# Per-entry keys put the entry id last, after a prefix; ids have no ':', so no id's keys collide.
PERIODIC_ENTRIES = "djwork:periodic:entries"  # HASH entry id -> JSON definition the leader last ran, + "seen" ms
PERIODIC_SYNCED_FIELD = ":synced"  # its field of the last write (ms); no entry id has a ':'
PERIODIC_STATE_PREFIX = "djwork:periodic:state:"  # HASH per entry: last (watermark), paused, counters, last run
PERIODIC_HISTORY_PREFIX = "djwork:periodic:history:"  # LIST per entry: JSON of each run and skip, newest first
# STRING per no-overlap entry: jid of the run in flight, PX; a lock bound to its job's life (djwork/job_locks.py)
PERIODIC_LOCK_PREFIX = "djwork:periodic-running:"


def periodic_state(entry_id: str) -> str:
    """HASH ``djwork:periodic:state:<id>``: the watermark (last slot decided, epoch ms) and the operator's pause."""
    return f"{PERIODIC_STATE_PREFIX}{entry_id}"


def periodic_history(entry_id: str) -> str:
    """LIST ``djwork:periodic:history:<id>``: the entry's recent runs and skipped slots, capped."""
    return f"{PERIODIC_HISTORY_PREFIX}{entry_id}"


def cluster_periodic_history(entry_id: str) -> str:
    """LIST ``djwork:periodic:history:{djwork:periodic:state:<id>}``: the history in its state's slot (cluster)."""
    return f"{PERIODIC_HISTORY_PREFIX}{{{PERIODIC_STATE_PREFIX}{entry_id}}}"


def periodic_lock(entry_id: str, cluster: bool = False) -> str:
    """STRING ``djwork:periodic-running:<id>``, on a cluster ``...:{djwork:periodic:state:<id>}``: a run's jid."""
    return f"{PERIODIC_LOCK_PREFIX}{{{periodic_state(entry_id)}}}" if cluster else f"{PERIODIC_LOCK_PREFIX}{entry_id}"


# --- unique jobs (docs/unique.md) -------------------------------------------------
# Sidekiq Enterprise's prefix, value = owner jid; set by lua/unique_push.lua, deleted owner-checked as the job ends.
UNIQUE_PREFIX = "unique:"


def unique(digest: str) -> str:
    """STRING ``unique:<digest>``: the jid of the one job holding this uniqueness lock, PX unique_for."""
    return f"{UNIQUE_PREFIX}{digest}"


# The locks bound to a job's life (djwork/job_locks.py): the only keys a payload's `djwork_locks` may name. A
# payload is anybody's data: it must not make a worker delete any key (the owner check is the second guard).
JOB_LOCK_PREFIXES = (UNIQUE_PREFIX, PERIODIC_LOCK_PREFIX)


# --- execution metrics, Sidekiq 8's layout and 7's (docs/metrics.md) ----------------
# Times are UTC. Sidekiq 7's Metrics page reads other names (docs/metrics.md, Versions): hash, histogram in both.
METRICS_MINUTE_TTL = 8 * 3600  # per-minute `j|` hashes and the histograms (Sidekiq's SHORT_TERM)
METRICS_TEN_MINUTE_TTL = 72 * 3600  # 10-minute `j|` rollups (Sidekiq's MID_TERM)
DEPLOY_MARKS_TTL = 90 * 24 * 3600  # Sidekiq::Deploy's MARK_TTL
DEPLOY_LOCK_TTL = 60
# Running totals for Prometheus counters (rate() needs a value that only grows); no TTL, a field per class+metric.
METRICS_TOTALS = "djwork:metrics:totals"  # HASH <Class>|p, <Class>|f, <Class>|ms
METRICS_HISTOGRAM_TOTALS = "djwork:metrics:histograms"  # HASH <Class>|<bucket 0-25> -> successful runs
# The prefixes of the per-minute keys below, for the key guard's table (djwork/redis/key_types.py).
METRICS_MINUTE_PREFIX = "j|"
METRICS_HISTOGRAM_PREFIX = "h|"
QUEUE_METRICS_PREFIX = "djwork:qm|"
DEPLOY_LOCK_PREFIX = "deploylock-"


def metrics_minute(now: dt.datetime) -> str:
    """HASH ``j|YYMMDD|H:MM`` (hour unpadded, minute padded): ``<Class>|p``, ``|f``, ``|ms`` counters."""
    return f"{METRICS_MINUTE_PREFIX}{now:%y%m%d}|{now.hour}:{now:%M}"


def metrics_ten_minutes(now: dt.datetime) -> str:
    """HASH ``j|YYMMDD|H:M``: the minute key without its last digit ("8:4" holds 8:40-8:49)."""
    return metrics_minute(now)[:-1]


def metrics_histogram(class_name: str, now: dt.datetime) -> str:
    """STRING ``h|<Class>-<day>-<H>:<M>`` (day of month, hour, minute all unpadded): BITFIELD of 26 u16 counters."""
    return f"{METRICS_HISTOGRAM_PREFIX}{class_name}-{now.day}-{now.hour}:{now.minute}"


def metrics_minute_v7(now: dt.datetime) -> str:
    """HASH ``j|YYYYMMDD|H:M`` (four-digit year, hour and minute unpadded): Sidekiq 7's minute of the same fields."""
    return f"j|{now:%Y%m%d}|{now.hour}:{now.minute}"


def metrics_histogram_v7(class_name: str, now: dt.datetime) -> str:
    """STRING ``<Class>-DD-HH:M`` (day and hour padded, minute not, no prefix): Sidekiq 7's histogram."""
    return f"{class_name}-{now:%d}-{now:%H}:{now.minute}"


def deploy_marks(day: dt.date) -> str:
    """HASH ``YYYYMMDD-marks``: ISO-8601 minute stamp -> label (Sidekiq::Deploy)."""
    return f"{day:%Y%m%d}-marks"


def deploy_lock(label: str) -> str:
    """STRING ``deploylock-<label>``, SET NX EX 60: one mark per label per minute (Sidekiq::Deploy)."""
    return f"{DEPLOY_LOCK_PREFIX}{label}"


def queue_metrics_minute(now: dt.datetime) -> str:
    """HASH ``djwork:qm|YYMMDD|H:MM``: sums of the leader's queue samples in that minute (docs/metrics.md)."""
    return f"{QUEUE_METRICS_PREFIX}{now:%y%m%d}|{now.hour}:{now:%M}"


def queue_metrics_ten_minutes(now: dt.datetime) -> str:
    """HASH ``djwork:qm|YYMMDD|H:M``: the same sums over ten minutes."""
    return queue_metrics_minute(now)[:-1]
# --- batches (docs/batches.md) ------------------------------------------------------
# Sidekiq Pro's ``b-<bid>`` and ``-jids``; the other suffixes are djwork's (also generated into Lua: lua_keys.py).
BATCH_PREFIX = "b-"
BATCHES = "batches"  # ZSET bid -> created_at epoch seconds: the listing, newest first; pruned when read
BATCH_SUFFIXES = ("-jids", "-failed", "-died", "-order", "-results")


def batch(bid: str) -> str:
    """HASH ``b-<bid>``: description, created_at, total, cbq, cb-<event> heads, <event>_at claims, invalidated."""
    return f"{BATCH_PREFIX}{bid}"


def batch_jids(bid: str) -> str:
    """SET ``b-<bid>-jids``: jids not yet succeeded and not dead (the pending ones)."""
    return f"{BATCH_PREFIX}{bid}-jids"


def batch_failed(bid: str) -> str:
    """SET ``b-<bid>-failed``: pending jids that have failed at least once (waiting for a retry)."""
    return f"{BATCH_PREFIX}{bid}-failed"


def batch_died(bid: str) -> str:
    """SET ``b-<bid>-died``: jids that died (dead set, dropped, deleted) and have not succeeded since."""
    return f"{BATCH_PREFIX}{bid}-died"


def batch_order(bid: str) -> str:
    """LIST ``b-<bid>-order``: jids in the order they were added (only when the batch keeps results)."""
    return f"{BATCH_PREFIX}{bid}-order"


def batch_results(bid: str) -> str:
    """HASH ``b-<bid>-results``: jid -> JSON return value (only when the batch keeps results)."""
    return f"{BATCH_PREFIX}{bid}-results"


SAVED_GROUP_PREFIX = "djwork:saved-group:"


def saved_group(group_id: str) -> str:
    """STRING ``djwork:saved-group:<id>``: JSON {bid, jids} of a group, ``GroupResult.save()``, for ``restore()``."""
    return f"{SAVED_GROUP_PREFIX}{group_id}"


# --- Redis Cluster (docs/cluster.md, Keys) ------------------------------------------
# A script may touch one hash slot only: a companion named with ``{queue:<name>}`` shares the slot of
# ``queue:<name>`` (Sidekiq's name, kept). A second layout, chosen once by the mode (redis/key_layout.py).
def cluster_in_progress(identity: str, queue_name: str) -> str:
    """LIST ``djwork:inprogress:<identity>|{queue:<name>}``: ``in_progress`` in the queue's slot."""
    return f"{IN_PROGRESS_PREFIX}{identity}|{{{QUEUE_PREFIX}{queue_name}}}"


def cluster_isolated(queue_name: str) -> str:
    """LIST ``djwork:isolated:{queue:<name>}``: ``isolated`` in the queue's slot."""
    return f"{ISOLATED_PREFIX}{{{QUEUE_PREFIX}{queue_name}}}"


def cluster_orphan_counts(queue_name: str) -> str:
    """HASH ``djwork:orphan-counts:{queue:<name>}``: the recovery counters of one queue's jobs, in its slot."""
    return f"{ORPHAN_COUNTS}:{{{QUEUE_PREFIX}{queue_name}}}"


def cluster_finished_late(queue_name: str) -> str:
    """HASH ``djwork:finished-late:{queue:<name>}``: one queue's finished-late marks, in its slot."""
    return f"{FINISHED_LATE}:{{{QUEUE_PREFIX}{queue_name}}}"


PUSHED_PREFIX = "djwork:pushed:"
PUSHED_HORIZON = 3600  # seconds a push_once remembers a jid: longer than any move's two steps are apart


def pushed(queue_name: str) -> str:
    """ZSET ``djwork:pushed:{queue:<name>}``: move -> when pushed (lua/push_once.lua): a cluster's move, repeatable."""
    return f"{PUSHED_PREFIX}{{{QUEUE_PREFIX}{queue_name}}}"


CLUSTER_DEAD_BYTES = "djwork:dead-bytes:{dead}"  # DEAD_BYTES in the slot of `dead`, trimmed in the same step


def cluster_result_notify(result_id: str) -> str:
    """LIST ``djwork:result-notify:{djwork:result:<id>}``: ``result_notify`` in the record's slot."""
    return f"{RESULT_NOTIFY_PREFIX}{{{RESULT_PREFIX}{result_id}}}"


def cluster_result_waiters(result_id: str) -> str:
    """HASH ``djwork:result-waiter:{djwork:result:<id>}``: one job's ``RESULT_WAITERS``, in its record's slot."""
    return f"{RESULT_WAITER_PREFIX}{{{RESULT_PREFIX}{result_id}}}"



def cluster_limiter_tag(name: str) -> str:
    """``{djwork:limiter:<name>}``: the metadata HASH hashes whole; a companion named with this tag shares its slot."""
    return f"{{{LIMITER_PREFIX}{name}}}"


def cluster_limiter_holdings(name: str) -> str:
    """ZSET ``djwork:limiter-holdings:{djwork:limiter:<name>}``: one limiter's ``LIMITER_HOLDINGS``, in its slot."""
    return f"{LIMITER_HOLDINGS}:{cluster_limiter_tag(name)}"
