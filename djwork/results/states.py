"""Celery's task state names as module constants (``from celery import states``: ``states.SUCCESS``, ...).

The strings a djwork result record holds (djwork/results/record.py), under Celery's names and with its
sets, so code that compares ``result.state`` against ``states.FAILURE`` reads the same. docs/celery.md, Results.
"""

from __future__ import annotations

from djwork.results.record import FAILURE, PENDING, READY_STATES, RETRY, REVOKED, STARTED, SUCCESS

# Celery names a state for a message its worker has taken but not started; a djwork job has none (it is
# PENDING until it starts), but code that lists every state may name it.
RECEIVED = "RECEIVED"
REJECTED = "REJECTED"
IGNORED = "IGNORED"

UNREADY_STATES = frozenset({PENDING, RECEIVED, STARTED, REJECTED, RETRY})
EXCEPTION_STATES = frozenset({RETRY, FAILURE, REVOKED})
PROPAGATE_STATES = frozenset({FAILURE, REVOKED})
ALL_STATES = frozenset({PENDING, RECEIVED, STARTED, SUCCESS, FAILURE, RETRY, REVOKED})

__all__ = ["ALL_STATES", "EXCEPTION_STATES", "FAILURE", "IGNORED", "PENDING", "PROPAGATE_STATES", "READY_STATES",
           "RECEIVED", "REJECTED", "RETRY", "REVOKED", "STARTED", "SUCCESS", "UNREADY_STATES"]
