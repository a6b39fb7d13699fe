"""Periodic (cron) entries: what they are, when they fire, and the one Lua step that fires them (docs/periodic.md).

``entries`` parses ``DJWORK["PERIODIC"]`` and ``@djwork.periodic``, ``checks``
reports bad ones, ``schedule`` turns a cron line and a zone into UTC slots,
``plan`` decides what a tick asks for, ``claim`` builds the calls of
``lua/periodic_claim.lua``, ``locks`` handles a no-overlap entry's running
lock, ``clock`` the time they all run on. The worker's side (the leader lease
and the ticker) is in djwork/worker/leader.py and periodic.py; the read
model in djwork/api/periodic.py.
"""
