"""Lua scripts from ``lua/``, one per file, called by basename.

Each script's SHA1 is computed once from its source; calls go out as EVALSHA
and fall back to EVAL on NOSCRIPT (a restarted or failed-over server, SCRIPT
FLUSH), which also re-caches the script server-side. Workers call
``load_all`` at boot so the first job does not pay for the upload.
"""

from __future__ import annotations

import functools
import hashlib
import re
from importlib import resources
from pathlib import Path
from typing import Any

from redis.exceptions import NoScriptError

from djwork import redis as redis_layer

# A script is named by its file's basename; anything path-like would let a
# caller-supplied name read some other .lua file on disk.
SCRIPT_NAME = re.compile(r"\A[A-Za-z0-9_]+\Z")


class UnknownScriptError(LookupError):
    pass


def script_directory() -> Path:
    return Path(str(resources.files("djwork").joinpath("lua")))


@functools.cache
def source(name: str) -> str:
    if not isinstance(name, str) or not SCRIPT_NAME.match(name):
        raise UnknownScriptError(f"{name!r} is not a Lua script name (the basename of a file in lua/)")
    path = script_directory() / f"{name}.lua"
    if not path.is_file():
        raise UnknownScriptError(f"no Lua script named {name!r} in {script_directory()}")
    return path.read_text(encoding="utf-8")


@functools.cache
def sha(name: str) -> str:
    return hashlib.sha1(source(name).encode("utf-8")).hexdigest()


def names() -> list[str]:
    return sorted(path.stem for path in script_directory().glob("*.lua"))


def evaluate(conn: Any, name: str, keys: list[str] | tuple[str, ...] = (),
             args: list[Any] | tuple[Any, ...] = ()) -> Any:
    """EVALSHA ``name``; on NOSCRIPT, EVAL the source (which caches it again)."""
    # execute_command, not conn.evalsha(): redis-py's wrapper costs more than the
    # call itself on the worker's per-batch path.
    try:
        return conn.execute_command("EVALSHA", sha(name), len(keys), *keys, *args)
    except NoScriptError:
        return conn.execute_command("EVAL", source(name), len(keys), *keys, *args)


def evaluate_on_connection(connection: Any, name: str, keys: list[str] | tuple[str, ...] = (),
                           args: list[Any] | tuple[Any, ...] = ()) -> Any:
    """``evaluate`` on a bare redis-py Connection (djwork.redis.DedicatedConnection), not a client.

    No pool, no client wrapper: for the worker's fetch, which runs once per batch.
    """
    (reply,) = redis_layer.exchange(connection, [("EVALSHA", sha(name), len(keys), *keys, *args)])
    if isinstance(reply, NoScriptError):
        # Refused before running: the script cache was flushed (restart, failover).
        (reply,) = redis_layer.exchange(connection, [("EVAL", source(name), len(keys), *keys, *args)])
    if isinstance(reply, Exception):
        raise reply
    return reply


def queue_evaluate(pipe: Any, name: str, keys: list[str] | tuple[str, ...] = (),
                   args: list[Any] | tuple[Any, ...] = ()) -> None:
    """Queue an EVALSHA on a pipeline; callers run ``load_all`` first (boot) or handle NOSCRIPT."""
    pipe.evalsha(sha(name), len(keys), *keys, *args)


def load_all(conn: Any) -> dict[str, str]:
    """SCRIPT LOAD every script in one pipelined round trip; returns name -> sha."""
    all_names = names()
    pipe = conn.pipeline(transaction=False)
    for name in all_names:
        pipe.script_load(source(name))
    shas = pipe.execute()
    return dict(zip(all_names, shas, strict=True))
