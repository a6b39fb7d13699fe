"""Which list a job is pushed to: its queue's own list, or one of the queue's priority lanes (docs/priority.md).

The payload's ``lane`` field (-9..9, higher taken first) says where it waits;
no field, or 0, is ``queue:<name>`` as Sidekiq has it. A lane's list is
registered in the queue's ``djwork:lanes:<name>`` SET by every push to it,
after the push (so a fetch that empties the lane and unregisters it in between
is followed by a registration again, never by a job left unregistered).
On a Redis Cluster the lanes and their SET carry the queue's hash tag
(``djwork:lane:{queue:<name>}|<n>``, djwork/redis/key_layout.py), so they share the queue's slot: each
function takes the mode's ``layout``, one server's by default.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from djwork.redis import keys
from djwork.redis.cluster import is_cluster
from djwork.redis.key_layout import SINGLE_SERVER, Layout, layout

LANE_FIELD = "lane"
LANES = 9  # lanes -9..-1 below the queue's own list and 1..9 above it


def lane_of(payload: dict[str, Any]) -> int:
    """The payload's lane, 0 (the queue's own list) when it has none or one no worker would read."""
    lane = payload.get(LANE_FIELD)
    if isinstance(lane, bool) or not isinstance(lane, int) or not -LANES <= lane <= LANES:
        return 0
    return lane


@functools.lru_cache(maxsize=4)
def layout_for(config: Any) -> Layout:
    """The layout a push with ``config`` names lanes by, decided once per config (the client's, per push)."""
    return layout(is_cluster(config))


def list_key(queue: str, lane: int, layout: Layout = SINGLE_SERVER) -> str:
    """The list a job of ``lane`` waits on in ``queue``."""
    return layout.lane(queue, lane)


def push_commands(queue: str, lane: int, raws: list[Any], command: str = "LPUSH",
                  layout: Layout = SINGLE_SERVER) -> list[tuple[Any, ...]]:
    """The push of ``raws`` onto ``queue``'s list for ``lane``, its lane registered after it (module doc)."""
    pushes: list[tuple[Any, ...]] = [(command, list_key(queue, lane, layout), *raws)]
    if lane:
        pushes.append(("SADD", layout.lanes(queue), lane))
    return pushes


def registered(members: Any) -> list[int]:
    """The lanes a lanes SET's ``members`` (SMEMBERS's reply) names, highest first; anything else left out."""
    if not isinstance(members, (set, list)):
        return []
    numbers = set()
    for member in members:
        text = member.decode(errors="replace") if isinstance(member, bytes) else str(member)
        if text.lstrip("-").isdigit() and 0 < abs(int(text)) <= LANES:
            numbers.add(int(text))
    return sorted(numbers, reverse=True)


def promote_target(queue: str, payload: dict[str, Any], layout: Layout = SINGLE_SERVER) -> tuple[list[str], str]:
    """lua/promote.lua's KEYS[2..4] for ``payload`` going to ``queue`` now, and its lane argument ('' for none)."""
    lane = lane_of(payload)
    return [list_key(queue, lane, layout), keys.QUEUES, layout.lanes(queue)], str(lane) if lane else ""


def lane_of_raw(raw: Any) -> int:
    """``lane_of`` of a stored payload; only a payload whose text names the field is decoded."""
    marker = b'"lane":' if isinstance(raw, bytes) else '"lane":'
    if marker not in raw:
        return 0
    try:
        payload = json.loads(raw)
    except ValueError:
        return 0
    return lane_of(payload) if isinstance(payload, dict) else 0
