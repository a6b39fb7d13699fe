"""Every key of ``settings.DJWORK``, once: default, kind, check id and hint, and its line in docs/settings.md.

djwork.settings.conf builds the typed ``Config`` from this table (attribute = the
key in lower case), djwork.settings.checks runs each spec's check, and the "Keys"
tables of docs/settings.md are generated from it by djwork.settings.doc
(tests/test_settings_doc.py fails when the doc and the table disagree).
A new setting is one ``SettingSpec`` here, one ``Config`` field, and a bad
value in tests/test_checks.py. Check ids are stable: a new check gets a new
id, an existing id is never reused for another meaning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.checks import CheckMessage

from djwork.periodic.checks import check_periodic_setting
from djwork.periodic.settings import clock_setting, periodic_list
from djwork.redis.cluster_url import check_cluster_url, is_cluster_url
from djwork.settings.kinds import (
    SettingSpec,
    address,
    anything,
    check_sentinel_url,
    count,
    count_or_zero,
    extra_capsules,
    flag,
    is_sentinel_url,
    keyword_arguments,
    name_map,
    one_of,
    optional_pool_size,
    optional_port,
    optional_seconds,
    optional_text,
    queue_list,
    queue_name,
    queue_routes,
    seconds,
    seconds_or_zero,
    sequence,
    strings,
    text,
)
from djwork.settings.value_checks import (
    QUEUES_HINT,
    URL_HINT,
    check_cache_setting,
    check_capsules_setting,
    check_hook,
    check_importables,
    check_orphan_threshold,
    check_pool_size,
    check_queues_setting,
    check_time_limits,
    check_track_started,
    check_url_setting,
)


def check_redis_url_setting(spec: SettingSpec, values: Mapping[str, Any],
                            given: Mapping[str, Any]) -> list[CheckMessage]:
    """REDIS_URL: a sentinel or cluster URL by its own parser (a list of hosts is no URL urllib can read),
    any other as usual."""
    if values["CACHE"] is None and is_sentinel_url(values[spec.name]):
        return check_sentinel_url(values[spec.name])
    if values["CACHE"] is None and is_cluster_url(values[spec.name]):
        return check_cluster_url(values[spec.name])
    return check_url_setting(spec, values, given)


IMPORT_HINT = "Give a dotted path to a class or function (e.g. 'myapp.middleware.Tracing') or the object itself."

SETTINGS: tuple[SettingSpec, ...] = (
    # --- Connection ---
    SettingSpec(
        "REDIS_URL", "redis://localhost:6379/0", text, "djwork.E002", URL_HINT, "Connection",
        "The Redis server. `redis://[:password@]host:port/db`, `rediss://` for TLS, `unix:///path/redis.sock?db=N`,"
        " or a master watched by Redis Sentinel: `redis+sentinel://[:password@]host:port[,host:port...]/service/db`"
        " (options `sentinel_password`, `sentinel_username`, `socket_timeout`, `socket_connect_timeout`,"
        " `master_check_interval`; docs/deployment.md), or a Redis Cluster:"
        " `redis+cluster://[:password@]host:port[,host:port...]/0` (`rediss+cluster://` for TLS; any of its nodes;"
        " docs/cluster.md). Ignored when `CACHE` is set.",
        check=check_redis_url_setting),
    SettingSpec(
        "CACHE", None, optional_text, "djwork.E003",
        "Point CACHE at a django_redis.cache.RedisCache (or Django's RedisCache) alias.", "Connection",
        "Alias in `settings.CACHES` of a Redis cache (`django_redis.cache.RedisCache` or Django's `RedisCache`)"
        ' whose `LOCATION` (the first one, if a list) and `OPTIONS["PASSWORD"]` /'
        ' `OPTIONS["CONNECTION_POOL_KWARGS"]` djwork reuses instead of `REDIS_URL`.',
        check=check_cache_setting, also=("djwork.E002", "djwork.W001")),
    SettingSpec(
        "REDIS_OPTIONS", {}, keyword_arguments, "djwork.E019", "e.g. {'ssl_cert_reqs': 'required'}", "Connection",
        "Extra keyword arguments for redis-py's connections (e.g. `ssl_cert_reqs`), applied over the URL's and the"
        " cache's."),
    SettingSpec("CONNECT_TIMEOUT", 1.0, seconds, "djwork.E010", "seconds, e.g. 1", "Connection",
                "Seconds to open a connection."),
    SettingSpec("SOCKET_TIMEOUT", 2.5, seconds, "djwork.E010", "seconds, e.g. 2.5", "Connection",
                "Seconds to wait for a reply. Blocking fetches get `FETCH_TIMEOUT` on top."),
    SettingSpec(
        "POOL_SIZE", None, optional_pool_size, "djwork.E014", "None sizes the pools from CONCURRENCY.", "Connection",
        "Connections per pool (one pool per purpose: default, fetch, heartbeat, admin). `None` sizes them from the"
        " capsules' concurrency and the number of queues. At least 2. An idle worker also holds one connection of"
        " its own per taker, outside the pools: about one per free slot, at least one per queue"
        " (docs/architecture.md).", check=check_pool_size),
    SettingSpec("POOL_TIMEOUT", 1.0, seconds, "djwork.E010", "seconds, e.g. 1", "Connection",
                "Seconds to wait for a free pooled connection before giving up (retried once)."),
    SettingSpec(
        "REDIS_MAX_ATTEMPTS", 4, count, "djwork.E011", "tries of an idempotent Redis block, e.g. 4", "Connection",
        "Tries, in all, of a Redis block marked idempotent. Non-idempotent blocks are replayed only when the error"
        " proves the command never left (see `djwork/redis/__init__.py`)."),
    SettingSpec("REDIS_BACKOFF_BASE", 0.05, seconds, "djwork.E010", "seconds, e.g. 0.05", "Connection",
                "Seconds before the first retry; doubles per attempt, with jitter."),
    SettingSpec("REDIS_BACKOFF_CAP", 2.0, seconds, "djwork.E010", "seconds, e.g. 2", "Connection",
                "Upper bound, in seconds, of one backoff delay."),
    SettingSpec(
        "REDIS_EVENT_HOOK", None, anything, "djwork.E008", IMPORT_HINT, "Connection",
        "Dotted path to (or the object of) a callable that receives a `djwork.redis.RedisEvent` for every retry,"
        " refusal and give-up.", check=check_hook),
    # --- Worker ---
    SettingSpec(
        "CONCURRENCY", 10, count, "djwork.E004", "processor threads per process, e.g. 10", "Worker",
        'Processor threads of the default capsule, per process. An integer >= 1 (`True` and `"10"` are rejected).'),
    SettingSpec(
        "ASYNC_CONCURRENCY", 100, count, "djwork.E070", "coroutine jobs at once per capsule, e.g. 100", "Worker",
        "Places for coroutine jobs (`async def` functions decorated with `@djwork.job`), per capsule, on one event"
        " loop thread per process, apart from the `CONCURRENCY` threads: a processor thread parses the job and"
        " hands it to the loop, so thousands of jobs awaiting I/O run at once without a thread each. An integer"
        " >= 1. Coroutine jobs with `limits`/`rate_limit`, and every coroutine job while `SERVER_MIDDLEWARE` is"
        " set, run on a processor thread instead (docs/performance.md, I/O-bound jobs)."),
    SettingSpec(
        "QUEUES", ["default"], queue_list, "djwork.E005", QUEUES_HINT, "Worker",
        "Queues of the default capsule. Names alone: strict order, first queue first. `(name, weight)` pairs or"
        ' `"name,weight"` strings with integer weights >= 0: each fetch starts with the queue a smooth weighted'
        ' round-robin picks, so queues come first in proportion to their weights (Sidekiq draws a weighted random'
        ' order; the shares are the same). Names use'
        " `[a-z0-9_:.-]`. Must not be empty.", check=check_queues_setting),
    SettingSpec(
        "CAPSULES", {}, extra_capsules, "djwork.E009", "e.g. {'single': {'QUEUES': ['serial'], 'CONCURRENCY': 1}}",
        "Worker",
        'Extra capsules (Sidekiq 7): `{"name": {"QUEUES": [...], "CONCURRENCY": n}}`, each with its own threads.'
        ' Names follow the queue-name rule and can\'t be `"default"` (that one is built from `QUEUES`/`CONCURRENCY`).'
        " `CONCURRENCY` defaults to 1.", check=check_capsules_setting, also=("djwork.E005",)),
    SettingSpec(
        "FETCH", "reliable", one_of("reliable", "basic"), "djwork.E007",
        "'reliable' (the default) never loses a job when a worker dies.", "Worker",
        '`"reliable"`: a fetched job sits in a per-process in-progress list until it is done, so a killed worker'
        ' loses nothing. `"basic"`: Sidekiq\'s plain BRPOP, a job in flight is lost with its process (a clean'
        ' shutdown pushes the jobs still running back).'),
    SettingSpec(
        "FETCH_TIMEOUT", 2.0, seconds, "djwork.E010", "seconds a blocking fetch waits, e.g. 2", "Worker",
        "Seconds an idle worker's takers block on a queue before re-blocking (a stop interrupts them at once with"
        " `CLIENT UNBLOCK`). Keep it at Sidekiq's 2 s on queues shared with Ruby (docs/sidekiq.md)."),
    SettingSpec(
        "UNKNOWN_CLASS", "dead", one_of("dead", "retry"), "djwork.E021",
        "'retry' lets a worker that knows the class (e.g. a Ruby Sidekiq process on the same queues) get the job"
        " later; 'dead' files it at once.", "Worker",
        'What a worker does with a job whose `class` no djwork job, Django task or alias names: `"dead"` files it in'
        ' the dead set at once with error `djwork.UnknownJobClass`; `"retry"` sends it through the normal retry'
        " path, so another worker that knows the class (a Ruby Sidekiq process sharing the queue) can get it."),
    SettingSpec(
        "HEALTH_PORT", None, optional_port, "djwork.E022",
        "e.g. 8081; /live and /ready are served there (off when None).", "Worker",
        "Port of the `/live` and `/ready` probes for **embedded** workers; off when `None`. `runworkers` ignores it"
        " and listens only with `--health-port` (a worker on the same host would otherwise find the web process"
        " holding the port)."),
    SettingSpec(
        "HEALTH_HOST", "0.0.0.0", address, "djwork.E023",
        "'0.0.0.0' (all interfaces, what a kubelet probing the pod IP needs) or '127.0.0.1'.", "Worker",
        "Address the probes listen on (all interfaces, so a kubelet probing the pod IP reaches them);"
        " `runworkers --health-host` overrides it."),
    SettingSpec(
        "TIMEOUT", 25, seconds_or_zero, "djwork.E006", "seconds running jobs get to finish on shutdown, e.g. 25",
        "Worker",
        "Seconds running jobs get to finish on shutdown before they are pushed back to their queues. `0` is allowed"
        " (requeue at once)."),
    SettingSpec(
        "EMBEDDED_YIELD", 0, seconds_or_zero, "djwork.E071",
        "seconds an embedded worker may wait for requests in flight before each job, e.g. 1; 0 turns it off",
        "Worker",
        "Embedded worker only (docs/deployment.md): while the host serves a request (a connection waiting on"
        " gunicorn's listener; from accept to close with the `djwork.gunicorn.EmbeddedWorker` worker class;"
        " djwork.gunicorn's `pre_request`/`post_request`; or `djwork.embedded.request_started`/`request_finished`),"
        " its threads wait before starting their next job and its dispatcher before fetching, at most this many"
        " seconds each time. `0` (the default): no waiting."),
    SettingSpec(
        "EMBEDDED_MAX_JOBS_PER_SECOND", None, optional_seconds, "djwork.E072",
        "None, or job starts per second of an embedded worker, e.g. 200", "Worker",
        "Embedded worker only: at most this many jobs start per second in the web process, its share of the"
        " CPU. `None` (the default): no cap."),
    SettingSpec("HEARTBEAT_INTERVAL", 10.0, seconds, "djwork.E010", "seconds between beats, e.g. 10", "Worker",
                "Seconds between a process's heartbeats.", also=("djwork.E013",)),
    SettingSpec(
        "ORPHAN_THRESHOLD", 60.0, seconds, "djwork.E010",
        "seconds without a heartbeat before jobs are recovered, e.g. 60", "Worker",
        "Seconds without a heartbeat after which a process's in-progress jobs are recovered to their queues. Must"
        " exceed `2 * HEARTBEAT_INTERVAL`, or a live process that missed one beat would have its jobs run twice.",
        check=check_orphan_threshold, also=("djwork.E013",)),
    SettingSpec(
        "MAX_ORPHANINGS", 3, count, "djwork.E011", "recoveries before a job is sent to dead, e.g. 3", "Worker",
        "Recoveries of the same job before it is sent to the dead set (a job that kills its worker every time)."),
    SettingSpec("REAPER_INTERVAL", 30.0, seconds, "djwork.E010", "seconds between orphan checks, e.g. 30", "Worker",
                "Seconds between orphan checks."),
    SettingSpec(
        "POLL_INTERVAL_AVERAGE", None, optional_seconds, "djwork.E018",
        "None scales the scheduler's poll with the number of processes (Sidekiq's default); a number fixes it in"
        " seconds.", "Worker",
        "Seconds between scheduled/retry-set polls, cluster-wide average. `None`: `AVERAGE_SCHEDULED_POLL_INTERVAL`"
        " times the number of processes (Sidekiq's default)."),
    SettingSpec("AVERAGE_SCHEDULED_POLL_INTERVAL", 5.0, seconds, "djwork.E010", "seconds, e.g. 5", "Worker",
                "Seconds; the per-cluster average poll interval `None` above scales from."),
    SettingSpec(
        "TAG", "", text, "djwork.E016", "e.g. 'myapp'; shown in the process title and on the dashboard.", "Worker",
        "Free text shown in the process title and on the dashboard's process list (Sidekiq's `tag`)."),
    SettingSpec(
        "LABELS", [], strings, "djwork.E015", "e.g. ['blue', 'eu-west']; shown on the dashboard's process list.",
        "Worker",
        "List of strings shown next to the process on the dashboard (Sidekiq's `labels`). A bare string is rejected:"
        " it would become one label per character."),
    SettingSpec("LOG_JOBS", True, flag, "djwork.E017", "True logs a start and a done line per job.", "Worker",
                "Log a start and a done line per job, at INFO. `True` or `False`. Failures are logged whatever it"
                " says, at WARNING, with the traceback when the failure is final (docs/logging.md)."),
    SettingSpec("CELERY_TRACE_LOG", False, flag, "djwork.E017",
                "True also logs Celery's received/succeeded/raised records per job.", "Worker",
                "Also log Celery's trace records for each job, on the loggers `celery.worker.strategy` (`received`)"
                " and `celery.app.trace` (`succeeded`, `retry`, `raised`), with Celery's messages and the record's"
                " `data` dict, for log pipelines that key on them. Off by default: djwork's own lines say the same"
                " (docs/logging.md). `True` or `False`."),
    # --- Jobs ---
    SettingSpec(
        "MAX_RETRIES", 25, count_or_zero, "djwork.E020",
        "Retries before a failing job goes to the dead set, e.g. 25; 0 disables retries.", "Jobs",
        "Retries of a failing job (with `retry=True`) before it goes to the dead set. `0` disables retries."),
    SettingSpec(
        "ROUTES", {}, queue_routes, "djwork.E026",
        "{'reports.tasks.*': 'low', 'mail.tasks.send': 'mail'}: job name or glob pattern -> queue", "Jobs",
        "The queue of each job that names none itself (no `queue=` on its decorator or `base=` class), by job"
        " name or glob pattern, first match in order (Celery's `task_routes`). A call's `queue=` wins. `{}`: every"
        " such job goes to `DEFAULT_QUEUE`. docs/celery.md, Settings.", doc_default="`{}`"),
    SettingSpec(
        "DEFAULT_QUEUE", "default", queue_name, "djwork.E027",
        "a queue name, e.g. 'celery'", "Jobs",
        "The queue of a job that names none and matches no `ROUTES` entry (Celery's `task_default_queue`). List"
        " it in `QUEUES` so workers take it. docs/celery.md, Settings."),
    SettingSpec(
        "FAILURES", "sidekiq", one_of("sidekiq", "celery"), "djwork.E025",
        '"sidekiq" (every exception retries) or "celery" (an exception fails the job unless it asks to retry).',
        "Jobs",
        "What an exception in a `@djwork.job` does when the job sets no `failures=`: `\"sidekiq\"` retries it (up"
        " to `MAX_RETRIES`, Sidekiq's backoff), `\"celery\"` fails it at once unless it asked for a retry"
        " (`self.retry()`, `autoretry_for`; at most 3 by default, Celery's `max_retries`). `shared_task` and a"
        " `djwork.Task` subclass are `\"celery\"` whatever this says. docs/celery.md, Failures."),
    SettingSpec(
        "SOFT_TIME_LIMIT", None, optional_seconds, "djwork.E073",
        "None (no limit) or seconds, e.g. 300; a job's own soft_time_limit wins.", "Jobs",
        "Default soft time limit in seconds (Celery's `task_soft_time_limit`): `djwork.exceptions."
        "SoftTimeLimitExceeded` is raised inside a job running longer, so it can clean up. `None`: no limit. A job's"
        " `soft_time_limit=` overrides it. Must be below `TIME_LIMIT`. docs/celery.md, Time limits.",
        check=check_time_limits, also=("djwork.E074",)),
    SettingSpec(
        "TIME_LIMIT", None, optional_seconds, "djwork.E073",
        "None (no limit) or seconds, e.g. 600; a job's own time_limit wins.", "Jobs",
        "Default hard time limit in seconds (Celery's `task_time_limit`): a job running longer is failed with"
        " `djwork.exceptions.TimeLimitExceeded` (the retry path) and its thread abandoned; a swarm child is"
        " replaced. `None`: no limit. A job's `time_limit=` overrides it. docs/celery.md, Time limits.",
        check=check_time_limits, also=("djwork.E074",)),
    SettingSpec(
        "ALWAYS_EAGER", False, flag, "djwork.E017",
        "True runs every job at enqueue, in the caller's thread (tests only).", "Jobs",
        "For tests: run each job at enqueue, in the caller's thread, instead of writing it to Redis (Celery's"
        " `task_always_eager`); its exception propagates to the caller. docs/testing.md."),
    SettingSpec(
        "CHORD_HEADER_ERRBACKS", False, flag, "djwork.E017",
        "True makes chord.link_error() link every header member too.", "Jobs",
        "`chord.link_error(errback)` links the errback to every header member too, so it runs once per header"
        " task that dies, besides once for the body (Celery's `task_allow_error_cb_on_chord_header`). Off: on"
        " the body only (called once, with the body's id, when the header fails) and chords nested in the"
        " header. Read when `link_error()` is called. `True` or `False`. docs/canvas.md, Errbacks."),
    SettingSpec(
        "LIMITER_MAX_RESCHEDULES", 20, count_or_zero, "djwork.E024",
        "times a job over a rate limit goes back to wait before it takes the retry path, e.g. 20", "Jobs",
        "Times a job whose limiter refused it (`limiter.OverLimit`) is rescheduled, without touching its retry"
        " count, before it takes the normal retry path; a limiter's own `reschedule=` overrides it. docs/limiters.md."),
    SettingSpec("DEAD_MAX_JOBS", 10_000, count, "djwork.E011", "size cap of the dead set, e.g. 10000", "Jobs",
                "Size cap of the dead set; the oldest entries are trimmed."),
    SettingSpec("DEAD_MAX_BYTES", 64 * 1024 * 1024, count, "djwork.E011",
                "byte cap of the dead set, e.g. 67108864 (64 MiB)", "Jobs",
                "Byte cap of the dead set (its members' JSON): past it, the oldest entries are trimmed, the newest"
                " always kept. djwork's own: Sidekiq caps `dead` by count and age only. docs/wire.md, dead.",
                doc_default="`67108864` (64 MiB)"),
    SettingSpec("DEAD_TIMEOUT", 180 * 24 * 3600, seconds, "djwork.E010",
                "seconds a dead job is kept, e.g. 15552000 (180 days)", "Jobs",
                "Seconds a dead job is kept.", doc_default="`15552000` (180 days)"),
    SettingSpec("HISTORY_MAX_LENGTH", 10_000, count, "djwork.E011", "runs kept in the history stream, e.g. 10000",
                "Jobs", "Runs kept in the execution history stream (about: at most 200 more)."),
    SettingSpec("RESULT_TTL", 24 * 3600, count, "djwork.E011", "seconds a task result is kept, e.g. 86400", "Jobs",
                "Seconds a result record (Django Tasks, and a djwork job's `AsyncResult`) is kept after it is"
                " written; also how long a revoke holds (docs/celery.md)."),
    SettingSpec("ITERABLE_CHECKPOINT_ITEMS", 1000, count, "djwork.E011",
                "items between an iterable job's checkpoints, e.g. 1000", "Jobs",
                "An iterable job (`djwork.IterableJob`) saves its cursor at least every this many items (or"
                " `ITERABLE_CHECKPOINT_SECONDS`, whichever comes first): after a `kill -9` at most the items"
                " since the last checkpoint run again. A job's `checkpoint_items` wins. docs/iterable.md."),
    SettingSpec("ITERABLE_CHECKPOINT_SECONDS", 5.0, seconds, "djwork.E010",
                "seconds between an iterable job's checkpoints, e.g. 5", "Jobs",
                "An iterable job saves its cursor at least this often while it runs; a job's"
                " `checkpoint_seconds` wins. docs/iterable.md."),
    SettingSpec("ITERABLE_STATE_TTL", 30 * 24 * 3600, count, "djwork.E011",
                "seconds an iterable job's saved cursor is kept, e.g. 2592000 (30 days)", "Jobs",
                "Seconds an iterable job's state (cursor, items done, segments) is kept after its last"
                " checkpoint; deleted at once when the iteration completes. docs/iterable.md.",
                doc_default="`2592000` (30 days)"),
    SettingSpec("RESULTS", False, flag, "djwork.E017", "True stores each djwork job's outcome for AsyncResult.",
                "Jobs",
                "Store each djwork job's outcome (return value or error) for `AsyncResult`, as Celery with a result"
                " backend (`CELERY_RESULT_BACKEND`) does. Off by default, as in Celery and Sidekiq: a stored"
                " outcome costs a write per job and about 250 bytes of Redis kept `RESULT_TTL`. A job's or a"
                " call's `ignore_result=False` turns it on for that job (`True` off); decided at enqueue. Django"
                " Tasks results, and the results a canvas passes between its steps, are kept whatever it says."
                " `get()` or `state` of a job that stores nothing because of this setting raises `djwork.ResultsOff`"
                " (one that asked, `ignore_result=True`: `get()` is `None`, as in Celery). `True` or `False`."
                " docs/celery.md."),
    SettingSpec("TRACK_STARTED", False, flag, "djwork.E017",
                "True records STARTED in a job's result record when a worker starts it.", "Jobs",
                "Record `STARTED` in a job's result record as a worker starts it, so `AsyncResult.state` reads"
                " `STARTED` while it runs (Celery's `task_track_started`); a job's own `track_started=` wins. It"
                " costs one Redis round trip per started job that asks for it; never written for a job that stores"
                " no result (`RESULTS` off, `ignore_result`). `True` or `False`. docs/celery.md.",
                check=check_track_started, also=("djwork.W002",)),
    SettingSpec("RESULT_MAX_BYTES", 512 * 1024, count, "djwork.E011",
                "largest JSON return value stored, in bytes, e.g. 524288", "Jobs",
                "Largest return value stored, as JSON bytes; a larger one (or one JSON can't carry) is stored as a"
                " `djwork.ResultNotStored` failure record instead. docs/celery.md."),
    SettingSpec(
        "STRICT_ARGS", True, flag, "djwork.E017",
        "True rejects job arguments that don't survive a JSON round trip (Sidekiq's strict_args!).", "Jobs",
        "Refuse, at enqueue, arguments that JSON can't carry unchanged (Sidekiq's `strict_args!`). `True` or"
        " `False`."),
    SettingSpec("CLIENT_MIDDLEWARE", [], sequence, "djwork.E008", IMPORT_HINT, "Jobs",
                "Dotted paths or callables; `middleware(payload, queue, call_next)`. A class is instantiated once.",
                check=check_importables),
    SettingSpec("SERVER_MIDDLEWARE", [], sequence, "djwork.E008", IMPORT_HINT, "Jobs",
                "Dotted paths or callables; `middleware(job, payload, queue, call_next)`.", check=check_importables),
    SettingSpec(
        "ALIASES", {}, name_map, "djwork.E012", "e.g. {'HardWorker': 'myapp.tasks.hard_work'}", "Jobs",
        "Job names (e.g. a Ruby class name in a payload from Sidekiq) mapped to the dotted path of the djwork job that"
        " runs them. Strings only."),
    # --- Periodic jobs (docs/periodic.md) ---
    SettingSpec(
        "LEADER", True, flag, "djwork.E040", "False keeps this process out of the leader election.", "Periodic",
        "Whether this process campaigns for the leader lease (`dear-leader`); the leader runs the periodic entries."
        " `False`, or `DJWORK_LEADER=false` in the environment, keeps it out. docs/periodic.md."),
    SettingSpec(
        "PERIODIC", [], periodic_list, "djwork.E041",
        "An entry looks like {'cron': '*/5 * * * *', 'job': 'myapp.tasks.refresh', 'args': [1]}.", "Periodic",
        "Periodic (cron) entries: dicts with `cron` (five fields or `@hourly`-style) and `job`, optionally `name`"
        " (the entry id; default the job), `args`, `kwargs`, `queue`, `tz` (default `TIME_ZONE`), `catch_up`"
        ' (`"none"`, `"latest"`, `"all"`; default `"latest"`), `max_lookback` and `lock_ttl` (seconds, default one'
        " day each), `overlap` (default `True`). Exactly one enqueue per slot; docs/periodic.md.",
        check=check_periodic_setting, also=("djwork.E042", "djwork.E043", "djwork.E044", "djwork.E045")),
    # --- Metrics (docs/metrics.md) ---
    SettingSpec(
        "METRICS", True, flag, "djwork.E017", "False stops recording per-class execution metrics.", "Metrics",
        "Record per-class execution metrics (Sidekiq 8's metrics keys, written with each heartbeat) and, on"
        " the leader, the per-queue samples. `True` or `False`. docs/metrics.md."),
    SettingSpec(
        "METRICS_TOKEN", None, optional_text, "djwork.E060",
        "None (staff sessions only) or a secret string a scraper sends as 'Authorization: Bearer <token>'.",
        "Metrics",
        "Bearer token that lets a Prometheus scraper read `/djwork/metrics` without a session; `None`: staff"
        " sessions only. docs/metrics.md."),
    SettingSpec(
        "TEST_CLOCK", None, clock_setting, "djwork.E046",
        "None outside tests; e.g. {'speed': 20} runs the leader's and the periodic entries' time 20 times faster.",
        "Periodic",
        "For tests only. `None`: Redis's clock. A dict of `speed`, `origin`, `start` (simulated time is"
        " `start + (Redis time - origin) * speed` for the leader lease and the periodic entries) and `skew`"
        " (seconds added to this host's clock reading). docs/periodic.md."),
    # --- Dashboard (docs/dashboard.md) ---
    SettingSpec(
        "DASHBOARD_LATENCY_WARNING", 300.0, seconds, "djwork.E010",
        "seconds a queue's oldest job may wait before the dashboard warns, e.g. 300", "Dashboard",
        "Seconds the oldest job of a queue may have waited before the dashboard's health strip warns about that"
        " queue's latency."),
)

DEFAULTS: dict[str, Any] = {spec.name: spec.default for spec in SETTINGS}
