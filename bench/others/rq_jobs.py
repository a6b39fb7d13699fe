"""RQ jobs for bench/compare.py (RQ enqueues functions by import path)."""

from bench.others.counter import incr, probe

__all__ = ["incr", "probe"]
