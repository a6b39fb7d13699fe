"""djwork.dead: the fail.lua / move_entry.lua calls every burying path builds, run against the private Redis."""

from __future__ import annotations

import json
import time

from djwork import dead
from djwork.payload import dumps, stored_payload
from djwork.redis import keys, scripts
from djwork.settings.conf import get_config
from djwork.worker.fetch import ISOLATE_AFTER_RECOVERIES
from djwork.worker.reaper import Reaper
from tests import result_jobs

IN_PROGRESS = "djwork:in-progress:host:1:abc:default"


def _job(jid: str, **fields) -> dict:
    return {"class": "HardJob", "args": [1], "queue": "default", "jid": jid, "retry": True, **fields}


def test_file_failure_to_retry_removes_from_in_progress_and_clears_the_orphan_count(raw_redis):
    raw = dumps(_job("a" * 24))
    raw_redis.lpush(IN_PROGRESS, raw)
    raw_redis.hset(keys.ORPHAN_COUNTS, "a" * 24, 2)
    assert dead.file_failure(IN_PROGRESS, raw, "retry", _job("a" * 24, retry_count=0), 1234.5, "a" * 24) \
        .evaluate(raw_redis) == 1
    ((member, score),) = raw_redis.zrange(keys.RETRY, 0, -1, withscores=True)
    assert json.loads(member)["retry_count"] == 0 and score == 1234.5
    assert raw_redis.llen(IN_PROGRESS) == 0 and not raw_redis.hexists(keys.ORPHAN_COUNTS, "a" * 24)
    assert raw_redis.zcard(keys.DEAD) == 0


def test_file_failure_to_dead_trims_dead_by_age_and_size(raw_redis, settings):
    settings.DJWORK = {**settings.DJWORK, "DEAD_MAX_JOBS": 2, "DEAD_TIMEOUT": 3600}
    now = time.time()
    raw_redis.zadd(keys.DEAD, {"too-old": now - 7200, "older": now - 60, "newer": now - 30})
    raw = dumps(_job("b" * 24))
    raw_redis.lpush(IN_PROGRESS, raw)
    dead.file_failure(IN_PROGRESS, raw, "dead", _job("b" * 24), now, "b" * 24, now=now).evaluate(raw_redis)
    members = [member.decode() for member in raw_redis.zrange(keys.DEAD, 0, -1)]
    assert members[0] == "newer" and json.loads(members[1])["jid"] == "b" * 24  # kept the newest two
    assert raw_redis.llen(IN_PROGRESS) == 0


def test_file_failure_drop_files_nothing_and_basic_fetch_removes_nothing(raw_redis):
    raw = dumps(_job("c" * 24))
    raw_redis.lpush(IN_PROGRESS, raw)
    dead.file_failure(IN_PROGRESS, raw, "drop", _job("c" * 24), time.time()).evaluate(raw_redis)
    assert raw_redis.llen(IN_PROGRESS) == 0 and not raw_redis.exists(keys.RETRY) and not raw_redis.exists(keys.DEAD)
    # Basic fetch: the job already left its queue, so the queue (KEYS[1]) is not touched.
    raw_redis.lpush(keys.queue("default"), raw)
    dead.file_failure(keys.queue("default"), raw, "retry", _job("c" * 24), 99.0,
                      from_in_progress=False).evaluate(raw_redis)
    assert raw_redis.llen(keys.queue("default")) == 1 and raw_redis.zcard(keys.RETRY) == 1


def test_move_to_dead_from_a_set_is_safe_to_replay(raw_redis):
    raw_redis.zadd(keys.SCHEDULE, {"{unreadable": 10.0})
    wrapper = dead.invalid_payload("{unreadable", "default", "unreadable entry in schedule: not JSON")
    call = dead.move_to_dead(keys.SCHEDULE, "zset", "{unreadable", wrapper)
    assert call.evaluate(raw_redis) == 1
    assert call.evaluate(raw_redis) == 0  # the entry is gone: a replay buries nothing twice
    assert raw_redis.zcard(keys.SCHEDULE) == 0
    (member,) = raw_redis.zrange(keys.DEAD, 0, -1)
    buried = json.loads(member)
    assert buried["class"] == buried["error_class"] == dead.INVALID_PAYLOAD_CLASS
    assert buried["args"] == ["{unreadable"] and buried["raw_payload"] == "{unreadable"
    assert buried["retry"] is False and len(buried["jid"]) == 24


def test_move_to_dead_from_a_list_clears_the_orphan_count(raw_redis):
    raw = dumps(_job("d" * 24))
    raw_redis.lpush(IN_PROGRESS, raw)
    raw_redis.hset(keys.ORPHAN_COUNTS, "d" * 24, 9)
    dead.move_to_dead(IN_PROGRESS, "list", raw, _job("d" * 24, error_class="djwork.PoisonPill"), "d" * 24) \
        .evaluate(raw_redis)
    assert raw_redis.llen(IN_PROGRESS) == 0 and not raw_redis.hexists(keys.ORPHAN_COUNTS, "d" * 24)
    (member,) = raw_redis.zrange(keys.DEAD, 0, -1)
    assert json.loads(member)["error_class"] == "djwork.PoisonPill"


def test_a_poison_pill_handed_to_two_reapers_is_buried_once(raw_redis):
    # Two reapers that both saw the process dead both get its poison pill (it stays on the list until it is
    # buried, so a reaper that dies first leaves it to the next): a burial chaos run found twice in dead.
    config = get_config()
    ref = result_jobs.add.delay(1, 2)
    (raw,) = raw_redis.lrange(keys.queue("default"), 0, -1)
    raw_redis.delete(keys.queue("default"))
    in_progress = keys.in_progress("host:9:crashed", "default")
    raw_redis.rpush(in_progress, raw)
    raw_redis.sadd(keys.IN_PROGRESS_REGISTRY, in_progress)
    raw_redis.hset(keys.ORPHAN_COUNTS, ref.jid, config.max_orphanings)
    first, second = Reaper(config, []), Reaper(config, [])
    recover = [in_progress, keys.queue("default"), keys.BEATS, keys.ORPHAN_COUNTS, keys.IN_PROGRESS_REGISTRY,
               keys.isolated("default")]
    arguments = ["host:9:crashed", config.orphan_threshold, config.max_orphanings, ISOLATE_AFTER_RECOVERIES]
    handed = [scripts.evaluate(raw_redis, "recover_orphans", recover, arguments) for _ in (first, second)]
    assert [reply[2:] for reply in handed] == [[raw], [raw]]  # both reapers were handed the pill

    for reaper in (first, second):
        reaper._bury(in_progress, stored_payload(raw), "host:9:crashed", "default")

    assert [json.loads(member)["jid"] for member in raw_redis.zrange(keys.DEAD, 0, -1)] == [ref.jid]
    assert raw_redis.llen(in_progress) == 0
