"""Our own equivalents of Celery's Django example tasks (examples/django/demoapp/tasks.py), written the way
that module is, with only its import changed: ``from djwork import shared_task``.

The example's ``Widget`` model is Django's ``auth.Group`` here (a name and an id is all the tasks touch).
``error_task`` always raises ``Exception("Test error")``: two retries 10 minutes apart, then FAILURE;
``error_backoff_test`` the same with waits of 5, 10 and 20 s (``retry_backoff=5``, no jitter).
"""

from django.contrib.auth.models import Group as Widget

from djwork import shared_task


@shared_task
def add(x, y):
    return x + y


@shared_task
def mul(x, y):
    return x * y


@shared_task
def xsum(numbers):
    return sum(numbers)


@shared_task
def count_widgets():
    return Widget.objects.count()


@shared_task
def rename_widget(widget_id, name):
    w = Widget.objects.get(id=widget_id)
    w.name = name
    w.save()


@shared_task(
    bind=True,
    autoretry_for=(Exception,),
    retry_kwargs={"max_retries": 2, "countdown": 10 * 60},
)
def error_task(self):
    raise Exception("Test error")


@shared_task(
    bind=True,
    autoretry_for=(Exception,),
    retry_backoff=5,
    retry_jitter=False,
    retry_kwargs={"max_retries": 3},
)
def error_backoff_test(self):
    raise Exception("Test error")
