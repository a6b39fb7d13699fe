"""Which process holds a concurrent slot: the worker's identity, or one made up for any other process.

The reaper frees every slot of a process it finds dead by this identity
(``release_slots_of``), so a worker sets it to its heartbeat identity at boot.
A process that never does (a web process, a shell) gets ``host:pid:nonce``;
nothing reaps it, and ``lock_timeout`` alone bounds what it leaves behind.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading

from djwork.limiter.names import validate_identity

_lock = threading.Lock()
_assigned: tuple[int, str] | None = None  # (pid, identity): a forked child must not inherit its parent's
_made_up: tuple[int, str] | None = None


def set_process_identity(identity: str) -> None:
    """Hold slots on behalf of ``identity`` from now on (the worker's Sidekiq-style identity)."""
    global _assigned
    validate_identity(identity)
    with _lock:
        _assigned = (os.getpid(), identity)


def clear_process_identity() -> None:
    global _assigned
    with _lock:
        _assigned = None


def process_identity() -> str:
    global _made_up
    pid = os.getpid()
    assigned = _assigned
    if assigned is not None and assigned[0] == pid:
        return assigned[1]
    made_up = _made_up
    if made_up is None or made_up[0] != pid:
        with _lock:
            host = socket.gethostname().replace("\t", " ").replace("\n", " ") or "host"
            _made_up = made_up = (pid, f"{host}:{pid}:{secrets.token_hex(6)}")
    return made_up[1]


def new_token() -> str:
    """One acquisition's token: owns its slot, waiting-list entry and window entry."""
    return secrets.token_hex(8)


def clean_jid(jid: str | None) -> str:
    # Tabs and newlines separate fields in Redis entries; a jid is never expected to hold one.
    if not jid:
        return ""
    return str(jid).replace("\t", " ").replace("\r", " ").replace("\n", " ")
