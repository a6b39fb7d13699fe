"""Slots: one capsule's processor slots, free, held by a taker, or running a job, under the capsule's one Condition.

Every part of a Manager (processor threads, the dispatcher, the takers, the
ack buffer) decides under this one condition, so a decision that spans
them ("take only as many jobs as there are slots nobody holds") is made in
one locked step. One lock, not one per part: a finishing job settles its
slot and its ack with a single acquisition, the per-job cost that bounds
throughput.

Methods marked "under the condition" expect the caller to hold it; the
counts are plain attributes for the same reason.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from djwork.worker.fetch import UnitOfWork


class Slots:
    def __init__(self, concurrency: int, *, keep_units: bool = False, async_places: int = 0) -> None:
        self.concurrency = concurrency
        self.condition = threading.Condition()
        self.free = concurrency  # slots neither running a job nor handed out for a fetch or a take
        # Places for coroutine jobs on the event loop (coroutines.py), apart from the thread slots:
        # a coroutine job moves from its processor's slot to a place, so the thread fetches again.
        self.async_places = async_places
        self.async_free = async_places
        self.waiting_for_place = 0  # processors holding a coroutine job until a place frees
        # Per queue index: takers blocked on it (or settling what they took), each holding a free slot.
        self.reserved_by_queue: collections.Counter[int] = collections.Counter()
        # Raw payload -> how many copies run here: what a reconcile matches Redis's lists against.
        self.running: collections.Counter[str] = collections.Counter()
        # Basic fetch only: the running jobs themselves, by identity. They exist
        # nowhere in Redis, so the shutdown requeue must push them back from here
        # (with reliable fetch the in-progress list holds them).
        self.units: dict[int, UnitOfWork] | None = {} if keep_units else None
        # The capsule's lifecycle, read by every part: quiet takes no new jobs, stopping ends the dispatcher.
        self.quieted = False
        self.stopping = False

    # --- under the condition ------------------------------------------------------------
    @property
    def reserved(self) -> int:
        """Slots held by takers."""
        return sum(self.reserved_by_queue.values())

    @property
    def unclaimed(self) -> int:
        """Free slots no taker holds: what a fetch may fill."""
        return self.free - self.reserved

    @property
    def busy(self) -> int:
        """Slots and places running a job or held for one (a lock-free read is fine for reporting)."""
        return self.concurrency - self.free + self.async_places - self.async_free

    @property
    def closed(self) -> bool:
        """Quiet or stopping: no new jobs."""
        return self.quieted or self.stopping

    def hold(self, count: int) -> None:
        """Take ``count`` free slots for a fetch in flight (``start_running`` or ``unhold`` settles them)."""
        self.free -= count

    def unhold(self, count: int) -> None:
        self.free += count

    def reserve(self, queue_index: int) -> None:
        self.reserved_by_queue[queue_index] += 1

    def unreserve(self, queue_index: int) -> None:
        """A taker lets go of its slot; whoever waits for one looks again."""
        self.reserved_by_queue[queue_index] -= 1
        self.condition.notify_all()

    def start_running(self, units: Iterable[UnitOfWork], held: int = 0) -> int:
        """Count jobs as running, filling ``held`` slots taken from ``free`` beforehand; returns how many."""
        count = 0
        for unit in units:
            self.running[unit.raw] += 1
            if self.units is not None:
                self.units[id(unit)] = unit
            count += 1
        self.free += held - count
        return count

    def finish(self, unit: UnitOfWork) -> None:
        """A job let go of its slot."""
        raw = unit.raw
        self.running[raw] -= 1
        if self.running[raw] <= 0:
            del self.running[raw]
        if self.units is not None:
            self.units.pop(id(unit), None)
        self.free += 1

    def move_to_place(self) -> None:
        """A coroutine job leaves its processor's slot for a place (``async_free`` > 0): still running."""
        self.async_free -= 1
        self.free += 1

    def finish_on_place(self, unit: UnitOfWork) -> None:
        """A coroutine job let go of its place."""
        self.finish(unit)
        self.free -= 1
        self.async_free += 1

    def running_units(self) -> list[UnitOfWork]:
        """Basic fetch: the jobs still running (or handed out), to push back at shutdown; [] otherwise."""
        return list(self.units.values()) if self.units is not None else []
