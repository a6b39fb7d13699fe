"""Django's Tasks framework: ``django.tasks`` on Django >= 6, the ``django_tasks`` backport on 5.2."""

from __future__ import annotations

try:  # Django 6.0+
    from django.tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task as DjangoTask
    from django.tasks.base import TaskError
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
except ImportError:  # pragma: no cover - exercised on Django 5.2
    from django_tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import Task as DjangoTask
    from django_tasks.base import TaskError
    from django_tasks.exceptions import InvalidTaskError as InvalidTask  # Django 6 dropped the "Error"
    from django_tasks.exceptions import TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started

__all__ = [
    "BaseTaskBackend",
    "DjangoTask",
    "InvalidTask",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
