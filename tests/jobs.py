"""Job, task and client-middleware definitions used by tests/test_jobs.py and tests/test_tasks_backend.py.

Module level on purpose: the registry keys jobs by dotted path, Django's Tasks
framework only accepts module-level functions, and middleware is configured by
dotted path in settings.
"""

from __future__ import annotations

import djwork
from djwork.tasks_compat import TaskContext

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the backport
    from django_tasks import task


# --- djwork jobs ---------------------------------------------------------------
@djwork.job
def add(a, b=2):
    return a + b


@djwork.job()
def empty_parens(x):
    return x


@djwork.job(queue="mail", retry=5, backtrace=True, dead=False, tags=["billing", "eu"])
def with_options(user_id):
    return user_id


@djwork.job(queue="mail", backtrace=7, retry_queue="slow", retry_for=3600)
def with_more_options(user_id):
    return user_id


@djwork.job(name="Billing::Invoice", retry=False)
def named(invoice_id):
    return invoice_id


@djwork.job(retry=0)
def zero_retry():
    return None


@djwork.job(max_retries=3)
def celery_max_retries(x):
    return x


@djwork.job(bind=True, max_retries=2, default_retry_delay=7, name="tests.jobs.bound")
def bound(self, x, y=0):
    return {"self": self, "request": self.request, "sum": x + y}


@djwork.job(
    autoretry_for=(ValueError, KeyError),
    retry_backoff=True,
    retry_backoff_max=120,
    retry_jitter=False,
    expires=90,
)
def auto_retrying(x):
    if x < 0:
        raise ValueError(x)
    return x


@djwork.shared_task
def shared_bare(x):
    return x * 10


@djwork.shared_task(queue="low", retry=2)
def shared_with_options(x):
    return x * 100


@djwork.job
def schedule_meeting(room, when=None, *, notes=None):
    return room


@djwork.job
def anything(*args, **kwargs):
    return args, kwargs


@djwork.job
def no_args():
    return "ran"


# --- client middleware (configured by dotted path in override_settings) -----------
calls: list[tuple[str, str]] = []


def stamp_tenant(payload, queue, call_next):
    """Adds a field and retargets ``reroute-me`` arguments to queue "low"."""
    payload["tenant"] = "acme"
    if payload.get("args") == ["reroute-me"]:
        payload["queue"] = "low"
    calls.append(("stamp_tenant", payload["jid"]))
    return call_next()


def stop_odd(payload, queue, call_next):
    """Stops every job whose first argument is odd: returns None without calling call_next."""
    args = payload.get("args") or []
    if args and isinstance(args[0], int) and args[0] % 2:
        return None
    return call_next()


def stop_everything(payload, queue, call_next):
    return None


class CountingMiddleware:
    """A class entry: instantiated once, called per push."""

    seen = 0

    def __call__(self, payload, queue, call_next):
        type(self).seen += 1
        payload["counted"] = type(self).seen
        return call_next()


# --- Django Tasks (run by djwork.tasks_backend.DjworkBackend) -----------------------
@task()
async def async_double(x: int) -> int:
    return x * 2


@task(queue_name="low")
def low_priority_echo(value):
    return value


@task(takes_context=True)
def with_context(context: TaskContext, n: int) -> int:
    return n
