"""AckBuffer: finished jobs' acks waiting to ride on the next fetch, and the reconcile after a lost round trip.

A finished job is removed from its in-progress list by the next fetch.lua
call, not by a round trip of its own: a busy worker pays one round trip per
batch. Until then its ack waits here. When a fetch's or a take's reply is
lost, Redis may hold jobs the lost call moved and may not have applied the
acks it carried: ``settle_lost_round_trip`` works out both from what Redis
holds now and what this process knows it runs.

Every method runs under the capsule's condition (slots.py), held by the
caller: a finishing job's ack and its slot are settled in one locked step.
"""

from __future__ import annotations

import collections

from djwork.worker.fetch import Ack, UnitOfWork


class AckBuffer:
    def __init__(self, reliable: bool) -> None:
        self.reliable = reliable
        self.pending: list[Ack] = []
        # A round trip's reply was lost: reconcile before fetching again.
        self.needs_reconcile = False
        # Set at the shutdown deadline: the jobs still running are requeued, so
        # their late finish must neither ack nor retry them.
        self.abandoned = False

    def add(self, unit: UnitOfWork) -> None:
        """Buffer the ack of a job its processor let go of (if it was acknowledged)."""
        if unit.ack_jid is not None and not self.abandoned and (self.reliable or unit.ack_jid):
            self.pending.append(Ack(unit.queue_index, unit.raw, unit.ack_jid, unit.locks, unit.result))

    def take(self) -> list[Ack]:
        """Every buffered ack, for the round trip about to carry them."""
        acks, self.pending = self.pending, []
        return acks

    def put_back(self, acks: list[Ack]) -> None:
        """Acks a round trip did not deliver go first in line again."""
        self.pending = acks + self.pending

    def reply_lost(self) -> None:
        """A fetch's, take's or give-back's outcome is unknown: reconcile before fetching again."""
        self.needs_reconcile = True

    def settle_lost_round_trip(self, held: dict[int, list[str]], running: collections.Counter[str],
                               sent: list[Ack]) -> list[tuple[int, str]]:
        """After a lost reply: re-buffer the acks in ``sent`` it did not apply; returns (queue index, raw) to adopt.

        ``held`` is what Redis's in-progress lists hold now, per queue index;
        ``running`` what runs here. In-memory state is trusted over Redis:
        what the lists hold beyond our running jobs and unsent acks was moved
        by the lost call, and is ours to run. Processors keep running and
        finishing jobs meanwhile, so "unsent acks" includes those buffered
        after the read.
        """
        adopted: list[tuple[int, str]] = []
        unsent: list[Ack] = []
        unaccounted_running = collections.Counter(running)
        for index, items in held.items():
            present = collections.Counter(items)
            for raw in list(present):
                matched = min(present[raw], unaccounted_running[raw])
                present[raw] -= matched
                unaccounted_running[raw] -= matched
            for ack in sent:
                # Still on the list: the lost round trip did not apply this ack.
                if ack.queue_index == index and present[ack.raw] > 0:
                    present[ack.raw] -= 1
                    unsent.append(ack)
            for ack in self.pending:
                # Running when the lists were read, finished since: on the list,
                # no longer running, its ack buffered after ours were taken. Not
                # the lost fetch's: adopted, it would run a second time.
                if ack.queue_index == index and present[ack.raw] > 0:
                    present[ack.raw] -= 1
            for raw, count in present.items():
                adopted.extend((index, raw) for _ in range(max(0, count)))
        # In the same locked step that settles the acks: a taker's error flagging
        # a new reconcile after this point must not be cleared unseen.
        self.put_back(unsent)
        self.needs_reconcile = False
        return adopted
