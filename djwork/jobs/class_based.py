"""``djwork.register_task(task)``: a class-based task (Celery's ``Task`` subclass with a ``run()`` method).

    class Refresh(djwork.Task):
        name = "refresh"
        autoretry_for = (ConnectionError,)

        def run(self, account_id):
            ...

    refresh = djwork.register_task(Refresh())
    refresh.delay(42)

Celery's ``app.register_task``. The instance itself becomes the registered job, in place: its class becomes
one made of the subclass over ``Job``, with the subclass's ``run`` as the job's body (bound: ``self`` is the
job), so a reference kept to the instance before registering delays too, as Celery's does. Register at import
time (a tasks.py), as a decorated job is declared: a worker resolves the job's name in its own registry.
"""

from __future__ import annotations

from typing import Any

from djwork.jobs import Job, Task

_classes: dict[type, type[Job]] = {}


def _job_class_of(base: type[Task]) -> type[Job]:
    made = _classes.get(base)
    if made is None:
        # Job's run (what a worker calls with the request) over the subclass's run (the body): the body is
        # kept as the job's function instead.
        made = _classes[base] = type(base.__name__, (base, Job), {
            "run": Job.run, "__module__": base.__module__, "__qualname__": base.__qualname__})
    return made


def register_task(task: Any) -> Job:
    """Register ``task``, an instance of a ``djwork.Task`` subclass with a ``run()`` method, as a job; returns
    it (the same object). Its class attributes are the job's options (``name``, ``autoretry_for``, ...);
    Celery's failure rules apply unless it sets ``failures``, as with ``@djwork.shared_task``."""
    if isinstance(task, Job):
        return task  # already a job (a decorated function, or registered before)
    cls = type(task)
    if not isinstance(task, Task):
        raise TypeError(f"register_task({task!r}): expected an instance of a djwork.Task subclass")
    body = getattr(cls, "run", None)  # djwork.Task has none of its own: this is the subclass's
    if not callable(body):
        raise TypeError(f"register_task({task!r}): {cls.__qualname__} has no run() method: it is the task's body")
    options: dict[str, Any] = {"bind": True}
    if cls.failures is None:
        options["failures"] = "celery"
    if not getattr(cls, "name", None):
        options["name"] = f"{cls.__module__}.{cls.__qualname__}"
    task.__class__ = _job_class_of(cls)
    Job.__init__(task, body, **options)
    return task
