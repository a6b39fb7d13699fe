"""Asking before an action, as the dashboard's confirmation pages do: the question states what and how many.

``--yes`` answers for a script. Without it, a person at a terminal is asked;
with no terminal to ask (cron, CI, a pipe) the action is refused rather than
taken: a deploy script that forgot ``--yes`` must not clear a queue.
"""

from __future__ import annotations

from djwork.cli.output import ATTENTION, Context, Failure


def confirm(ctx: Context, question: str) -> None:
    """Return when the action may go ahead; raise ``Failure`` (nothing done) otherwise."""
    if ctx.options.get("yes"):
        return
    isatty = getattr(ctx.stdin, "isatty", None)
    if not (isatty and isatty()):
        raise Failure(f"refused: {question} Nothing was done: pass --yes to confirm (no terminal to ask on).")
    # The prompt goes to stderr: stdout stays the verb's output, for whoever reads it.
    ctx.stderr.write(f"{question} Go ahead? [y/N] ")
    ctx.stderr.flush()
    answer = ctx.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise Failure("Nothing was done.", code=ATTENTION)
