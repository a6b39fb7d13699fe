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
from typing import Any

import redis as redis_py
from redis.exceptions import MovedError, ResponseError

from djwork.redis.connections import is_failover_reply

MOVED_ROUNDS = 3  # a slot that moves again under each reload is a cluster mid-reshard: give the error back


def exchange_by_node(client: redis_py.RedisCluster, commands: list[tuple[Any, ...]],
                     pack: Callable[[Any, list[tuple[Any, ...]]], Any]) -> list[Any]:
    """Every reply of ``commands`` in order, error replies as exception objects in their place (as ``exchange``).

    ``pack`` is djwork.redis.pack (passed in: that module is the layer's entry and imports this one).
    """
    replies: list[Any] = [None] * len(commands)
    pending = list(range(len(commands)))
    for round_number in range(MOVED_ROUNDS):
        if round_number:
            client.nodes_manager.initialize()
        by_node: dict[str, list[int]] = {}
        nodes: dict[str, Any] = {}
        for index in pending:
            node = client.nodes_manager.get_node_from_slot(client.determine_slot(*commands[index]))
            by_node.setdefault(node.name, []).append(index)
            nodes[node.name] = node
        answered = _one_round(client, nodes, by_node, commands, pack)
        pending = [index for index in pending if isinstance(answered[index], MovedError)]
        for index, reply in answered.items():
            replies[index] = reply
        if not pending:
            break
    if replies and all(isinstance(reply, ResponseError) and is_failover_reply(reply) for reply in replies):
        raise replies[0]  # nothing ran anywhere: raised, the replay policy may send it again
    return replies


def _one_round(client: redis_py.RedisCluster, nodes: dict[str, Any], by_node: dict[str, list[int]],
               commands: list[tuple[Any, ...]], pack: Callable[[Any, list[tuple[Any, ...]]], Any]) -> dict[int, Any]:
    taken: list[tuple[Any, Any]] = []
    try:
        for name in by_node:
            pool = client.get_redis_connection(nodes[name]).connection_pool
            taken.append((pool, pool.get_connection()))  # dials now: a failure here sent nothing anywhere
        for (_pool, connection), indexes in zip(taken, by_node.values(), strict=True):
            connection.send_packed_command(pack(connection, [commands[index] for index in indexes]))
        answered: dict[int, Any] = {}
        failure: BaseException | None = None
        for (_pool, connection), indexes in zip(taken, by_node.values(), strict=True):
            try:
                for index in indexes:
                    try:
                        answered[index] = connection.read_response()
                    except ResponseError as error:
                        answered[index] = error
            except BaseException as error:
                # Read every other node's replies first: they are counted, so the policy knows they ran.
                connection.disconnect()
                failure = failure or error
        if failure is not None:
            raise failure
        return answered
    except BaseException:
        for _pool, connection in taken:
            connection.disconnect()  # a half-read socket is never lent again
        raise
    finally:
        for pool, connection in taken:
            pool.release(connection)
