"""The seam where features take part in a push: one small interface, and the features listed once, in order.

A push (djwork.client) runs in this order; a feature's hook takes part in
the steps it defines a method for, and costs nothing in the others:

1. ``stamp(payload)``: before ``CLIENT_MIDDLEWARE``, so the user's middleware
   sees what the feature adds (a batch's ``bid``).
2. The user's ``CLIENT_MIDDLEWARE``, first entry first: it may edit the
   payload, change its queue, or stop the push.
3. ``publishing(payload, queue, at)``: after every user middleware, the
   payload as it will be written (Celery's ``before_task_publish``).
4. ``route(payload, queue, later, now)``: who writes the payload. The first
   hook that answers something other than None decides: a ``Pushed`` means
   the hook kept the push itself and nothing goes to Redis (a batch collects
   it, a testing mode collects or runs it); a ``Write`` is the command the
   client sends in the push's round trip in place of its LPUSH/ZADD (a unique
   job's lock-and-push step). None from every hook: the plain write.
5. ``pushed(payload, outcome)``: after the write, for every push middleware
   let through (Celery's ``after_task_publish``).

Routing runs after the user's middleware on purpose: a unique lock must be
taken by the push that really happens (a middleware may still stop it), and
a batch must collect the payload middleware may still change or stop.

This module imports nothing of djwork, so a feature can name ``Pushed`` and
``Write`` without an import cycle; ``steps_for`` resolves ``FEATURES`` by
dotted path once per config. docs/api.md (Client middleware) tells users.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

from django.utils.module_loading import import_string

# The features that take part in every push, one line each, in the order their hooks run in each step.
# Each names a PushHook subclass, built once per config. The route order matters: a batch keeps its
# pushes in every testing mode (a job collected by fake() would escape the batch's accounting and
# callbacks: docs/testing.md), and a testing mode takes a unique job before its lock would be taken
# (unique jobs take no lock in tests).
FEATURES: tuple[str, ...] = (
    "djwork.signals.PublishSignals",  # Celery's before_task_publish / after_task_publish
    "djwork.batches.collect.CollectInBatch",  # inside `with batch.jobs():` kept, written with the batch
    "djwork.testing.push_intercept.DivertInTests",  # djwork.testing modes, ALWAYS_EAGER: collected or run, not written
    "djwork.unique.UniquePush",  # a unique job: its lock's SET NX and the push (one Lua step; two on a cluster)
    "djwork.client.cluster_refusals.RefuseOnCluster",  # on a Redis Cluster: features it cannot run yet, refused
)

STEPS = ("stamp", "publishing", "route", "pushed")


class Pushed(NamedTuple):
    """What a push did: the jid written (None if middleware stopped it), or the jid already holding the lock."""

    jid: str | None
    duplicate_of: str | None = None


class Write(NamedTuple):
    """A hook's write of one payload, sent in the push's round trip in place of the client's LPUSH/ZADD."""

    command: tuple[Any, ...]
    jid: str
    outcome: Callable[[str, Any], Pushed]  # (jid, the command's reply) -> the push's outcome; never an error reply
    script: str | None = None  # the Lua script an EVALSHA command runs: re-sent as EVAL when Redis says NOSCRIPT
    listed: str | None = None  # the queue to add to `queues` in the same round trip (None: a scheduled push)
    lane: int = 0  # the lane of `listed` the write pushed to, registered after it (djwork/redis/lanes.py)


class PushHook:
    """A feature's part in a push, built once per config; it defines the steps it takes part in (see above)."""

    def __init__(self, config: Any) -> None:
        self.config = config


class HookSteps(NamedTuple):
    """The features' bound methods for each step, only those a hook defines: a step no hook uses is empty."""

    stamp: tuple[Callable[[dict[str, Any]], None], ...]
    publishing: tuple[Callable[[dict[str, Any], str, float | None], None], ...]
    route: tuple[Callable[[dict[str, Any], str, float | None, float], Pushed | Write | None], ...]
    pushed: tuple[Callable[[dict[str, Any], Pushed], None], ...]


def steps_of(hooks: tuple[Any, ...]) -> HookSteps:
    """Each step's methods, in the hooks' order."""
    return HookSteps(*(tuple(getattr(hook, step) for hook in hooks if callable(getattr(hook, step, None)))
                       for step in STEPS))


@functools.lru_cache(maxsize=4)
def steps_for(config: Any) -> HookSteps:
    """The ``FEATURES`` hooks built for ``config``, once per config (override_settings makes a new one)."""
    return steps_of(tuple(import_string(path)(config) for path in FEATURES))
