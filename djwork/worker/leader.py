"""Leader: one process of the cluster holds ``dear-leader`` (Sidekiq Enterprise's key) at a time.

A campaign is ``SET dear-leader <identity> NX PX 30000``; the leader renews
every 15 s (``lua/leader_renew.lua``: only while the key is still its own),
followers look again every 60 s, and a clean stop gives the lease up with
``lua/leader_release.lua`` (compare and delete in one step: a GET then a DEL
would delete a follower's fresh lease when ours lapsed in between). A lease
lost to a failed renew is re-campaigned for at once rather than a minute later.

The lease is an optimisation, never a fence: leader-only work runs only
while ``is_leader()``, which turns False before the lease can lapse in
Redis, but two processes may still both believe it for a moment (a pause, a
lost reply), so that work must be safe to do twice (the periodic claim is).

``DJWORK["LEADER"] = False`` or ``DJWORK_LEADER=false`` in the environment
keeps a process out of the campaign. Under ``TEST_CLOCK`` every duration
shrinks with its speed.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from djwork import redis as redis_layer
from djwork.periodic.clock import Clock
from djwork.redis import keys, scripts
from djwork.redis.outage import tracker as outage
from djwork.settings.conf import Config
from djwork.worker.component import JOIN_TIMEOUT, PeriodicComponent

logger = logging.getLogger("djwork.worker")

LEASE = 30.0
RENEW_EVERY = 15.0
LOOK_EVERY = 60.0
RETRY_AFTER_ERROR = 5.0
# is_leader() turns False this share of the lease after the last successful
# write, before Redis can expire the key and let a follower in.
TRUST = 0.8
ENV_OPT_OUT = ("false", "0", "no", "off")


def campaigns(config: Config) -> bool:
    """Whether this process may lead: ``LEADER`` and the ``DJWORK_LEADER`` environment variable both allow it."""
    return config.leader and os.environ.get("DJWORK_LEADER", "").strip().lower() not in ENV_OPT_OUT


class Leader(PeriodicComponent):
    name = "leader"

    def __init__(self, config: Config, identity: str) -> None:
        super().__init__()
        self.identity = identity
        self.enabled = campaigns(config)
        self.clock: Clock = config.test_clock
        self.lease_ms = max(1, int(self.clock.real_duration(LEASE) * 1000))
        self.term = 0  # counts the leases won: a new term tells leader-only work to resynchronise
        self._trusted_until = 0.0  # monotonic
        self._holding = False  # we believe the key is ours (renew it; release it on stop)
        self._failed = False
        self._state = threading.Lock()

    def is_leader(self) -> bool:
        return self._holding and time.monotonic() < self._trusted_until

    def interval(self) -> float:
        if self._failed:
            return self.clock.real_duration(RETRY_AFTER_ERROR)
        return self.clock.real_duration(RENEW_EVERY if self._holding else LOOK_EVERY)

    def first_delay(self) -> float:
        return 0.0

    def start(self) -> None:
        if not self.enabled:
            logger.info("djwork: this process does not campaign for leadership (LEADER=False or DJWORK_LEADER)")
            return
        super().start()

    def tick(self) -> None:
        if self._sleeper.stopped:
            return  # a stop arrived: a campaign now could win a lease nobody would release
        try:
            if self._holding and self._renew():
                return
            self._campaign()
            self._failed = False
            outage.succeeded("leader election")
        except Exception as error:
            self._failed = True
            if outage.failed("leader election", error):
                logger.debug("djwork: leader election round failed (%s); retrying", error)
            else:
                logger.warning("djwork: leader election round failed (%s); retrying", error)

    def _renew(self) -> bool:
        sent = time.monotonic()
        renewed = redis_layer.run(lambda conn: scripts.evaluate(
            conn, "leader_renew", [keys.LEADER], [self.identity, self.lease_ms]), idempotent=True, purpose="heartbeat")
        self._failed = False
        with self._state:
            if renewed == 1:
                self._trusted_until = sent + self.lease_ms / 1000 * TRUST
                return True
            self._holding = False
            self._trusted_until = 0.0
        logger.warning("djwork: %s lost the leader lease (it lapsed before a renew); campaigning again",
                       self.identity)
        return False

    def _campaign(self) -> None:
        if self._sleeper.stopped:
            return
        sent = time.monotonic()

        def attempt(conn: object) -> bytes | None:
            pipe = conn.pipeline(transaction=False)  # type: ignore[attr-defined]
            pipe.set(keys.LEADER, self.identity, nx=True, px=self.lease_ms)
            pipe.get(keys.LEADER)
            return pipe.execute()[1]

        # Replayable: the GET says who holds it, so a replay after a lost reply
        # that had won the lease still sees it is ours.
        holder = redis_layer.run(attempt, idempotent=True, purpose="heartbeat")
        won = holder is not None and holder.decode() == self.identity
        with self._state:
            stopped = self._sleeper.stopped
            if won and not stopped:
                if not self._holding:
                    self.term += 1
                    logger.info("djwork: %s is the leader now (term %d)", self.identity, self.term)
                self._holding = True
                self._trusted_until = sent + self.lease_ms / 1000 * TRUST
            else:
                self._holding = False
                self._trusted_until = 0.0
        if won and stopped:
            self._release()  # won while stop() ran: its release may have come first

    def stop(self, timeout: float = JOIN_TIMEOUT) -> None:
        """Stop campaigning and, if the lease is ours, release it (only if it still is)."""
        super().stop(timeout)
        with self._state:
            holding = self._holding
            self._holding = False
            self._trusted_until = 0.0
        if holding:
            self._release()

    def _release(self) -> None:
        try:
            # One try, so a stop with Redis away stays short: the lease lapses by itself.
            released = redis_layer.run(lambda conn: scripts.evaluate(
                conn, "leader_release", [keys.LEADER], [self.identity]), purpose="heartbeat")
            if released == 1:
                logger.info("djwork: %s released the leader lease", self.identity)
        except Exception as error:
            logger.warning("djwork: could not release the leader lease (%s); it lapses within %.0fs",
                           error, self.lease_ms / 1000)
