"""The Lua loader against the private Redis: EVALSHA, NOSCRIPT fallback, one-round-trip preload, headers."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import redis as redis_py

from djwork import redis as redis_layer
from djwork.redis import scripts

REPO_LUA = Path(__file__).resolve().parent.parent / "lua"


@pytest.fixture
def conn(raw_redis):
    return redis_layer.client()


@pytest.fixture
def clear_script_caches():
    # source()/sha() are memoised per name; tests that swap the directory must not leak entries.
    scripts.source.cache_clear()
    scripts.sha.cache_clear()
    yield
    scripts.source.cache_clear()
    scripts.sha.cache_clear()


def test_evaluate_survives_script_flush_and_recaches(conn, raw_redis):
    sha = scripts.sha("unregister_if_empty")
    scripts.evaluate(conn, "unregister_if_empty", ["list", "registry"])
    assert raw_redis.script_exists(sha) == [True]
    raw_redis.script_flush()
    assert raw_redis.script_exists(sha) == [False]
    raw_redis.sadd("registry", "list")
    # EVALSHA now answers NOSCRIPT; the fallback EVAL must still run the script...
    assert scripts.evaluate(conn, "unregister_if_empty", ["list", "registry"]) == 1
    assert raw_redis.sismember("registry", "list") == 0
    # ...and leave it cached, so the next call is a plain EVALSHA again.
    assert raw_redis.script_exists(sha) == [True]


@pytest.mark.parametrize("transaction", [False, True], ids=["pipeline", "multi"])
def test_a_pipeline_survives_script_flush_and_runs_each_command_once(conn, raw_redis, transaction):
    raw_redis.script_flush()
    raw_redis.sadd("registry", "empty-list", "full-list")
    raw_redis.rpush("full-list", "job")
    pipe = conn.pipeline(transaction=transaction)
    pipe.incr("counter")
    scripts.queue_evaluate(pipe, "unregister_if_empty", ["empty-list", "registry"])
    scripts.queue_evaluate(pipe, "unregister_if_empty", ["full-list", "registry"])
    pipe.incr("counter")

    # Both EVALSHAs are refused (NOSCRIPT); they come back as EVAL, their replies in place.
    assert scripts.execute(pipe) == [1, 1, 0, 2]
    # The commands that ran the first time were not run again.
    assert raw_redis.get("counter") == b"2"
    assert raw_redis.smembers("registry") == {b"full-list"}
    assert raw_redis.script_exists(scripts.sha("unregister_if_empty")) == [True]


def test_a_pipeline_error_other_than_noscript_is_raised_or_returned(conn, raw_redis):
    raw_redis.set("not-a-list", "x")
    pipe = conn.pipeline(transaction=False)
    scripts.queue_evaluate(pipe, "unregister_if_empty", ["not-a-list", "registry"])
    pipe.incr("counter")
    replies = scripts.execute(pipe, raise_on_error=False)
    assert isinstance(replies[0], redis_py.ResponseError) and replies[1] == 1
    pipe.incr("counter")
    scripts.queue_evaluate(pipe, "unregister_if_empty", ["not-a-list", "registry"])
    with pytest.raises(redis_py.ResponseError, match="WRONGTYPE"):
        scripts.execute(pipe)
    assert raw_redis.get("counter") == b"2"


def test_sha_is_the_sha1_of_the_source_redis_computes():
    for name in scripts.names():
        assert scripts.sha(name) == hashlib.sha1(scripts.source(name).encode("utf-8")).hexdigest()


def test_load_all_loads_every_script_and_returns_their_shas(conn, raw_redis):
    raw_redis.script_flush()
    loaded = scripts.load_all(conn)
    assert sorted(loaded) == scripts.names() == sorted(path.stem for path in REPO_LUA.glob("*.lua"))
    for name, sha in loaded.items():
        assert sha == scripts.sha(name)
    assert raw_redis.script_exists(*loaded.values()) == [True] * len(loaded)


class SendSpy:
    """Counts writes to the socket: a pipeline is one write, however many commands it carries."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sends = 0
        original = redis_layer.CountingConnection.send_packed_command

        def counting(connection, *args, **kwargs):
            self.sends += 1
            return original(connection, *args, **kwargs)

        monkeypatch.setattr(redis_layer.CountingConnection, "send_packed_command", counting)


def commandstat_calls(raw_redis, command: str) -> int:
    stats = raw_redis.info("commandstats").get(f"cmdstat_{command}")
    return int(stats["calls"]) if stats else 0


def test_load_all_is_one_round_trip(conn, raw_redis, tmp_path, monkeypatch, clear_script_caches):
    # Several scripts, so one-per-command and one-for-all differ whatever lua/ holds today.
    bodies = {f"probe_{n}": f"-- probe_{n}: test script\nreturn {n}\n" for n in range(4)}
    for name, body in bodies.items():
        (tmp_path / f"{name}.lua").write_text(body, encoding="utf-8")
    monkeypatch.setattr(scripts, "script_directory", lambda: tmp_path)
    conn.ping()  # dial and handshake first, so only load_all's traffic is measured
    raw_redis.script_flush()
    spy = SendSpy(monkeypatch)
    replies_before = redis_layer.round_trips()
    calls_before = commandstat_calls(raw_redis, "script|load") + commandstat_calls(raw_redis, "script")

    loaded = scripts.load_all(conn)

    assert spy.sends == 1
    assert redis_layer.round_trips() - replies_before == len(bodies)  # one reply per SCRIPT LOAD, same trip
    calls_after = commandstat_calls(raw_redis, "script|load") + commandstat_calls(raw_redis, "script")
    assert calls_after - calls_before == len(bodies)
    assert loaded == {name: hashlib.sha1(body.encode()).hexdigest() for name, body in bodies.items()}
    assert all(conn.evalsha(loaded[f"probe_{n}"], 0) == n for n in range(4))


def test_unknown_script_name_raises(conn):
    with pytest.raises(scripts.UnknownScriptError):
        scripts.source("no_such_script")
    with pytest.raises(scripts.UnknownScriptError):
        scripts.evaluate(conn, "no_such_script", ["k"], [])
    assert issubclass(scripts.UnknownScriptError, LookupError)


@pytest.mark.parametrize("name", ["../outside", "inside/../../outside", "", "inside.lua", "/abs/inside"])
def test_script_names_cannot_leave_the_lua_directory(name, tmp_path, monkeypatch, clear_script_caches):
    # A name is a basename: a path that happens to reach some other .lua file is not a script.
    lua = tmp_path / "lua"
    lua.mkdir()
    (lua / "inside.lua").write_text("-- inside: x\nreturn 1\n", encoding="utf-8")
    (tmp_path / "outside.lua").write_text("return 2\n", encoding="utf-8")
    monkeypatch.setattr(scripts, "script_directory", lambda: lua)
    assert scripts.source("inside").endswith("return 1\n")
    with pytest.raises(scripts.UnknownScriptError):
        scripts.source(name)


HEADER_RULES = {
    "KEYS": re.compile(r"\bKEYS\b"),
    "ARGV": re.compile(r"\bARGV\b"),
    "the return value": re.compile(r"\bReturns?\b", re.IGNORECASE),
}


def header(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line)
    return lines


@pytest.mark.parametrize("path", sorted(REPO_LUA.glob("*.lua")), ids=lambda path: path.name)
def test_every_lua_script_opens_with_a_documenting_header(path):
    """Each Lua file opens with what it does, KEYS, ARGV and its return value: readable without its caller."""
    lines = header(path.read_text(encoding="utf-8"))
    assert lines, f"{path.name} does not open with a -- comment header"
    assert lines[0].startswith(f"-- {path.stem}: "), f"{path.name}: first line must be '-- {path.stem}: <what it does>'"
    text = "\n".join(lines)
    missing = [what for what, rule in HEADER_RULES.items() if not rule.search(text)]
    assert not missing, f"{path.name}: header does not document {', '.join(missing)} (say 'none' if unused)"


def test_header_rule_rejects_a_script_without_one():
    # Guards the rule above against passing vacuously.
    lines = header("-- bare: does a thing\nreturn redis.call('GET', KEYS[1]) -- ARGV unused, Returns value\n")
    text = "\n".join(lines)
    assert [what for what, rule in HEADER_RULES.items() if not rule.search(text)] == list(HEADER_RULES)


def test_there_are_scripts_to_check():
    assert scripts.names(), "lua/ is empty or djwork/lua no longer points at it"
