"""Every key djwork writes per job has a bound, a TTL or a cap (djwork/redis/key_bounds.py, docs/keys.md, Bounds)."""

from __future__ import annotations

import datetime as dt
import inspect
import re
from pathlib import Path

from djwork.batches.batch import LISTING_TTL
from djwork.redis import key_bounds, keys

DOCS = Path(__file__).resolve().parent.parent / "docs" / "keys.md"

# Names in djwork.redis.keys that are not keys: a hash field, and parsers of key names.
NOT_KEYS = {"PERIODIC_SYNCED_FIELD", "queue_name", "parse_in_progress", "PUSHED_HORIZON", "cluster_limiter_tag"}
SAMPLE_IDENTITY = "host.example:4242:0a1b2c3d4e5f"


def _sample(parameter: inspect.Parameter) -> object:
    annotation = str(parameter.annotation)
    if "datetime" in annotation:
        return dt.datetime(2026, 12, 6, 5, 13, tzinfo=dt.UTC)
    if "date" in annotation:
        return dt.date(2026, 12, 6)
    return {"identity": SAMPLE_IDENTITY, "day": "2026-12-06"}.get(parameter.name, "sample")


def key_names_of_the_keys_module() -> dict[str, list[str]]:
    """Each public name of djwork.redis.keys that makes a key -> sample key names (a prefix: the prefix itself)."""
    found: dict[str, list[str]] = {}
    for name, value in vars(keys).items():
        if name.startswith("_") or name in NOT_KEYS:
            continue
        if inspect.isfunction(value) and value.__module__ == keys.__name__:
            arguments = [_sample(p) for p in inspect.signature(value).parameters.values()]
            found[name] = [value(*arguments)]
        elif isinstance(value, str) and name.isupper():
            found[name] = [value]
        elif name == "BATCH_SUFFIXES":
            found[name] = [keys.batch("sample") + suffix for suffix in value]
    return found


def declared(key: str, prefix: bool) -> bool:
    if prefix:
        return any(bound.name.startswith(key) for bound in key_bounds.BOUNDS)
    return key_bounds.bound_of(key) is not None


def test_every_key_of_the_keys_module_is_declared():
    names = key_names_of_the_keys_module()
    assert len(names) > 50  # the walk found the module's keys, not an empty namespace
    missing = [(name, key) for name, samples in names.items() for key in samples
               if not declared(key, prefix=name.endswith("_PREFIX"))]
    assert missing == [], "keys with no entry in djwork/redis/key_bounds.py"


def test_every_per_job_key_has_a_ttl_or_a_cap():
    unbounded = [bound.name for bound in key_bounds.BOUNDS if bound.per_job and not bound.bounded]
    assert unbounded == []


def test_a_per_job_key_without_a_bound_would_fail():
    # The rule above is not vacuous: a declaration with neither is caught by it.
    bound = key_bounds.KeyBound("djwork:new:<id>", key_bounds.JOB)
    assert bound.per_job and not bound.bounded


def test_placeholders_match_real_key_names_only():
    identity = key_bounds.bound_of(keys.work(SAMPLE_IDENTITY))
    assert identity is not None and identity.name == "<identity>:work"
    assert key_bounds.bound_of("stat:processed").name == "stat:processed"
    now = dt.datetime(2026, 12, 6, 5, 13, tzinfo=dt.UTC)
    assert key_bounds.bound_of(keys.metrics_minute(now)).ttl == "8 h"
    assert key_bounds.bound_of(keys.metrics_ten_minutes(now)).ttl == "72 h"
    assert key_bounds.bound_of("somebody-elses-key") is None


def docs_rows() -> list[tuple[str, str, str, str]]:
    text = DOCS.read_text()
    section = text[text.index("## Bounds"):]
    section = section[:section.find("\n## ", 1)] if "\n## " in section[1:] else section
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 4 and cells[0].startswith("`"):
            rows.append((cells[0].strip("`").replace("\\|", "|"), *(("" if c == "—" else c) for c in cells[1:])))
    return rows


def test_docs_keys_md_says_the_same_bounds():
    expected = [(bound.name, bound.grows_with, bound.ttl, bound.cap) for bound in key_bounds.BOUNDS]
    assert docs_rows() == expected


def test_a_new_batch_or_canvas_drops_listing_entries_past_their_keys_life(raw_redis):
    import time

    import djwork
    from tests import worker_jobs

    old = time.time() - LISTING_TTL - 60
    raw_redis.zadd(keys.BATCHES, {"long-gone": old, "just-inside": old + 120})
    batch = djwork.Batch(description="new")
    with batch.jobs():
        worker_jobs.record.delay("in-a-batch")
    assert set(raw_redis.zrange(keys.BATCHES, 0, -1)) == {b"just-inside", batch.bid.encode()}
    raw_redis.zadd(keys.BATCHES, {"gone-again": old})
    header = [worker_jobs.record.s("first"), worker_jobs.record.s("second")]
    djwork.chord(header, worker_jobs.record.si("done")).apply_async()
    assert b"gone-again" not in raw_redis.zrange(keys.BATCHES, 0, -1)
