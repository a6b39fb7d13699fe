"""Demo jobs for ``./dev demo`` and the tests."""

import time

import djwork
from djwork.tasks_compat import DjangoTask

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the backport
    from django_tasks import task


@djwork.job
def add(a, b):
    """Returns a + b."""
    return a + b


@djwork.job(queue="low")
def sleep_for(seconds):
    """Sleeps, to show a busy worker."""
    time.sleep(seconds)
    return seconds


@djwork.job(retry=3, backtrace=True)
def fail(message):
    """Always raises, to fill the retry and dead sets."""
    raise RuntimeError(message)


@djwork.job
def greet(name="world"):
    """Keyword arguments travel in the payload's `kwargs` field."""
    return f"hello, {name}"


@task()
def multiply(a: int, b: int) -> int:
    """A django.tasks task run by the djwork backend."""
    return a * b


__all__ = ["DjangoTask", "add", "fail", "greet", "multiply", "sleep_for"]
