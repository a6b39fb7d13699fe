"""``result <jid>``: a job's stored outcome (Celery's AsyncResult); ``revoke <jid>``: stop a job (docs/celery.md).

Both are the public calls any code makes (``djwork.AsyncResult``, ``djwork.revoke``): the dashboard has no page
for them beyond the History page's list of revoked jobs.
"""

from __future__ import annotations

from typing import Any

from djwork import api
from djwork.cli.confirm import confirm
from djwork.cli.output import ATTENTION, OK, Context
from djwork.cli.parsing import acting, looking
from djwork.options import check_jid
from djwork.results import AsyncResult
from djwork.results import record as result_record
from djwork.results.revoke import revoke


def run_result(ctx: Context) -> int:
    jid = check_jid(ctx.options["jid"], "result")
    outcome = AsyncResult(jid)
    state = outcome.state
    value = outcome.result
    out = {"jid": jid, "state": state, "ready": state in result_record.READY_STATES,
           "result": value if state == "SUCCESS" else None,
           "error": f"{type(value).__name__}: {value}" if isinstance(value, BaseException) else None,
           "traceback": outcome.traceback, "date_done": outcome.date_done}
    if ctx.json:
        ctx.emit(out)
    else:
        ctx.say(f"Job {jid}: {state}" + (f" at {out['date_done']:%Y-%m-%d %H:%M:%S} UTC" if out["date_done"] else ""))
        if state == "SUCCESS":
            ctx.say(f"  result  {value!r}")
        elif out["error"]:
            ctx.say(f"  error   {out['error']}")
        if state == "PENDING":
            ctx.say("  (no result record: not run yet, run with results off, expired, or an unknown jid)")
    return OK


def run_revoke(ctx: Context) -> int:
    jid = check_jid(ctx.options["jid"], "revoke")
    found = api.find_job(jid, runs=0)
    what = f"{found.job.display_class} {jid}, {found.where}" if found.job else f"job {jid} ({found.where})"
    confirm(ctx, f"Revoke {what}: if it waits in a queue, scheduled or retry it is removed; if it runs, its "
                 "revoked flag asks it to stop; a copy fetched later is dropped.")
    removed = revoke(jid)
    if ctx.json:
        ctx.emit({"action": "revoke", "jid": jid, "done": int(removed), "where": found.where})
    elif removed:
        ctx.say(f"Revoked job {jid}: removed from where it waited.")
    else:
        ctx.say(f"Revoked job {jid}: it was not waiting anywhere (running, finished, or beyond the search); a copy "
                "fetched later is dropped, and a running one can check self.request.is_revoked().")
    return OK if removed or found.where == "running" else ATTENTION


def register(verbs: Any) -> None:
    looking(verbs, "result", run_result, "a job's stored result (when results are on for it)").add_argument("jid")
    acting(verbs, "revoke", run_revoke, "revoke a job (Celery's revoke, without terminate)").add_argument("jid")
