"""``get_task_logger(__name__)`` (Celery's ``celery.utils.log``): a plain ``logging.Logger`` of that name.

Celery's adds the task's name and id to each record through its own formatter; djwork's worker already logs
each job's start, end and failure with its class and jid (docs/logging.md), so a job's own lines need no
special logger: this is ``logging.getLogger(name)``, for code written against Celery's import.
"""

from __future__ import annotations

import logging


def get_task_logger(name: str) -> logging.Logger:
    """The logger named ``name``, as ``logging.getLogger(name)`` gives it."""
    return logging.getLogger(name)


def get_logger(name: str) -> logging.Logger:
    """Celery's ``get_logger``: the same."""
    return logging.getLogger(name)
