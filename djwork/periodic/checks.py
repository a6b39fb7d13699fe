"""The system check of ``DJWORK["PERIODIC"]`` and ``@djwork.periodic`` entries (ids djwork.E041-E045).

Each bad entry is its own error with a hint: unparseable cron (E042), an
unknown job or arguments the job refuses (E043), an unknown time zone (E044),
an entry id taken twice (E045), anything else (E041). ``runworkers`` runs
the checks at start like every management command; a worker that runs
without them (embedded) logs the same problems and runs the good entries.

djwork.settings.table imports this module, and djwork.jobs imports the
settings: the job is looked up without importing djwork.jobs (the registry
of the loaded module, or the object a dotted path names, duck-typed).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error
from django.utils.module_loading import autodiscover_modules, import_string

from djwork.periodic.entries import STRUCTURE, UNKNOWN_JOB, Entry, configured
from djwork.settings.kinds import Invalid, SettingSpec


def check_periodic_setting(spec: SettingSpec, values: Mapping[str, Any],
                           given: Mapping[str, Any]) -> list[CheckMessage]:
    value = values[spec.name]
    try:
        spec.parse(value)
    except Invalid as problem:
        return [Error(f"DJWORK[{spec.name!r}] must be {problem}, got {value!r}.", hint=spec.hint, id=STRUCTURE)]
    try:
        # @djwork.periodic declares entries when its module is imported; runworkers imports these at boot.
        autodiscover_modules("tasks", "jobs")
    except Exception:
        pass  # a module that fails to import fails runworkers' own boot, with its traceback
    entries, problems = configured(value, getattr(settings, "TIME_ZONE", None) or "UTC")
    errors: list[CheckMessage] = [Error(str(problem), hint=problem.hint, id=problem.check_id)
                                  for problem in problems]
    aliases = values.get("ALIASES") if isinstance(values.get("ALIASES"), Mapping) else {}
    for entry in entries:
        problem = job_problem(entry, aliases)
        if problem:
            errors.append(Error(f"{entry.source}: {problem[0]}", hint=problem[1], id=UNKNOWN_JOB))
    return errors


def job_problem(entry: Entry, aliases: Mapping[str, Any]) -> tuple[str, str] | None:
    """(message, hint) when ``entry.job`` names no djwork job, or one that refuses the entry's arguments."""
    target = aliases.get(entry.job, entry.job)
    registry = getattr(sys.modules.get("djwork.jobs"), "registry", {})
    job = registry.get(target)
    if job is None:
        try:
            job = import_string(target)
        except ImportError as error:
            return (f"no djwork job {entry.job!r} ({error})",
                    "Give the dotted path of a function decorated with @djwork.job (e.g. 'myapp.tasks.refresh'), "
                    "its name= or an ALIASES key.")
        if not (callable(getattr(job, "build_payload", None)) and callable(getattr(job, "check_call", None))):
            return (f"{entry.job!r} is not a djwork job",
                    "Decorate the function with @djwork.job (and put @djwork.periodic above it).")
    try:
        job.check_call(list(entry.args), dict(entry.kwargs))
    except TypeError as error:
        return (f"the job can't take the entry's arguments: {error}",
                "Give 'args' and 'kwargs' that match the job's parameters.")
    return None
