"""docs/cluster.md is the spec of the cluster's write side: it must name every Lua script, and its tags must hold."""

from __future__ import annotations

import re
from pathlib import Path

from redis.crc import key_slot

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "cluster.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = DOC.index(f"### {title}")
    end = DOC.find("\n#", start + 1)
    return DOC[start:end if end != -1 else len(DOC)]


def test_the_plan_has_one_row_for_every_lua_script():
    rows = re.findall(r"^\| `([a-z_]+\.lua)` \|", _section("Lua scripts"), flags=re.MULTILINE)
    assert len(rows) == len(set(rows)), "a script has two rows"
    assert sorted(rows) == sorted(path.name for path in (ROOT / "lua").glob("*.lua"))


SAMPLES = {"<name>": "default", "<bid>": "aZ09_x", "<id>": "nightly", "<jid>": "j1", "<identity>": "host:1:abc",
           "<stamp>": "1"}


def _concrete(name: str) -> str:
    for placeholder, sample in SAMPLES.items():
        name = name.replace(placeholder, sample)
    return name.replace("\\|", "|")


def _tag_rows() -> list[tuple[str, list[str]]]:
    table = DOC[DOC.index("| tag | keys that carry it"):]
    table = table[:table.index("\n\n")]
    rows = []
    for line in table.splitlines()[2:]:
        tag, carriers = re.match(r"\| `([^`]+)` \| (.*?) \| [^|]*\|$", line).groups()
        rows.append((_concrete(tag), [_concrete(key) for key in re.findall(r"`([^`]+)`", carriers)]))
    return rows


def test_every_key_of_the_tag_table_shares_the_slot_of_the_key_its_tag_names():
    # The design's premise: a name with no braces hashes whole, so {name} inside another key lands with it.
    rows = _tag_rows()
    assert {tag for tag, _keys in rows} >= {"{queue:default}", "{b-aZ09_x}", "{djwork:result:j1}"}
    for tag, carriers in rows:
        owner = tag.strip("{}")
        assert "{" not in owner and carriers, tag
        for key in carriers:
            assert key_slot(key.encode()) == key_slot(owner.encode()), (key, tag)


def test_the_keys_of_a_multi_key_step_are_in_different_slots_today():
    # What the "slots today" column rests on: the untagged names a fetch and a fail touch spread over slots.
    today = ["queue:default", "djwork:inprogress:host:1:abc|default", "djwork:isolated:default",
             "djwork:orphan-counts", "retry", "dead", "djwork:dead-bytes"]
    assert len({key_slot(key.encode()) for key in today}) == len(today)
