"""Lua scripts from ``lua/``, one per file, called by basename.

Each script's SHA1 is computed once from its source; calls go out as EVALSHA.
A server that lost its script cache (restarted, failed over, SCRIPT FLUSH)
answers NOSCRIPT without running anything, and the one recovery rule,
everywhere, is to send the same call again as EVAL of the source, which
also caches the script again: ``evaluate`` on a client,
``evaluate_on_connection`` on a bare connection, ``execute`` for a pipeline
that carries script calls (``queue_evaluate``). Workers call ``load_all`` at
boot so the first job does not pay for the upload.

A WRONGTYPE reply names a script line, not the key; each of the three
ways raises (or, from ``execute``, returns) ``djwork.WrongTypeKey`` instead,
naming the key that holds the wrong type, found with one more pipelined
round trip of TYPE calls, on that error path only.
"""

from __future__ import annotations

import functools
import hashlib
import re
from importlib import resources
from pathlib import Path
from typing import Any

import redis as redis_py
from redis.exceptions import NoScriptError, ResponseError

from djwork import redis as redis_layer
from djwork.redis import key_reports, lua_keys
from djwork.redis import naming as redis_naming
from djwork.redis.cluster import servers
from djwork.redis.key_types import WrongTypeKey, is_wrong_type, name_culprits
from djwork.redis.naming import name_replies

# A script is named by its file's basename; anything path-like would let a
# caller-supplied name read some other .lua file on disk.
SCRIPT_NAME = re.compile(r"\A[A-Za-z0-9_]+\Z")
INCLUDE = re.compile(r"^--@include ([A-Za-z0-9_]+)$", re.MULTILINE)


class UnknownScriptError(LookupError):
    pass


def script_directory() -> Path:
    return Path(str(resources.files("djwork").joinpath("lua")))


@functools.cache
def source(name: str) -> str:
    """The text Redis runs for script ``name``: its file, its libraries in place, its key names in front."""
    text = _expanded(name, set())
    return lua_keys.prelude(lua_keys.requested(text)) + text


def _file_text(name: str) -> str:
    if not isinstance(name, str) or not SCRIPT_NAME.match(name):
        raise UnknownScriptError(f"{name!r} is not a Lua script name (the basename of a file in lua/)")
    path = script_directory() / f"{name}.lua"
    if not path.is_file():
        raise UnknownScriptError(f"no Lua script named {name!r} in {script_directory()}")
    return path.read_text(encoding="utf-8")


def _expanded(name: str, included: set[str]) -> str:
    """``name``'s text with each line ``--@include <library>`` replaced by that library's (expanded) text.

    One source for each concern (batch accounting, lock release, result writes...) that many
    scripts run, none of them drifting apart. A library already included earlier in the same
    script is not included again: its functions are defined once, whichever libraries ask for it.
    """
    def include(found: re.Match[str]) -> str:
        library = found.group(1)
        if library in included:
            return ""
        included.add(library)
        return _expanded(library, included)

    return INCLUDE.sub(include, _file_text(name))


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
        try:
            return conn.execute_command(*command)
        except NoScriptError:
            return conn.execute_command(*_as_eval(command, name))
    except ResponseError as error:
        if not is_wrong_type(error):
            raise
        raise _named(error, f"Lua script {name!r}", keys, lambda: _types_on_client(conn, keys),
                     key_reports.on_client(conn)) from error


def evaluate_on_connection(connection: Any, name: str, keys: list[str] | tuple[str, ...] = (),
                           args: list[Any] | tuple[Any, ...] = ()) -> Any:
    """``evaluate`` on a bare redis-py Connection (djwork.redis.DedicatedConnection), not a client.

    No pool, no client wrapper: for the worker's fetch, which runs once per batch.
    """
    send_on_connection(connection, name, keys, args)
    return receive_on_connection(connection, name, keys, args)


def send_on_connection(connection: Any, name: str, keys: list[str] | tuple[str, ...] = (),
                       args: list[Any] | tuple[Any, ...] = ()) -> None:
    """The first half of ``evaluate_on_connection``: send the EVALSHA, don't wait.

    For the worker's refill, which sends the next batch's fetch while it still
    runs the last jobs of this one, and reads the reply (``receive_on_connection``,
    with the same arguments) when it needs the jobs. Nothing else goes out on the
    connection between the two.
    """
    connection.send_packed_command(redis_layer.pack(connection, [_evalsha(name, keys, args)]))


def receive_on_connection(connection: Any, name: str, keys: list[str] | tuple[str, ...] = (),
                          args: list[Any] | tuple[Any, ...] = ()) -> Any:
    """The reply to ``send_on_connection``; NOSCRIPT answered by an EVAL round trip, as ``evaluate`` does.

    An error reply is raised (a WRONGTYPE naming its key); any other failure
    disconnects, so a half-read socket is never used again.
    """
    try:
        reply = connection.read_response()
    except ResponseError as error:
        reply = error
    except BaseException:
        connection.disconnect()
        raise
    if isinstance(reply, NoScriptError):
        (reply,) = redis_layer.exchange(connection, [_as_eval(_evalsha(name, keys, args), name)])
    if isinstance(reply, Exception):
        raise named_on_connection(connection, reply, f"Lua script {name!r}", keys)
    return reply


def named_on_connection(connection: Any, error: Exception, where: str,
                        candidates: list[str] | tuple[str, ...]) -> Exception:
    """A WRONGTYPE ``error`` as a WrongTypeKey naming its culprit (TYPE asked on ``connection``); others as they are."""
    if not is_wrong_type(error):
        return error
    named = _named(error, where, candidates,
                   lambda: redis_layer.exchange(connection, [("TYPE", key) for key in candidates]),
                   lambda commands: redis_layer.exchange(connection, commands))
    named.__cause__ = error
    return named


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
    # A cluster's pipeline stacks PipelineCommand objects, a server's (args, options) pairs.
    commands = [entry.args if hasattr(entry, "args") else entry[0] for entry in pipe.command_stack]
    replies = pipe.execute(raise_on_error=False)
    refused = [index for index, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
    if refused:
        for index in refused:
            pipe.execute_command(*_as_eval(commands[index]))
        for index, reply in zip(refused, pipe.execute(raise_on_error=False), strict=True):
            replies[index] = reply
    wrong = [index for index, reply in enumerate(replies) if is_wrong_type(reply)]
    if wrong:
        _name_pipeline_culprits(pipe, commands, replies, wrong)
    if raise_on_error:
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
    return replies


def _named(error: ResponseError, where: str, candidates: list[str] | tuple[str, ...],
           read_types: Any, send_report: Any) -> WrongTypeKey:
    """``error`` as a WrongTypeKey naming its culprit, reported to the key guard (djwork.redis.key_reports).

    ``read_types()`` returns the TYPE of each candidate; ``send_report(commands)`` sends the report.
    """
    try:
        types = read_types() if candidates else []
    except Exception as lookup_error:  # the original error must surface, named or not
        types = lookup_error
    named = name_culprits(error, where, candidates, types)
    key_reports.report(named, send_report)
    return named


def _types_on_client(conn: Any, candidates: list[str] | tuple[str, ...]) -> list[Any]:
    pipe = conn.pipeline(transaction=False)
    for key in candidates:
        pipe.type(key)
    return pipe.execute(raise_on_error=False)


def _name_pipeline_culprits(pipe: Any, commands: list[Any], replies: list[Any], wrong: list[int]) -> None:
    """Replace each WRONGTYPE reply in ``replies`` with a WrongTypeKey (for a pipeline not made by djwork's client)."""
    def run(lookups: list[tuple[Any, ...]]) -> list[Any]:
        for command in lookups:
            pipe.execute_command(*command)
        return pipe.execute(raise_on_error=False)

    name_replies(commands, replies, wrong, run)


def script_named(wanted: Any) -> str:
    """The name of the script whose SHA1 is ``wanted``; the SHA1 itself for a script not in lua/."""
    wanted = wanted.decode() if isinstance(wanted, bytes) else str(wanted)
    return next((name for name in names() if sha(name) == wanted), wanted)


redis_naming.script_namer = script_named


def load_all(conn: Any) -> dict[str, str]:
    """SCRIPT LOAD every script in one pipelined round trip per server (each primary of a cluster); name -> sha."""
    all_names = names()
    shas: list[Any] = []
    # A cluster refuses a keyless command in a pipeline, and a script is cached per node: each primary loads.
    for _name, server in servers(conn):
        pipe = server.pipeline(transaction=False)
        for name in all_names:
            pipe.script_load(source(name))
        shas = pipe.execute()
    return dict(zip(all_names, shas, strict=True))


def unregister_if_empty(conn: Any, list_key: str, registry: str) -> Any:
    """``unregister_if_empty.lua`` on one server; on a cluster (two slots) LLEN in the list's slot, then SREM.

    Between the cluster's two steps a live process's take may land on the list: its next beat registers
    the list again, so nothing is left unregistered for long.
    """
    if not isinstance(conn, redis_py.RedisCluster):
        return evaluate(conn, "unregister_if_empty", [list_key, registry])
    if conn.llen(list_key) == 0:
        return conn.srem(registry, list_key)
    return 0
