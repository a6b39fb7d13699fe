"""Chaos scenarios: faults struck at real worker processes, and exact counts of what came of every job."""
