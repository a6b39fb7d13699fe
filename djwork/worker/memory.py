"""A process's memory use, as Sidekiq reports it: read by the heartbeat (own RSS) and the swarm (each child's)."""

from __future__ import annotations


def rss_kb(pid: int | str = "self") -> int:
    """Resident memory in KB from /proc (VmRSS, as Sidekiq reports it); 0 where unavailable."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0
