"""djwork's redis-py client and pipeline: a WRONGTYPE reply comes back as ``djwork.WrongTypeKey`` naming its key.

Redis answers a command on a key of the wrong type with a bare ``WRONGTYPE
Operation against a key holding the wrong kind of value``: the leader logged
that for a periodic entry's state every 5 s, and the heartbeat called its
whole stats window lost over one metrics key, neither saying which key. Every
pooled client djwork makes (djwork.redis.policy) is a ``NamingRedis``, and its
pipelines ``NamingPipeline``s: on that error path only, one more pipelined
round trip of ``TYPE`` calls finds the culprit (djwork.redis.key_types.name_culprits),
and the key is reported to the key guard (djwork.redis.key_reports). Any other
reply, and every success, passes through untouched.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import redis as redis_py
from redis.client import Pipeline
from redis.exceptions import ResponseError

from djwork.redis import key_reports
from djwork.redis.key_types import WrongTypeKey, command_keys, is_wrong_type, name_culprits


def _unnamed_script(wanted: str) -> str:
    return wanted


# The name of a Lua script from its SHA1. djwork.redis.scripts sets it when imported: it reaches Redis
# through this module's clients, so this module can't import it without a cycle.
script_namer: Callable[[str], str] = _unnamed_script


class NamingPipeline(Pipeline):
    """A redis-py Pipeline whose WRONGTYPE replies are WrongTypeKeys naming their keys."""

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        stack = list(self.command_stack)
        replies = super().execute(raise_on_error=False)
        wrong = [index for index, reply in enumerate(replies) if is_wrong_type(reply)]
        if wrong:
            self._name(stack, replies, wrong)
        if raise_on_error:
            for reply in replies:
                if isinstance(reply, WrongTypeKey):
                    raise reply
            # redis-py's own error (the command's name and number put in front of the message).
            self.raise_first_error(stack, replies)
        return replies

    def _name(self, stack: list[Any], replies: list[Any], wrong: list[int]) -> None:
        def run(commands: list[tuple[Any, ...]]) -> list[Any]:
            for command in commands:
                self.execute_command(*command)
            return Pipeline.execute(self, raise_on_error=False)

        name_replies([args for args, _options in stack], replies, wrong, run)


class NamingRedis(redis_py.Redis):
    """A redis-py client whose commands and pipelines raise WrongTypeKey for a WRONGTYPE reply."""

    def execute_command(self, *args: Any, **options: Any) -> Any:
        try:
            return super().execute_command(*args, **options)
        except ResponseError as error:
            if not is_wrong_type(error):
                raise
            raise name_replies_of_one(self, args, error) from error

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> NamingPipeline:
        return NamingPipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)


def name_replies_of_one(client: redis_py.Redis, command: Sequence[Any], error: ResponseError) -> WrongTypeKey:
    replies: list[Any] = [error]

    def run(commands: list[tuple[Any, ...]]) -> list[Any]:
        pipe = Pipeline(client.connection_pool, client.response_callbacks, False, None)
        for each in commands:
            pipe.execute_command(*each)
        return pipe.execute(raise_on_error=False)

    name_replies([command], replies, [0], run)
    return replies[0]


def name_replies(commands: Sequence[Sequence[Any]], replies: list[Any], wrong: list[int],
                 run: Callable[[list[tuple[Any, ...]]], list[Any]]) -> None:
    """Replace each WRONGTYPE reply in ``replies`` (at the ``wrong`` indexes) with a WrongTypeKey, and report it.

    ``run(commands)`` sends commands in one round trip and returns their
    replies: once for every candidate's TYPE, once for the reports.
    """
    per_reply = {index: command_keys(commands[index]) for index in wrong}
    candidates = list(dict.fromkeys(key for found in per_reply.values() for key in found))
    try:
        types: dict[str, Any] | Exception = dict(zip(candidates, run([("TYPE", key) for key in candidates]),
                                                     strict=True))
    except Exception as lookup_error:  # the original error must surface, named or not
        types = lookup_error
    reports: list[tuple[Any, ...]] = []
    for index, found in per_reply.items():
        where = command_label(commands[index])
        looked_up = types if isinstance(types, Exception) else [types[key] for key in found]
        replies[index] = name_culprits(replies[index], where, found, looked_up)
        reports.extend(key_reports.report_commands(replies[index]))
    if reports:
        key_reports.report_all(reports, run)


def command_label(command: Sequence[Any]) -> str:
    """How an error names the command: ``Lua script 'fetch'`` for a script call, else the verb (``HMGET``)."""
    verb = (command[0].decode() if isinstance(command[0], bytes) else str(command[0])).upper()
    if verb in ("EVALSHA", "EVAL"):
        body = command[1].encode() if isinstance(command[1], str) else bytes(command[1])
        wanted = body.decode() if verb == "EVALSHA" else hashlib.sha1(body).hexdigest()
        name = script_namer(wanted)
        return f"Lua script {name!r}" if verb == "EVALSHA" or name != wanted else "a Lua script"
    return verb
