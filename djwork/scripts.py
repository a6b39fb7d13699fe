"""Lua scripts from ``lua/``, one per file, called by basename.

Each script's SHA1 is computed once from its source; calls go out as EVALSHA.
A server that lost its script cache (restarted, failed over, SCRIPT FLUSH)
answers NOSCRIPT without running anything, and the one recovery rule,
everywhere, is to send the same call again as EVAL of the source, which
also caches the script again: ``evaluate`` on a client,
``evaluate_on_connection`` on a bare connection, ``execute`` for a pipeline
that carries script calls (``queue_evaluate``). Workers call ``load_all`` at
boot so the first job does not pay for the upload.
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


def _evalsha(name: str, keys: list[str] | tuple[str, ...], args: list[Any] | tuple[Any, ...]) -> tuple[Any, ...]:
    return ("EVALSHA", sha(name), len(keys), *keys, *args)


def _as_eval(evalsha: tuple[Any, ...] | list[Any], name: str | None = None) -> tuple[Any, ...]:
    """The EVAL that runs what an EVALSHA command names (what NOSCRIPT is answered with)."""
    if name is None:
        wanted = evalsha[1].decode() if isinstance(evalsha[1], bytes) else str(evalsha[1])
        name = next(candidate for candidate in names() if sha(candidate) == wanted)
    return ("EVAL", source(name), *evalsha[2:])


def evaluate(conn: Any, name: str, keys: list[str] | tuple[str, ...] = (),
             args: list[Any] | tuple[Any, ...] = ()) -> Any:
    """EVALSHA ``name``; on NOSCRIPT, EVAL the source (which caches it again)."""
    # execute_command, not conn.evalsha(): redis-py's wrapper costs more than the
    # call itself on the worker's per-batch path.
    command = _evalsha(name, keys, args)
    try:
        return conn.execute_command(*command)
    except NoScriptError:
        return conn.execute_command(*_as_eval(command, name))


def evaluate_on_connection(connection: Any, name: str, keys: list[str] | tuple[str, ...] = (),
                           args: list[Any] | tuple[Any, ...] = ()) -> Any:
    """``evaluate`` on a bare redis-py Connection (djwork.redis.DedicatedConnection), not a client.

    No pool, no client wrapper: for the worker's fetch, which runs once per batch.
    """
    command = _evalsha(name, keys, args)
    (reply,) = redis_layer.exchange(connection, [command])
    if isinstance(reply, NoScriptError):
        (reply,) = redis_layer.exchange(connection, [_as_eval(command, name)])
    if isinstance(reply, Exception):
        raise reply
    return reply


def queue_evaluate(pipe: Any, name: str, keys: list[str] | tuple[str, ...] = (),
                   args: list[Any] | tuple[Any, ...] = ()) -> None:
    """Queue an EVALSHA on a pipeline; run the pipeline with ``execute`` so a NOSCRIPT reply is recovered."""
    pipe.execute_command(*_evalsha(name, keys, args))


def execute(pipe: Any, *, raise_on_error: bool = True) -> list[Any]:
    """``pipe.execute()``, with every script call answered NOSCRIPT sent again as EVAL, its reply in its place.

    The re-sent calls go out together in one more round trip, on the same
    pipeline (so in a MULTI pipeline, as a transaction of their own, after
    the first one's EXEC). Only the refused calls are re-sent: NOSCRIPT
    means the call did not run, while everything else in the pipeline did.
    """
    commands = [args for args, _options in pipe.command_stack]
    replies = pipe.execute(raise_on_error=False)
    refused = [index for index, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
    if refused:
        for index in refused:
            pipe.execute_command(*_as_eval(commands[index]))
        for index, reply in zip(refused, pipe.execute(raise_on_error=False), strict=True):
            replies[index] = reply
    if raise_on_error:
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
    return replies


def load_all(conn: Any) -> dict[str, str]:
    """SCRIPT LOAD every script in one pipelined round trip; returns name -> sha."""
    all_names = names()
    pipe = conn.pipeline(transaction=False)
    for name in all_names:
        pipe.script_load(source(name))
    shas = pipe.execute()
    return dict(zip(all_names, shas, strict=True))
