"""Commands sent to a Redis Cluster in one round trip per node: the cluster's counterpart of ``exchange``.

Each command goes to the primary that owns its key's slot (a script call: its first key's; every key of
one command must share a slot, which redis-py checks before anything leaves). The connections of every
node concerned are taken first and only then is anything sent, so a failed dial (a ``ConnectPhaseError``,
which the replay policy may retry) proves that no node received a command. The nodes' writes all leave
before the first reply is read: the round trips overlap.

A ``MOVED`` reply proves its node ran nothing (the slot moved, a failover): the slot map is reloaded and
those commands alone are sent again, to their new owner; every other reply is final.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import redis as redis_py
from redis.exceptions import MovedError, ResponseError

from djwork.redis.connections import is_failover_reply

MOVED_ROUNDS = 3  # a slot that moves again under each reload is a cluster mid-reshard: give the error back
Pack = Callable[[Any, list[tuple[Any, ...]]], Any]


class SentRound(NamedTuple):
    """A round sent and not yet read (``send_by_node``): each node's connection and its commands' indexes."""

    client: redis_py.RedisCluster
    commands: list[tuple[Any, ...]]
    taken: list[tuple[Any, Any, list[int]]]  # (pool, connection, indexes of the commands sent on it)
    pack: Pack


def exchange_by_node(client: redis_py.RedisCluster, commands: list[tuple[Any, ...]], pack: Pack) -> list[Any]:
    """Every reply of ``commands`` in order, error replies as exception objects in their place (as ``exchange``).

    ``pack`` is djwork.redis.pack (passed in: that module is the layer's entry and imports this one).
    """
    return receive_by_node(send_by_node(client, commands, pack))


def send_by_node(client: redis_py.RedisCluster, commands: list[tuple[Any, ...]], pack: Pack,
                 slots: list[int] | None = None) -> SentRound:
    """The first half of ``exchange_by_node``: every node's commands sent, no reply read yet.

    ``slots``: each command's slot when the caller knows it (the fetch's keys never change), which spares
    redis-py's lookup of every key of every command, on the worker's per-batch path.
    """
    by_node: dict[str, list[int]] = {}
    nodes: dict[str, Any] = {}
    for index, command in enumerate(commands):
        slot = slots[index] if slots is not None else client.determine_slot(*command)
        node = client.nodes_manager.get_node_from_slot(slot)
        by_node.setdefault(node.name, []).append(index)
        nodes[node.name] = node
    taken: list[tuple[Any, Any, list[int]]] = []
    try:
        for name, indexes in by_node.items():
            pool = client.get_redis_connection(nodes[name]).connection_pool
            taken.append((pool, pool.get_connection(), indexes))  # dials now: a failure here sent nothing anywhere
        for _pool, connection, indexes in taken:
            connection.send_packed_command(pack(connection, [commands[index] for index in indexes]))
    except BaseException:
        _release(taken, broken=True)
        raise
    return SentRound(client, commands, taken, pack)


def receive_by_node(sent: SentRound, rounds: int = MOVED_ROUNDS) -> list[Any]:
    """The replies of a ``send_by_node``, in order; commands answered MOVED sent again to the slot's new owner."""
    answered: list[Any] = [None] * len(sent.commands)
    failure: BaseException | None = None
    for _pool, connection, indexes in sent.taken:
        try:
            for index in indexes:
                try:
                    answered[index] = connection.read_response()
                except ResponseError as error:
                    answered[index] = error
        except BaseException as error:
            # Read every other node's replies first: they are counted, so the policy knows they ran.
            connection.disconnect()  # a half-read socket is never lent again
            failure = failure or error
    _release(sent.taken, broken=failure is not None)
    if failure is not None:
        raise failure
    moved = [index for index, reply in enumerate(answered) if isinstance(reply, MovedError)]
    if moved and rounds > 1:
        sent.client.nodes_manager.initialize()
        again = receive_by_node(send_by_node(sent.client, [sent.commands[index] for index in moved], sent.pack),
                                rounds - 1)
        for index, reply in zip(moved, again, strict=True):
            answered[index] = reply
    if answered and all(isinstance(reply, ResponseError) and is_failover_reply(reply) for reply in answered):
        raise answered[0]  # nothing ran anywhere: raised, the replay policy may send it again
    return answered


def _release(taken: list[tuple[Any, Any, list[int]]], broken: bool) -> None:
    for pool, connection, _indexes in taken:
        if broken:
            connection.disconnect()
        pool.release(connection)
