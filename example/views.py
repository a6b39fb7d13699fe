"""The example's pages: an index, and a form per example job that enqueues it (the loop seen from a browser)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from example import tasks


class TwoNumbers(forms.Form):
    a = forms.IntegerField(min_value=-1_000_000, max_value=1_000_000, initial=2)
    b = forms.IntegerField(min_value=-1_000_000, max_value=1_000_000, initial=3)


class Seconds(forms.Form):
    # Bounded: a demo visitor should not be able to park every worker thread for an hour.
    seconds = forms.IntegerField(min_value=0, max_value=60, initial=5)


class Message(forms.Form):
    message = forms.CharField(max_length=200, initial="a failure from the form")


class Name(forms.Form):
    name = forms.CharField(max_length=100, initial="world")


def _enqueue_add(data: dict) -> str:
    return tasks.add.delay(data["a"], data["b"]).id


def _enqueue_sleep(data: dict) -> str:
    return tasks.sleep_for.delay(data["seconds"]).id


def _enqueue_fail(data: dict) -> str:
    return tasks.fail.delay(data["message"]).id


def _enqueue_greet(data: dict) -> str:
    return tasks.greet.delay(name=data["name"]).id


def _enqueue_multiply(data: dict) -> str:
    return str(tasks.multiply.enqueue(data["a"], data["b"]).id)


# name -> (what the job does, its form, how to enqueue it)
JOBS = {
    "add": ("example.tasks.add(a, b): returns a + b", TwoNumbers, _enqueue_add),
    "sleep_for": ("example.tasks.sleep_for(seconds) on queue low: a busy worker", Seconds, _enqueue_sleep),
    "fail": ("example.tasks.fail(message): raises, then retries and dies", Message, _enqueue_fail),
    "greet": ("example.tasks.greet(name=...): keyword arguments", Name, _enqueue_greet),
    "multiply": ("example.tasks.multiply(a, b): a django.tasks task", TwoNumbers, _enqueue_multiply),
}


def index(request: HttpRequest) -> HttpResponse:
    return render(request, "example/index.html")


@login_required
@require_http_methods(["GET", "POST"])
def enqueue(request: HttpRequest) -> HttpResponse:
    bound = {}
    if request.method == "POST":
        name = request.POST.get("job", "")
        if name not in JOBS:
            messages.error(request, f"There is no example job named {name!r}.")
            return redirect("example_enqueue")
        form = JOBS[name][1](request.POST, prefix=name)
        if form.is_valid():
            jid = JOBS[name][2](form.cleaned_data)
            messages.success(request, f"Enqueued {name} as job {jid}. Watch it on the dashboard.")
            return redirect("example_enqueue")
        bound[name] = form  # shown again with its errors
    jobs = [(name, text, bound.get(name) or form_class(prefix=name)) for name, (text, form_class, _) in JOBS.items()]
    return render(request, "example/enqueue.html", {"jobs": jobs})
