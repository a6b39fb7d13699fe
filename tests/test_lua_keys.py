"""Key names reach Lua only through KEYS, ARGV or the prelude generated from djwork/redis/keys.py (lua_keys.py).

A key name spelled in lua/ ('schedule', 'queue:' .. name, hash .. '-jids') is a second copy of keys.py
that a change there (a prefix, Cluster hash tags) would miss. The forbidden names, prefixes and suffixes
are read from keys.py itself, so a key added there is covered without touching this test.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from djwork import job_locks
from djwork import redis as redis_layer
from djwork.redis import keys, lua_keys, scripts

REPO_LUA = Path(__file__).resolve().parent.parent / "lua"

# A key name that is also a word of the scripts' vocabulary: a periodic claim's status and skip reason
# ('paused', part of its reply and a field of the entry's state). Allowed as a literal, but never as the key a
# command acts on (checked below). A job's outcome as batch_lib takes it is 'ok', 'retrying' or 'died', words
# no key has: spelled 'retry' and 'dead', a literal could not be told from the key.
WORDS_THAT_ARE_ALSO_KEYS = {keys.PAUSED}
KEY_ARGUMENT = re.compile(r"""redis\.p?call\(\s*['"][A-Za-z]+['"]\s*,\s*(['"])([^'"]*)\1""")


def lua_literals(text: str) -> list[str]:
    """The contents of the string literals of Lua source ``text``, comments left out."""
    found: list[str] = []
    position = 0
    while position < len(text):
        char = text[position]
        if text.startswith("--", position):
            end = text.find("\n", position)
            position = len(text) if end < 0 else end
        elif char in "'\"":
            literal, position = [], position + 1
            while position < len(text) and text[position] != char:
                if text[position] == "\\":
                    position += 1
                literal.append(text[position])
                position += 1
            found.append("".join(literal))
            position += 1
        else:
            position += 1
    return found


def forbidden_fragments() -> tuple[set[str], set[str], set[str]]:
    """(exact names, prefixes, suffixes) of djwork.redis.keys: constants, tuples, key functions' literal parts."""
    names, prefixes, suffixes = set(), set(), set()
    for name, value in vars(keys).items():
        if isinstance(value, str) and name.isupper():
            (prefixes if name.endswith("_PREFIX") else names).add(value)
        elif isinstance(value, tuple) and name.isupper():
            (prefixes if name.endswith("_PREFIXES") else suffixes).update(value)
        elif inspect.isfunction(value) and value.__module__ == keys.__name__:
            try:
                parts = lua_keys.pieces(value)
            except lua_keys.UnknownKeyNameError:
                continue  # a parser, or a key of dates (its prefix is a constant above)
            if isinstance(parts[0], str):
                prefixes.add(parts[0])
            if isinstance(parts[-1], str):
                suffixes.add(parts[-1])
    # A fragment with no letter ('|', ':') is punctuation every script uses for something else.
    def meaningful(fragments: set[str]) -> set[str]:
        return {fragment for fragment in fragments if re.search(r"[A-Za-z]", fragment)}

    return meaningful(names), meaningful(prefixes), meaningful(suffixes)


def key_literals(text: str) -> list[str]:
    """The literals of ``text`` that spell a key name, a key's prefix or a key's suffix (see the module doc)."""
    names, prefixes, suffixes = forbidden_fragments()
    flagged = []
    for literal in lua_literals(text):
        if ((literal in names and literal not in WORDS_THAT_ARE_ALSO_KEYS)
                or any(literal.startswith(prefix) for prefix in prefixes)
                or any(literal.endswith(suffix) for suffix in suffixes)):
            flagged.append(literal)
    flagged.extend(match.group(2) for match in KEY_ARGUMENT.finditer(text)
                   if match.group(2) in WORDS_THAT_ARE_ALSO_KEYS)
    return flagged


@pytest.mark.parametrize("path", sorted(REPO_LUA.glob("*.lua")), ids=lambda path: path.name)
def test_no_lua_file_spells_a_key_name(path):
    assert key_literals(path.read_text(encoding="utf-8")) == [], (
        f"{path.name} spells key names: take them from KEYS/ARGV or ask for them with a `--@keys` line")


def test_the_check_finds_every_kind_of_key_literal():
    # Guards the test above against passing vacuously: each way a key was spelled in lua/ before.
    sample = """
        redis.call('ZADD', 'schedule', score, payload)  -- a 'queues' in a comment is prose
        redis.call('LPUSH', 'queue:' .. queue, payload)
        batch_end('b-' .. parent, hash, outcome)
        redis.call('SCARD', hash .. '-jids')
        if string.sub(key, 1, 24) == "djwork:periodic-running:" then end
        redis.call('ZADD', 'dead', now, payload)
        local outcome, state = 'dead', 'ok'
        redis.call('SADD', 'paused', queue)
        local status = 'paused'
    """
    assert key_literals(sample) == ["schedule", "queue:", "b-", "-jids", "djwork:periodic-running:", "dead", "dead",
                                    "paused"]


def test_a_key_added_to_the_keys_module_is_covered(monkeypatch):
    monkeypatch.setattr(keys, "LATER_FEATURE_PREFIX", "djwork:later:", raising=False)
    assert key_literals("redis.call('DEL', 'djwork:later:' .. name)") == ["djwork:later:"]


def test_the_prelude_builds_the_keys_python_builds(raw_redis):
    # Every constant, tuple and text-argument key function of keys.py, evaluated by Redis's Lua.
    wanted = []
    for name, value in vars(keys).items():
        if name.startswith("_"):
            continue
        if isinstance(value, str | tuple) and name.isupper():
            wanted.append((name, f"keys.{name}", value))
        elif inspect.isfunction(value) and value.__module__ == keys.__name__:
            try:
                parts = lua_keys.pieces(value)
            except lua_keys.UnknownKeyNameError:
                continue
            arguments = [f"arg-{position}" for position in range(len(inspect.signature(value).parameters))]
            call = ", ".join(f"'{argument}'" for argument in arguments)
            if len(parts) > 1 or isinstance(parts[0], str):
                wanted.append((name, f"keys.{name}({call})", value(*arguments)))
    assert len(wanted) > 50
    body = "return {" + ", ".join(expression for _, expression, _ in wanted) + "}"
    replies = raw_redis.eval(lua_keys.prelude(name for name, _, _ in wanted) + body, 0)
    assert len(replies) == len(wanted)
    for (name, _, expected), reply in zip(wanted, replies, strict=True):
        got = [item.decode() for item in reply] if isinstance(reply, list) else reply.decode()
        assert got == (list(expected) if isinstance(expected, tuple) else expected), name


def test_lua_releases_only_the_lock_prefixes_python_allows(raw_redis):
    # The allow-list Lua checks is job_locks.PREFIXES: a payload naming any other key can't make a
    # script delete it, even when that key holds the jid.
    assert raw_redis.eval(lua_keys.prelude(["JOB_LOCK_PREFIXES"]) + "return keys.JOB_LOCK_PREFIXES", 0) == [
        prefix.encode() for prefix in job_locks.PREFIXES]
    conn = redis_layer.client()
    raw_redis.set(keys.unique("digest"), "jid-1")
    raw_redis.set(keys.periodic_lock("entry"), "jid-1")
    raw_redis.set("somebody:else", "jid-1")
    ties = "\n".join([keys.unique("digest"), keys.periodic_lock("entry"), "somebody:else"])
    assert scripts.evaluate(conn, "release_locks", [], ["jid-1", ties]) == 2
    assert raw_redis.exists(keys.unique("digest"), keys.periodic_lock("entry")) == 0
    assert raw_redis.get("somebody:else") == b"jid-1"


@pytest.fixture
def lua_directory(tmp_path, monkeypatch):
    scripts.source.cache_clear()
    scripts.sha.cache_clear()
    monkeypatch.setattr(scripts, "script_directory", lambda: tmp_path)
    yield tmp_path
    scripts.source.cache_clear()
    scripts.sha.cache_clear()


def test_a_library_asked_for_twice_is_included_once(lua_directory):
    (lua_directory / "clock_lib.lua").write_text("local function now() return 1 end\n", encoding="utf-8")
    (lua_directory / "a_lib.lua").write_text("--@include clock_lib\nlocal function a() return now() end\n")
    (lua_directory / "b_lib.lua").write_text("--@include clock_lib\nlocal function b() return now() end\n")
    (lua_directory / "both.lua").write_text("--@include a_lib\n--@include b_lib\nreturn a() + b()\n")
    text = scripts.source("both")
    assert text.count("local function now()") == 1
    assert text.index("local function now()") < text.index("local function a()") < text.index("local function b()")


def test_key_names_asked_for_anywhere_in_a_script_come_in_one_prelude(lua_directory, raw_redis):
    (lua_directory / "names_lib.lua").write_text("--@keys SCHEDULE queue\n"
                                                 "local function where(q) return keys.queue(q) end\n")
    (lua_directory / "uses.lua").write_text("--@include names_lib\n--@keys SCHEDULE DEAD\n"
                                            "return {keys.SCHEDULE, keys.DEAD, where('low')}\n")
    text = scripts.source("uses")
    assert text.startswith("local keys = {") and text.count("local keys") == 1
    assert raw_redis.eval(text, 0) == [keys.SCHEDULE.encode(), keys.DEAD.encode(), keys.queue("low").encode()]


def test_a_script_without_key_names_is_its_file_as_it_is(lua_directory):
    (lua_directory / "plain.lua").write_text("-- plain: x\nreturn 1\n")
    assert scripts.source("plain") == "-- plain: x\nreturn 1\n"


@pytest.mark.parametrize("asked", ["NO_SUCH_KEY", "metrics_minute", "parse_in_progress"])
def test_a_name_keys_py_cannot_give_is_a_clear_error(lua_directory, asked):
    (lua_directory / "wrong.lua").write_text(f"--@keys {asked}\nreturn 1\n")
    with pytest.raises(lua_keys.UnknownKeyNameError, match=asked):
        scripts.source("wrong")
