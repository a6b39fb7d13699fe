"""Benchmarks (not tests): run with ``python -m bench.<name>``."""
