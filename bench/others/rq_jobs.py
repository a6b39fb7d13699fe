"""RQ jobs for bench/compare.py (RQ enqueues functions by import path)."""

from bench.others.counter import incr, noop, probe

__all__ = ["incr", "noop", "probe"]
